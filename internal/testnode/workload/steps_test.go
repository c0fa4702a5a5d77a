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

func TestFileSteps(t *testing.T) {
	dir := t.TempDir()
	f := dir + "/f"
	for _, tc := range []struct {
		args             []string
		code             int
		stdout, stderrIn string
	}{
		{args: []string{"write", f, "hello", "expect-file", f, "hello", "cat", f}, code: 0, stdout: "hello"},
		{args: []string{"expect-file", f, "other"}, code: 4, stderrIn: `got "hello"`},
		{args: []string{"expect-file", dir + "/missing", "x"}, code: 4, stderrIn: "no such file"},
		{args: []string{"cat", dir + "/missing"}, code: 3, stderrIn: "no such file"},
		{args: []string{"write", dir + "/no/dir", "x"}, code: 3, stderrIn: "write"},
		{args: []string{"wait-file", f, "echo", "there"}, code: 0, stdout: "there\n"},
		{args: []string{"write", "relative", "x"}, code: 2, stderrIn: "not absolute"},
		{args: []string{"expect-file", f}, code: 2, stderrIn: "needs an argument"},
		{args: []string{"wait-file"}, code: 2, stderrIn: "needs an argument"},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb, make(chan os.Signal))
		if code != tc.code || out.String() != tc.stdout || !bytes.Contains(errb.Bytes(), []byte(tc.stderrIn)) {
			t.Errorf("run(%q) = %d, stdout %q, stderr %q; want %d, %q, stderr containing %q",
				tc.args, code, out.String(), errb.String(), tc.code, tc.stdout, tc.stderrIn)
		}
	}
}

// wait-file waits for a file another process writes, and a termination
// signal ends the wait.
func TestWaitFile(t *testing.T) {
	f := t.TempDir() + "/later"
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"wait-file", f, "exit", "7"}, &bytes.Buffer{}, &bytes.Buffer{}, make(chan os.Signal))
	}()
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != 7 {
		t.Errorf("wait-file then exit 7 = %d", code)
	}
	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGTERM
	if code := run([]string{"wait-file", f + ".never", "exit", "9"}, &bytes.Buffer{}, &bytes.Buffer{}, sigs); code != 0 {
		t.Errorf("wait-file after SIGTERM = %d, want 0", code)
	}
}
