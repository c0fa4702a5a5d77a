// Command workload is the one program inside every image the test node
// builds: the pause image runs it as "workload pause", workload images run
// whatever steps the test puts in the container's args.
//
// The arguments are a list of steps, run in order:
//
//	pause            wait for SIGTERM or SIGINT, then exit 0
//	sleep DURATION   sleep for a Go duration ("1.5s", "10m")
//	exit CODE        exit at once with CODE (0-255)
//	echo TEXT        print TEXT and a newline to stdout
//	stderr TEXT      print TEXT and a newline to stderr
//	ignore-term      ignore SIGTERM and SIGINT from now on (to exercise
//	                 stop timeouts that end in SIGKILL)
//	write PATH TEXT  write TEXT (no newline) to the file PATH, through a
//	                 temporary file renamed over it; exit 3 on failure
//	wait-file PATH   wait until PATH exists (SIGTERM ends the wait, exit 0)
//	cat PATH         print the file PATH to stdout; exit 3 on failure
//	expect-file PATH TEXT
//	                 exit 4 unless the file PATH holds exactly TEXT
//
// When the steps run out the program exits 0. SIGTERM or SIGINT during a
// sleep ends the program with exit code 0 as well, so StopContainer is quick,
// unless ignore-term came first. With no arguments it behaves as "pause".
// Bad arguments print a usage message to stderr and exit 2.
//
// Examples: "echo hello exit 3" prints hello and exits 3; "sleep 2s exit 7"
// exits 7 after two seconds; "ignore-term pause" only dies by SIGKILL.
//
// It must be built statically (CGO_ENABLED=0): the images hold nothing else.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, sigs))
}
