// Package scenario builds the pod sets and simulated-runtime settings that
// the syncpod example's demo and the node benchmark run: a burst of pods
// with init containers and sidecars, one very large image among small
// pods, a runtime stall, and churn.
package scenario
