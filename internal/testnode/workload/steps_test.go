package main

import (
	"bytes"
	"os"
	"syscall"
	"testing"
)

func TestRunSteps(t *testing.T) {
	for _, tc := range []struct {
		args             []string
		code             int
		stdout, stderrIn string
	}{
		{args: []string{"echo", "hi", "exit", "3"}, code: 3, stdout: "hi\n"},
		{args: []string{"sleep", "1ms", "stderr", "oops"}, code: 0, stderrIn: "oops\n"},
		{args: []string{"exit", "0", "echo", "never"}, code: 0},
		{args: []string{"bogus"}, code: 2, stderrIn: "usage"},
		{args: []string{"sleep"}, code: 2, stderrIn: "needs an argument"},
		{args: []string{"exit", "256"}, code: 2, stderrIn: "bad code"},
		{args: []string{"sleep", "-1s"}, code: 2, stderrIn: "bad duration"},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb, make(chan os.Signal))
		if code != tc.code || out.String() != tc.stdout || !bytes.Contains(errb.Bytes(), []byte(tc.stderrIn)) {
			t.Errorf("run(%q) = %d, stdout %q, stderr %q; want %d, %q, stderr containing %q",
				tc.args, code, out.String(), errb.String(), tc.code, tc.stdout, tc.stderrIn)
		}
	}
}

func TestTermEndsPauseAndSleep(t *testing.T) {
	for _, args := range [][]string{nil, {"pause", "exit", "9"}, {"sleep", "1h", "exit", "9"}} {
		sigs := make(chan os.Signal, 1)
		sigs <- syscall.SIGTERM
		if code := run(args, &bytes.Buffer{}, &bytes.Buffer{}, sigs); code != 0 {
			t.Errorf("run(%q) after SIGTERM = %d, want 0", args, code)
		}
	}
}

func TestIgnoreTerm(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGTERM
	// The signal is swallowed and the sleep runs out.
	if code := run([]string{"ignore-term", "sleep", "20ms", "exit", "4"}, &bytes.Buffer{}, &bytes.Buffer{}, sigs); code != 4 {
		t.Errorf("run with ignore-term = %d, want 4", code)
	}
	if len(sigs) != 0 {
		t.Errorf("signal not consumed")
	}
}
