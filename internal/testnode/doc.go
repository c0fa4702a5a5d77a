// Package testnode gives a test a real node: containerd 2.4.2 and runc on a
// private CRI socket, with an in-memory OCI registry on 127.0.0.1 that
// holds a pause image and whatever workload images the test builds. It is
// what every syncpod package's TestRealNode... tests run against.
//
// # Use
//
//	func TestRealNodeSomething(t *testing.T) {
//		n := testnode.Start(t) // skips or fails here when no node can run
//		img := n.PushImage(t, "demo/app", testnode.WithSize(8<<20))
//
//		c, err := criclient.Dial(ctx, n.Endpoint)           // or n.RuntimeService()
//		...
//		sb := n.SandboxConfig("web", "uid-1")
//		podID, _ := c.RunPodSandbox(ctx, sb, "")
//		cfg := n.ContainerConfig("app", img, "echo", "hi", "sleep", "1s", "exit", "3")
//		id, _ := c.CreateContainer(ctx, podID, cfg, sb)
//		_ = c.StartContainer(ctx, id)
//		st := n.WaitContainerExited(t, id, time.Minute) // st.ExitCode == 3
//		// testnode.ContainerLogPath(sb, "app") holds "... stdout F hi".
//		// n.BlobFetches() shows which layers containerd fetched, how often.
//	}
//
// Everything is torn down by t.Cleanup, even after a failed test: pods are
// stopped and removed through the CRI, containerd is stopped by its PID,
// any shim still serving this node (found by its -address argument) is
// killed by PID together with its containers, mounts under the node's
// directory are detached, the directory is deleted and the registry
// stopped. Nothing is shared between nodes, so parallel tests and test
// binaries (go test runs packages in parallel) each get their own. If a test
// binary dies before its cleanups run (a -timeout panic, SIGKILL), the
// first Start of a later run removes what it left: node directories record
// their owner's PID and containerd's, and only what they name is touched.
//
// # Gating
//
// Start needs root, the Go toolchain (to build the workload program) and
// the binaries installed by
//
//	bash hack/install-realnode.sh
//
// (go install of containerd, the runc shim, runc, crictl, critest and the
// CNI plugins into $HOME/.cache/syncpod/node/bin; cached, about two minutes
// the first time on two cores). What happens when the node cannot run:
//
//	SYNCPOD_REALNODE unset/"auto"  skip, saying what is missing and how to install it
//	SYNCPOD_REALNODE=require       fail the test instead (CI=true implies this)
//	SYNCPOD_REALNODE=off           skip every real-node test
//	SYNCPOD_NODE_BIN=DIR           take the binaries from DIR
//
// Name real-node tests TestRealNode... so `go test -run RealNode` selects them.
//
// # The node
//
// containerd runs with `containerd config default` changed as this kind of
// machine needs: root, state, temp, the gRPC and ttrpc sockets, the runc
// state root, the shim socket directory, CNI and NRI paths all inside
// Node.Dir; restrict_oom_score_adj = true (without CAP_SYS_RESOURCE every
// RunPodSandbox fails otherwise); runc's BinaryName set to the installed
// runc; the sandbox image set to Node.PauseImage; and a certs.d hosts.toml
// that sends pulls of Node.Registry over plain HTTP. The bin directory comes
// first on containerd's PATH so it finds the shim. WithConfigEdit changes
// anything else.
//
// There is no CNI: SandboxConfig and ContainerConfig use the node's network
// namespace (NamespaceMode_NODE) and set a log directory, so their configs
// run as they are.
//
// # Pod network and mirrored registries
//
// WithPodNetwork gives pods their own network namespaces and IPs without
// touching the machine's network: the node gets a network namespace of its
// own (Node.NetNS, removed at teardown), containerd runs inside it (via
// `nsenter --net`), the registry listens there too, and a CNI bridge with
// host-local IPAM (10.244.0.0/24), portmap and loopback serves the pods.
// Run clients that must reach pod IPs or the streaming server inside it:
// `nsenter --net=` + n.NetNS(). WithMirroredRegistries("registry.k8s.io",
// "gcr.io") sends pulls of those registries to the loopback registry, and
// PushFiles builds an image from arbitrary files (a busybox, say) under the
// upstream repository path, so images such as critest's
// registry.k8s.io/e2e-test-images/busybox:1.29-2 pull offline. A namespace
// left by a test binary killed before its cleanup is named
// syncpod-<pid>-<hex> (`ip netns delete` it).
//
// # Images
//
// Every image holds one static program, /workload (package
// internal/testnode/workload), built once per test binary with
// CGO_ENABLED=0. Its arguments are steps:
//
//	pause           wait for SIGTERM/SIGINT, exit 0 (the default command)
//	sleep DURATION  sleep a Go duration; SIGTERM/SIGINT ends it with exit 0
//	exit CODE       exit with CODE
//	echo TEXT       print TEXT to stdout (stderr TEXT: to stderr)
//	ignore-term     ignore SIGTERM/SIGINT from now on (only SIGKILL stops it)
//
// PushImage options choose the tag, the size (random, incompressible
// padding), the number of layers and the default command. Every image
// gets fresh random padding, so sizes and layer counts are exact knobs for
// pull tests. The registry counts requests: BlobFetches (GETs per digest),
// ManifestFetches, Requests (everything), ResetRegistryCounts.
//
// # Faults
//
// KillContainerd sends SIGKILL to containerd as a crash would;
// RestartContainerd stops it (if running) and starts it again with the same
// config and state. Containers keep running under their shims in between,
// as on a real node, and the node's own client connection reconnects.
//
// FreezeContainerd (Thaw ends it) and FreezeFor (a timer ends it) make
// containerd hang: its daemon, by the PID the node started, and only it
// (not the shims, not the containers), goes into a cgroup v1 freezer cgroup
// named syncpod-<test pid>-<node dir> and is frozen, so CRI calls run into
// their deadlines. Where the freezer cannot be used the daemon gets SIGSTOP
// and SIGCONT instead; Freeze.Method says which. SlowDisk throttles the
// daemon and its shims with blkio (bytes and operations per second, read
// and write) on the disk holding the node's root and state; a directory on
// tmpfs or another file system without a block device is a
// *NoBlockDeviceError. Under cgroup v1 the throttle holds for reads,
// direct I/O and writes the process flushes itself (containerd fsyncs
// blobs as it commits them: a 64 MiB pull at 4 MiB/s takes about 16 s
// instead of half a second here) but not for buffered writes the kernel
// writes back later (snapshot unpacking), which v1 does not charge to the
// cgroup.
//
// Faults always end: by their own undo, a t.Cleanup registered before they
// start, the node's teardown (which ends them first), KillContainerd and
// RestartContainerd (which end a freeze after signalling), and, after a
// test binary died, the stale cleanup of a later Start, which thaws and
// removes the cgroups a dead test process named and continues a containerd
// it left stopped. Bad arguments are *ArgError; a fault that cannot be
// applied is a *FaultError (wrapping ErrContainerdDown, ErrFaultActive or
// the cgroup error).
package testnode
