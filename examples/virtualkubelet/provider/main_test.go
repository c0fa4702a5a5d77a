package provider_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// go.opencensus.io/stats/view starts this worker in its package
		// init (virtual-kubelet's node/api imports it through its
		// tracing); it lives as long as the process and cannot be stopped.
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}
