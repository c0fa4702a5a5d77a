package agent

import (
	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/syncpod/syncpod/concurrentstart/admission"
)

// newStartAdmission is a syncpod-mode agent's own start admission: an
// AIMD that reads the node's CPU where it can. The agent runs on the node
// whose runtime it drives, so /proc/stat is that runtime's CPU; without
// it (not Linux, no /proc) latency alone sets the bound.
func newStartAdmission(clk clock.PassiveClock, log *zap.Logger) (*admission.Controller, error) {
	var cfg admission.AIMDConfig
	if cpu, err := admission.NodeCPU(); err == nil {
		cfg.CPU = cpu
	} else {
		log.Info("start admission without the node's CPU time: latency alone sets its bound", zap.Error(err))
	}
	l, err := admission.NewAIMD(cfg)
	if err != nil {
		return nil, err
	}
	return admission.New(admission.WithLimiter(l), admission.WithClock(clk))
}
