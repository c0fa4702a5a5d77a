package agent

import (
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	cri "k8s.io/cri-api/pkg/apis"
	"k8s.io/utils/clock"
)

// newImageGate builds the syncpod-mode image gate.
func newImageGate(img cri.ImageManagerService, clk clock.WithTickerAndDelayedExecution, log *zap.Logger, cfg config,
	wake func(types.UID), obs func(string, time.Duration, error)) imageGate {
	return newBackgroundPuller(img, clk, cfg.pullParallel, cfg.scaled(ImagePullBackoff), wake, obs)
}
