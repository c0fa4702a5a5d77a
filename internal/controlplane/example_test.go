package controlplane_test

import (
	"errors"
	"fmt"

	"github.com/syncpod/syncpod/internal/controlplane"
)

// Without the binaries New says so with ErrUnavailable (Start turns that
// into a skip, or a failure when a real node is required); with them, URL,
// CAData and Token are what a client (client-go's rest.Config) needs.
func ExampleNew() {
	cp, err := controlplane.New(controlplane.WithBinDir("/nonexistent"))
	if errors.Is(err, controlplane.ErrUnavailable) {
		fmt.Println("no control plane on this machine")
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cp.Close()
	fmt.Println(cp.URL, cp.Token != "")
	// Output: no control plane on this machine
}
