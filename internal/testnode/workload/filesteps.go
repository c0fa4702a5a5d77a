package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Exit codes of the file steps.
const (
	fileErrorCode    = 3 // write or cat failed
	fileMismatchCode = 4 // expect-file found other content, or no file
)

// fileWaitPoll is how often wait-file looks for its file.
const fileWaitPoll = 20 * time.Millisecond

// parseFileStep parses write PATH TEXT, wait-file PATH, cat PATH and
// expect-file PATH TEXT.
func parseFileStep(op string, needArg func() (string, error)) (step, error) {
	path, err := needArg()
	if err != nil {
		return step{}, err
	}
	if !filepath.IsAbs(path) {
		return step{}, fmt.Errorf("%s: path %q is not absolute", op, path)
	}
	s := step{op: op, path: path}
	if op == "write" || op == "expect-file" {
		if s.text, err = needArg(); err != nil {
			return step{}, err
		}
	}
	return s, nil
}

// runFileStep runs one file step; done reports that the program ends
// with code. wait is run's signal-aware sleep.
func runFileStep(s step, stdout, stderr io.Writer, wait func(time.Duration) bool) (code int, done bool) {
	switch s.op {
	case "write": // through a temporary file, so a reader never sees half of it
		tmp := s.path + ".tmp"
		if err := os.WriteFile(tmp, []byte(s.text), 0o644); err != nil {
			fmt.Fprintf(stderr, "workload: write: %v\n", err)
			return fileErrorCode, true
		}
		if err := os.Rename(tmp, s.path); err != nil {
			fmt.Fprintf(stderr, "workload: write: %v\n", err)
			return fileErrorCode, true
		}
	case "wait-file":
		for {
			if _, err := os.Stat(s.path); err == nil {
				return 0, false
			}
			if wait(fileWaitPoll) {
				return 0, true
			}
		}
	case "cat":
		b, err := os.ReadFile(s.path)
		if err != nil {
			fmt.Fprintf(stderr, "workload: cat: %v\n", err)
			return fileErrorCode, true
		}
		_, _ = stdout.Write(b)
	case "expect-file":
		b, err := os.ReadFile(s.path)
		if err != nil || string(b) != s.text {
			fmt.Fprintf(stderr, "workload: expect-file %s: got %q (%v), want %q\n", s.path, b, err, s.text)
			return fileMismatchCode, true
		}
	}
	return 0, false
}
