// Package controlplane runs a real Kubernetes control plane for tests: etcd
// v3.6.16 and kube-apiserver v1.37.2 (the binaries hack/install-kube.sh
// installs) on 127.0.0.1, with a static admin token, and with
// WithRealCluster kube-controller-manager v1.37.2 as well, so that it
// behaves as a cluster's control plane (service accounts, tokens,
// controllers). It is what the virtual-kubelet front-end and the
// many-nodes benchmark register against, in place of client-go's fake
// clientset.
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
//	func TestRealNodeCluster(t *testing.T) {
//		cp := controlplane.Start(t, controlplane.WithRealCluster()) // + kube-controller-manager
//		out, err := cp.Kubectl(ctx, "-n", "default", "get", "serviceaccount", "default", "-o", "json")
//		...                                  // kubectl --kubeconfig cp.KubeconfigPath works too
//	}
//
// The package itself does not import client-go: URL, Token and CAData (the
// API server's self-signed serving certificate, which names 127.0.0.1) are
// what any client needs; Kubeconfig writes them as a kubeconfig, which is
// also on disk at KubeconfigPath. Kubectl runs the real kubectl
// (hack/install-kube.sh builds it too) with that kubeconfig and returns
// its output; a failed run is a *KubectlError holding kubectl's stderr.
//
// # The control plane
//
// etcd listens on two free loopback ports (client and peer) with a private
// data directory and no fsync. kube-apiserver serves HTTPS on a free
// loopback port with its own self-signed certificate; the endpoint
// reconciler is off (it refuses a loopback advertise address otherwise),
// priority and fairness are off, service accounts are signed with an RSA
// key made at start, and the admin token belongs to system:masters. It
// reaches kubelets (a node's daemonEndpoints port on its address) with a
// client certificate for KubeletClientUser in system:masters, signed by a
// CA made at start (KubeletClientCAData: a node's client CA), and does
// not verify their serving certificates.
//
// By default the ServiceAccount admission plugin is off, since no
// controller-manager creates the default service accounts (pods are
// admitted without one, and get no kube-api-access volume), and nothing
// else runs: no controller-manager, no scheduler, so pods must name their
// node, and namespaces are never finalised. This is what the
// virtual-kubelet front-end's tests use: cheap to start, and their pods
// need no service-account volume.
//
// WithRealCluster turns ServiceAccount admission on and starts
// kube-controller-manager after the API server: its own user
// (system:kube-controller-manager, a static token the bootstrap RBAC policy
// binds), its own kubeconfig (also for delegated authentication and
// authorization), its own self-signed serving certificate on a free
// loopback port, no leader election, and --use-service-account-credentials
// (each controller acts as its own service account in kube-system). It
// runs the serviceaccount, serviceaccount-token,
// root-ca-certificate-publisher (the API server's certificate as each
// namespace's kube-root-ca.crt), namespace, garbage-collector, deployment,
// replicaset and job controllers, and signs with the service-account key
// the API server verifies. New returns once its /healthz says ok and the
// default namespace's default ServiceAccount exists. Pods then get the
// projected kube-api-access volume, as in any cluster. There is still no
// scheduler: a Deployment's Pods stay Pending unless a node is named.
//
// Each process runs in the directory Dir, which Close removes after
// stopping kube-controller-manager, the API server and then etcd by PID
// (SIGTERM, then SIGKILL after the stop timeout). All die with the test
// binary (parent-death signal);
// a later run removes directories whose owner died, killing a process left
// from one only if its command line names that directory.
//
// # Gating
//
// A missing binary (kube-controller-manager only with WithRealCluster;
// kubectl only for Kubectl) makes New or Kubectl fail with an error
// wrapping ErrUnavailable;
// Start hands it to testnode.Need, which skips, or fails under
// SYNCPOD_REALNODE=require and CI=true. The binaries are looked up as
// testnode looks up containerd: SYNCPOD_NODE_BIN, else
// $HOME/.cache/syncpod/node/bin.
package controlplane
