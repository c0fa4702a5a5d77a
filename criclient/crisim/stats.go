package crisim

import (
	"sync/atomic"

	"google.golang.org/grpc"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// methodStats counts the calls of one CRI method.
type methodStats struct {
	calls       atomic.Int64
	inflight    atomic.Int64
	maxInflight atomic.Int64
}

func (s *methodStats) enter() {
	n := s.inflight.Add(1)
	for {
		m := s.maxInflight.Load()
		if n <= m || s.maxInflight.CompareAndSwap(m, n) {
			return
		}
	}
}

// Methods returns the names of all CRI methods (RuntimeService and
// ImageService), the names the per-method options and counters take.
func Methods() []string {
	var names []string
	for _, sd := range []*grpc.ServiceDesc{&runtimeapi.RuntimeService_ServiceDesc, &runtimeapi.ImageService_ServiceDesc} {
		for _, m := range sd.Methods {
			names = append(names, m.MethodName)
		}
		for _, st := range sd.Streams {
			names = append(names, st.StreamName)
		}
	}
	return names
}

func newStats() map[string]*methodStats {
	m := map[string]*methodStats{}
	for _, name := range Methods() {
		m[name] = &methodStats{}
	}
	return m
}

// stat returns the counters of method; stats is never written after New, so
// no lock is needed.
func (r *Runtime) stat(method string) *methodStats {
	if r == nil {
		return &methodStats{}
	}
	if s, ok := r.stats[method]; ok {
		return s
	}
	return &methodStats{} // not a CRI method: counted nowhere
}

// Calls returns how many calls of method (e.g. "ListContainers") the runtime
// received since New or the last ResetCalls, including failed ones.
func (r *Runtime) Calls(method string) int64 { return r.stat(method).calls.Load() }

// CallCounts returns the non-zero call counts by method.
func (r *Runtime) CallCounts() map[string]int64 {
	out := map[string]int64{}
	if r == nil {
		return out
	}
	for name, s := range r.stats {
		if n := s.calls.Load(); n > 0 {
			out[name] = n
		}
	}
	return out
}

// ResetCalls zeroes the call counters and sets each MaxInFlight to the
// number of calls in flight now.
func (r *Runtime) ResetCalls() {
	if r == nil {
		return
	}
	for _, s := range r.stats {
		s.calls.Store(0)
		s.maxInflight.Store(s.inflight.Load())
	}
}

// InFlight returns how many calls of method are inside the runtime now
// (waiting or working).
func (r *Runtime) InFlight(method string) int { return int(r.stat(method).inflight.Load()) }

// MaxInFlight returns the highest number of calls of method that were inside
// the runtime at once since New or the last ResetCalls: use it to assert that
// a client bounds its concurrency.
func (r *Runtime) MaxInFlight(method string) int { return int(r.stat(method).maxInflight.Load()) }
