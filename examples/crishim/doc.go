// Command crishim is a CRI proxy between an unmodified kubelet and its
// container runtime. See package
// github.com/syncpod/syncpod/examples/crishim/shim for what it guarantees.
//
//	go run ./examples/crishim \
//		--listen unix:///run/syncpod/crishim.sock \
//		--runtime-endpoint unix:///run/containerd/containerd.sock \
//		--health-listen 127.0.0.1:10258 \
//		--mutating-qps 20 --mutating-burst 40 --mutating-inflight 8 \
//		--pull-inflight 3 --relist-period 1s --max-staleness 10s \
//		--async RunPodSandbox
//
// Then start the kubelet with
// --container-runtime-endpoint=unix:///run/syncpod/crishim.sock.
// SIGTERM or SIGINT drains: new calls fail with UNAVAILABLE, event streams
// end, queued asynchronous RunPodSandbox calls finish (up to
// --drain-timeout), then the server stops.
package main
