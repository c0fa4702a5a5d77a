package main

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// healthServer serves the shim's /healthz on its own listener until stop.
type healthServer struct {
	srv  *http.Server
	addr net.Addr
	done chan struct{} // closed when Serve has returned
	once sync.Once
}

// startHealth listens on addr and serves h there in the background.
func startHealth(addr string, h http.Handler) (*healthServer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	hs := &healthServer{
		srv:  &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second},
		addr: l.Addr(),
		done: make(chan struct{}),
	}
	go func() {
		defer close(hs.done)
		_ = hs.srv.Serve(l)
	}()
	return hs, nil
}

// stop closes the server and its connections and waits for it to return.
// Idempotent; a nil server (no --health-listen) does nothing.
func (hs *healthServer) stop() {
	if hs == nil {
		return
	}
	hs.once.Do(func() { _ = hs.srv.Close() })
	<-hs.done
}
