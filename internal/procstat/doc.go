// Package procstat reads a process's CPU time and resident memory from
// /proc, for tests and benchmarks that measure an agent from outside (the
// idle footprint, many virtual nodes on one control plane), and the whole
// machine's CPU time from /proc/stat, which the start admission reads to
// tell when the node's cores are busy (Node).
//
//	cpu0, _ := procstat.CPU(pid)
//	... // the window
//	cpu1, _ := procstat.CPU(pid)
//	rss, _ := procstat.RSS(pid)
//	fmt.Printf("%.2f%% of a core, %d MB\n", 100*(cpu1-cpu0).Seconds()/window.Seconds(), rss>>20)
package procstat
