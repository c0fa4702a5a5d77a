package agent

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the agent's Prometheus collectors, named like the kubelet's
// where one exists.
type metrics struct {
	startup       prometheus.Histogram
	pulls         *prometheus.CounterVec
	pullDuration  prometheus.Histogram
	relist        prometheus.Histogram
	plegHealthy   prometheus.Gauge
	containerRuns prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		startup: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "syncpod", Name: "pod_start_duration_seconds",
			Help:    "Pod creation to all containers running and observed.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 8, 10, 15, 20, 30, 45, 60, 120},
		}),
		pulls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "syncpod", Name: "image_pulls_total", Help: "Image pulls by result.",
		}, []string{"result"}),
		pullDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "syncpod", Name: "image_pull_duration_seconds", Help: "PullImage call duration.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}),
		relist: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "syncpod", Name: "pleg_relist_duration_seconds", Help: "PLEG relist duration.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		plegHealthy: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "syncpod", Name: "pleg_healthy", Help: "1 when the PLEG reports healthy.",
		}),
		containerRuns: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "syncpod", Name: "containers_started_total", Help: "Containers started.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.startup, m.pulls, m.pullDuration, m.relist, m.plegHealthy, m.containerRuns} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) observePull(d interface{ Seconds() float64 }, err error) {
	result := "success"
	if err != nil {
		result = "failure"
	}
	m.pulls.WithLabelValues(result).Inc()
	m.pullDuration.Observe(d.Seconds())
}

func (m *metrics) setHealth(ok bool) {
	if ok {
		m.plegHealthy.Set(1)
	} else {
		m.plegHealthy.Set(0)
	}
}
