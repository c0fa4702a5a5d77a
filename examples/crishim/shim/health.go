package shim

import (
	"fmt"
	"net/http"
)

// HealthHandler serves /healthz: 200 "ok" while the shim answers from data
// within its staleness bound, 503 with the reason (how old the data is and
// the runtime's last error) otherwise, and 503 while draining.
func (s *Shim) HealthHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if s.draining() {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, ErrDraining)
			return
		}
		if err := s.Health(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}
