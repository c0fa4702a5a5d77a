// Package controlplane runs a real Kubernetes control plane for tests: etcd
// v3.6.16 and kube-apiserver v1.37.2 (the binaries hack/install-kube.sh
// installs) on 127.0.0.1, with a static admin token. It is what the
// virtual-kubelet front-end and the many-nodes benchmark register against,
// in place of client-go's fake clientset.
//
// # Use
//
//	func TestRealNodeSomething(t *testing.T) {
//		cp := controlplane.Start(t)          // etcd + kube-apiserver, stopped in t.Cleanup
//		cfg := &rest.Config{Host: cp.URL, BearerToken: cp.Token,
//			TLSClientConfig: rest.TLSClientConfig{CAData: cp.CAData}}
//		...                                  // client-go, virtual-kubelet, kubectl --kubeconfig
//		_ = cp.RestartAPIServer()            // same port, same etcd: nothing is lost
//	}
//
// The package itself does not import client-go: URL, Token and CAData (the
// API server's self-signed serving certificate, which names 127.0.0.1) are
// what any client needs, and Kubeconfig writes them as a kubeconfig file.
//
// # The control plane
//
// etcd listens on two free loopback ports (client and peer) with a private
// data directory and no fsync. kube-apiserver serves HTTPS on a free
// loopback port with its own self-signed certificate; the endpoint
// reconciler is off (it refuses a loopback advertise address otherwise),
// priority and fairness are off, service accounts are signed with an RSA
// key made at start, the admin token belongs to system:masters, and the
// ServiceAccount admission plugin is off, since no controller-manager
// creates the default service accounts (pods are admitted without one).
// Nothing else runs: no controller-manager, no scheduler, so pods must name
// their node, and namespaces are never finalised.
//
// Each process runs in the directory Dir, which Close removes after
// stopping the API server and then etcd by PID (SIGTERM, then SIGKILL after
// the stop timeout). Both die with the test binary (parent-death signal);
// a later run removes directories whose owner died, killing a process left
// from one only if its command line names that directory.
//
// # Gating
//
// A missing binary makes New fail with an error wrapping ErrUnavailable;
// Start hands it to testnode.Need, which skips, or fails under
// SYNCPOD_REALNODE=require and CI=true. The binaries are looked up as
// testnode looks up containerd: SYNCPOD_NODE_BIN, else
// $HOME/.cache/syncpod/node/bin.
package controlplane
