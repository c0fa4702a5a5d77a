package criclient

import "time"

// Observer is told about every call the client sends to the runtime, for
// metrics. Methods are called synchronously on the caller's goroutine (a
// snapshot refresh's own goroutine for refreshes), outside any lock of the
// client; they must be quick and safe for concurrent use. Lists answered
// from a snapshot are not runtime calls: they go to SnapshotServed if the
// Observer also implements SnapshotObserver. GetContainerEvents, a stream,
// is not observed.
type Observer interface {
	// CallAdmitted is called when a call passed admission control and is
	// about to be sent. Info.Latency and Info.Err are zero.
	CallAdmitted(info CallInfo)
	// CallFinished is called when the runtime answered (or the call failed).
	CallFinished(info CallInfo)
}

// CallInfo describes one runtime call.
type CallInfo struct {
	// Method is the CRI method name, for example "ListContainers".
	Method string
	// Class is the method's admission class.
	Class Class
	// QueueWait is how long the call waited for admission (token bucket and
	// in-flight bound).
	QueueWait time.Duration
	// InFlight is the number of calls of this method being sent to the
	// runtime, including this one in CallAdmitted and excluding it in
	// CallFinished.
	InFlight int
	// Latency is the time from admission to the runtime's answer.
	Latency time.Duration
	// Err is the call's error (nil on success); in CallFinished only.
	Err error
}

// ObserverFuncs adapts two functions to an Observer; a nil func is skipped.
type ObserverFuncs struct {
	// Admitted, if not nil, is called by CallAdmitted: once per call, when
	// it has been admitted and is about to be sent to the runtime.
	Admitted func(CallInfo)
	// Finished, if not nil, is called by CallFinished: once per admitted
	// call, when the runtime has answered or the call has failed.
	Finished func(CallInfo)
}

var _ Observer = ObserverFuncs{}

// CallAdmitted implements Observer.
func (f ObserverFuncs) CallAdmitted(info CallInfo) {
	if f.Admitted != nil {
		f.Admitted(info)
	}
}

// CallFinished implements Observer.
func (f ObserverFuncs) CallFinished(info CallInfo) {
	if f.Finished != nil {
		f.Finished(info)
	}
}

// SnapshotObserver is an optional interface of an Observer: with
// WithListSnapshots, it is told about every List answered from a snapshot
// without a runtime call, with the snapshot's age (counted from the start of
// the refresh that produced it). Hits over hits+calls is the hit ratio.
type SnapshotObserver interface {
	// SnapshotServed is called once per List answered from a snapshot;
	// method is the CRI method name ("ListPodSandbox", "ListContainers")
	// and age is how old the snapshot was when served, counted from the
	// start of the refresh that produced it.
	SnapshotServed(method string, age time.Duration)
}
