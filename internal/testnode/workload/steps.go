package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

const usage = `usage: workload [step ...]
steps: pause | sleep DURATION | exit CODE | echo TEXT | stderr TEXT | ignore-term |
       write PATH TEXT | wait-file PATH | cat PATH | expect-file PATH TEXT |
       http ADDR | touch PATH | rm PATH | exists PATH`

// step is one parsed instruction.
type step struct {
	op       string
	path     string
	text     string
	duration time.Duration
	code     int
}

// parse turns the arguments into steps, so that a bad argument is reported
// before anything runs.
func parse(args []string) ([]step, error) {
	if len(args) == 0 {
		return []step{{op: "pause"}}, nil
	}
	var steps []step
	for i := 0; i < len(args); i++ {
		op := args[i]
		needArg := func() (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("step %q needs an argument", op)
			}
			i++
			return args[i], nil
		}
		switch op {
		case "pause", "ignore-term":
			steps = append(steps, step{op: op})
		case "sleep":
			a, err := needArg()
			if err != nil {
				return nil, err
			}
			d, err := time.ParseDuration(a)
			if err != nil || d < 0 {
				return nil, fmt.Errorf("sleep: bad duration %q", a)
			}
			steps = append(steps, step{op: op, duration: d})
		case "exit":
			a, err := needArg()
			if err != nil {
				return nil, err
			}
			c, err := strconv.Atoi(a)
			if err != nil || c < 0 || c > 255 {
				return nil, fmt.Errorf("exit: bad code %q (want 0-255)", a)
			}
			steps = append(steps, step{op: op, code: c})
		case "echo", "stderr", "http", "touch", "rm", "exists":
			a, err := needArg()
			if err != nil {
				return nil, err
			}
			steps = append(steps, step{op: op, text: a})
		case "write", "wait-file", "cat", "expect-file":
			s, err := parseFileStep(op, needArg)
			if err != nil {
				return nil, err
			}
			steps = append(steps, s)
		default:
			return nil, fmt.Errorf("unknown step %q", op)
		}
	}
	return steps, nil
}

// run executes the steps and returns the exit code. Termination signals
// arrive on sigs.
func run(args []string, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	steps, err := parse(args)
	if err != nil {
		fmt.Fprintf(stderr, "workload: %v\n%s\n", err, usage)
		return 2
	}
	honourTerm := true
	// wait blocks for d (forever when d < 0) and reports whether a
	// termination signal that should end the program arrived.
	wait := func(d time.Duration) bool {
		var timeout <-chan time.Time
		if d >= 0 {
			timer := time.NewTimer(d)
			defer timer.Stop()
			timeout = timer.C
		}
		for {
			select {
			case <-sigs:
				if honourTerm {
					return true
				}
			case <-timeout:
				return false
			}
		}
	}
	for _, s := range steps {
		switch s.op {
		case "pause":
			if wait(-1) {
				return 0
			}
		case "ignore-term":
			honourTerm = false
		case "sleep":
			if wait(s.duration) {
				return 0
			}
		case "exit":
			return s.code
		case "echo":
			fmt.Fprintln(stdout, s.text)
		case "stderr":
			fmt.Fprintln(stderr, s.text)
		case "write", "wait-file", "cat", "expect-file":
			if code, done := runFileStep(s, stdout, stderr, wait); done {
				return code
			}
		case "http", "touch", "rm", "exists":
			if code, stop := fileOrNetStep(s, stderr); stop {
				return code
			}
		}
	}
	return 0
}
