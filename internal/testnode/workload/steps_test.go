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
