// Package kubelethost runs the real kubelet (v1.37.2, the binary
// hack/install-kube.sh installs) as a consumer of a CRI endpoint in tests:
// a test node's containerd (internal/testnode) or anything serving the CRI
// in front of it, such as the crishim example.
//
// # Use
//
//	func TestRealNodeSomething(t *testing.T) {
//		n := testnode.Start(t)
//		img := n.PushImage(t, "demo/app")
//		k := kubelethost.Start(t, n.Endpoint, kubelethost.WithMaxContainerRestartPeriod(time.Second))
//		_ = k.WriteStaticPod(pod)           // a *corev1.Pod; hostNetwork, the node has no CNI
//		// poll the runtime for "pod.Name-"+k.NodeName ... k.PodName(pod.Name)
//		_ = k.Healthz(ctx)                  // nil while the sync loop runs
//		h, _ := k.Histogram(ctx, kubelethost.RelistDurationMetric)
//		errs, _ := k.CRIErrors()            // E lines with a gRPC status
//		_ = k.RemoveStaticPod(pod.Name)
//	}
//
// Start stops the kubelet in t.Cleanup (and prints the end of its log when
// the test failed). Register it after the node and any CRI server in front
// of the node, so that cleanups stop the kubelet first and it does not
// recreate the pods the node's teardown removes.
//
// # The kubelet
//
// By default the kubelet runs standalone: no API server and no kubeconfig,
// pods come only from the manifest directory and the node is not
// registered. WithKubeconfig registers it to an API server instead
// (internal/controlplane): it creates its Node, renews its Lease and posts
// the Node's conditions, so a test reads Ready with its reason and message
// as an operator would; static pods then get mirror pods, and pods bound
// to the node through the API run too. Either way the authenticated port admits anonymous requests (AlwaysAllow), so /metrics
// can be read. Its KubeletConfiguration is the one that works on these
// machines: cgroupfs driver, no QoS cgroups or node allocatable, cgroup v1
// allowed, swap allowed, no iptables chains, no OOM score change, eviction
// and image GC thresholds out of reach, private root, certificate, pod log
// and volume plugin directories, and three free ports on 127.0.0.1 (Port,
// ReadOnlyPort, HealthzPort).
//
// It runs under `unshare --mount --propagation slave`: in that mount
// namespace /var/lib and /var/log are private directories (the kubelet
// creates /var/lib/kubelet/device-plugins whatever its root dir, and
// /var/log/containers), and the sysctls it sets at start (vm.overcommit_memory,
// kernel.panic, kernel.panic_on_oops, ...) are files that already hold the
// values it wants. The host's mounts still appear inside, nothing made
// inside leaks out, and the machine is as it was afterwards. The root dir
// stays visible to the runtime, which mounts the kubelet's per-pod files
// (etc-hosts, termination logs) into containers.
//
// The shell that sets up the namespace execs the kubelet, so PID is the
// kubelet's: Close sends it SIGTERM (SIGKILL after the stop timeout), waits
// for it and removes Dir. The kubelet dies with the test binary
// (parent-death signal), and a later run removes directories whose owner
// died, killing a kubelet still running from one only if its command line
// names that directory's config.
//
// # Gating
//
// A missing kubelet binary (or unshare, or root) makes New fail with an
// error wrapping ErrUnavailable; Start hands it to testnode.Need, which
// skips, or fails under SYNCPOD_REALNODE=require and CI=true. The binary
// is looked up as testnode looks up containerd: SYNCPOD_NODE_BIN, else
// $HOME/.cache/syncpod/node/bin.
//
// # Reading the kubelet
//
// Metrics returns /metrics; ParseText, Histograms, Merge, Value and
// Histogram's Sub, Mean and Quantile read it (RelistDurationMetric and
// PodStartMetric are the ones tests measure; only a registered kubelet
// exports PodStartSLIMetric, which needs pods observed through an API
// server). Healthz asks the read-only port's /healthz, which fails when
// the sync loop stops. Log and ParseLog split the klog log into entries;
// CRIErrors keeps the error entries carrying a gRPC status, PLEGUnhealthy
// those reporting the PLEG unhealthy after start.
package kubelethost
