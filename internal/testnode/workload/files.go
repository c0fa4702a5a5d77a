package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
)

// fileOrNetStep runs an http, touch, rm or exists step; stop says the
// program must end with code.
func fileOrNetStep(s step, stderr io.Writer) (code int, stop bool) {
	var err error
	switch s.op {
	case "http":
		var l net.Listener
		if l, err = net.Listen("tcp", s.text); err == nil {
			go func() {
				_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					_, _ = io.WriteString(w, "ok\n")
				}))
			}()
		}
	case "touch":
		var f *os.File
		if f, err = os.Create(s.text); err == nil {
			err = f.Close()
		}
	case "rm":
		if err = os.Remove(s.text); errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
	case "exists":
		if _, err := os.Stat(s.text); err != nil {
			return 1, true
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "workload: %s %s: %v\n", s.op, s.text, err)
		return 1, true
	}
	return 0, false
}
