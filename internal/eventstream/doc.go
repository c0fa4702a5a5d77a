// Package eventstream is the one reader of the CRI container event stream
// (RuntimeService.GetContainerEvents) that the syncpod packages share. It
// keeps a stream open for as long as it runs: a stream that ends, by an
// error, by a return, or by the runtime closing the events channel, is
// reconnected after a jittered back-off (internal/backoff's Sequence). Every
// time a stream opens, the OnConnect hook runs before the stream's first
// event is handed on, so the caller can relist and lose nothing that
// happened while no stream was open.
//
// A panic inside the runtime's GetContainerEvents is recovered and ends that
// stream like an error: a failing runtime never kills the process. The
// hooks are the caller's code and are not recovered.
package eventstream
