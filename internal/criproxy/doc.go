// Package criproxy is a transparent gRPC proxy in front of a CRI socket that
// counts the calls passing through it, per method.
//
// Benchmarks and tests put it between a process under measurement and a
// real runtime, to count the runtime calls that process makes (containerd
// keeps no per-client counts). It forwards every method, streams included,
// as raw bytes: it needs no knowledge of the CRI messages and adds no
// conversion cost beyond one copy per frame.
package criproxy
