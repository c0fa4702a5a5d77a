package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"
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

func TestMarkerSteps(t *testing.T) {
	path := t.TempDir() + "/marker"
	quiet := func(args ...string) int { return run(args, &bytes.Buffer{}, &bytes.Buffer{}, make(chan os.Signal)) }
	if code := quiet("exists", path, "exit", "5"); code != 1 {
		t.Fatalf("exists of a missing file = %d, want 1", code)
	}
	if code := quiet("touch", path, "exists", path, "exit", "5"); code != 5 {
		t.Fatalf("touch then exists = %d, want to go on to exit 5", code)
	}
	if code := quiet("rm", path, "rm", path, "exists", path); code != 1 {
		t.Fatalf("rm twice then exists = %d, want 1", code)
	}
	if code := quiet("touch", t.TempDir()+"/no/such/dir/f"); code != 1 {
		t.Fatalf("touch in a missing directory = %d, want 1", code)
	}
	if code := quiet("touch"); code != 2 {
		t.Fatalf("touch without a path = %d, want 2", code)
	}
}

func TestHTTPStep(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	sigs := make(chan os.Signal, 1)
	done := make(chan int, 1)
	go func() { done <- run([]string{"http", addr, "pause"}, &bytes.Buffer{}, &bytes.Buffer{}, sigs) }()
	var resp *http.Response
	for range 2000 { // the server starts in the background
		if resp, err = http.Get("http://" + addr + "/healthz"); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok\n" {
		t.Fatalf("GET = %d %q, want 200 ok", resp.StatusCode, body)
	}
	sigs <- syscall.SIGTERM
	if code := <-done; code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
	// A port in use is an error.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if code := run([]string{"http", busy.Addr().String()}, &bytes.Buffer{}, &bytes.Buffer{}, sigs); code != 1 {
		t.Fatalf("http on a busy port = %d, want 1", code)

	}
}
