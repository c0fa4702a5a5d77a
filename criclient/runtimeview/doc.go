// Package runtimeview keeps a local, snapshot-consistent view of a CRI
// runtime's pod sandboxes and containers, fed by the runtime's container
// event stream and a periodic relist, and fans that one event stream out to
// any number of subscribers, each with its own buffer.
//
// It is what a CRI proxy or an agent with many readers puts between them
// and the runtime: List calls are answered from memory, so a runtime whose
// store is locked by a burst of pod creations cannot make a relist time
// out, and N watchers cost the runtime one event stream.
//
// # Use
//
//	c, _ := criclient.Dial(ctx, "unix:///run/containerd/containerd.sock")
//	v, err := runtimeview.New(c, runtimeview.WithRelistPeriod(time.Second),
//		runtimeview.WithMaxStaleness(10*time.Second))
//	if err != nil { ... } // *ConfigError: nil or typed-nil source, or an invalid option
//	defer v.Close()
//
//	id, err := c.RunPodSandbox(ctx, cfg, "")
//	v.SandboxChanged(id)                  // read-your-writes from here on
//	pods, err := v.ListPodSandbox(ctx, nil) // holds id
//
//	sub, err := v.Subscribe(ctx, 1000)
//	for ev := range sub.Events() { ... }
//	err = sub.Err() // why it ended: ErrOverflow, ErrUpstreamLost, ErrClosed
//
// Any Source works: criclient.Client, cri-client, cri-api's fakes.
//
// # Guarantees
//
//   - Bounded staleness: a read returns only data from a relist that
//     started at most WithMaxStaleness before the read, updated since by
//     events. Otherwise it fails with *StaleError (codes.Unavailable for a
//     gRPC caller), which wraps the runtime's last error, and Health says
//     the same. A runtime that stops answering is reported, never hidden
//     behind a frozen world. WithStaleReads keeps reads answered from the
//     last data past the bound, for a caller that reports the runtime down
//     by another path; Health still fails.
//   - Read-your-writes: after SandboxChanged / ContainerChanged /
//     SandboxRemoved / ContainerRemoved return, every read that begins
//     later reflects that mutation. Changes are confirmed in the
//     background with one status call each (at most 16 at once), and a
//     read waits only for confirmations of mutations reported before it
//     began — never behind mutations in flight — and no longer than the
//     staleness bound: a runtime that cannot confirm in time makes the read
//     fail with *StaleError rather than hang.
//   - Changes made by others (containers exiting, other clients) appear
//     as soon as their event arrives, and at the latest with the next
//     relist.
//   - Merging is monotonic per object: a relist never overwrites what an
//     event or a confirmation observed after the relist started, and an
//     object removed after a relist started is not brought back by it.
//   - Filters are applied as containerd applies them (exact ID or unique
//     prefix, state, label selector).
//   - Events reach subscribers in the runtime's order, after the view has
//     applied them, so a subscriber that lists on an event sees it. A
//     subscriber whose buffer is full when an event arrives is ended with
//     ErrOverflow: it lost that event and knows it, and neither the
//     runtime, the view nor any other subscriber waited for it. When the
//     runtime's stream breaks every subscription ends with ErrUpstreamLost
//     (the gap is unknown); the view re-opens the stream with back-off and
//     relists, and Subscribe waits until the stream is open again, so no
//     subscription ever has a silent gap.
//   - Close ends everything and waits for every goroutine.
//   - Bad input is an error, never a panic: New rejects a nil Source or an
//     invalid option value with *ConfigError before starting anything;
//     reads and Subscribe reject a nil context with an *ArgError. A read
//     or Subscribe whose context ends returns an error for which
//     errors.Is(err, ctx.Err()) holds and whose gRPC code is Canceled or
//     DeadlineExceeded, as a gRPC server would report it.
//
// # How it beats the kubelet
//
// The kubelet's PLEG relists the runtime every second and each of its
// List calls waits for the runtime's store: during a burst of
// RunPodSandbox calls a relist can take seconds and trip the PLEG health
// check. Its evented PLEG holds one event stream per consumer, and
// containerd drops events for a slow reader without saying so. Here
// relists are answered from memory, the runtime sees one stream, and a
// lost event always ends the subscription with an error.
package runtimeview
