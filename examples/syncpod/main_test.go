package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"

	"github.com/syncpod/syncpod/criclient/crisim"
)

// envRunMain makes the test binary run the command (its arguments after
// the binary's name) instead of the tests: the adoption test starts and
// SIGKILLs the agent as a process this way.
const envRunMain = "SYNCPOD_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// The CLI on a manifest directory and the embedded simulated runtime: the
// valid pod runs, the invalid one is reported, and the JSON summary says so.
func TestRunManifestsJSON(t *testing.T) {
	dir := t.TempDir()
	err := os.WriteFile(filepath.Join(dir, "pods.yaml"), []byte(`
metadata: {name: web}
spec:
  initContainers:
  - {name: migrate, image: example.com/migrate:1}
  - {name: proxy, image: example.com/proxy:1, restartPolicy: Always}
  containers:
  - {name: app, image: nginx:1.27}
---
metadata: {name: bad}
spec: {containers: [{name: a, image: "Bad::"}]}
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	o := options{manifests: dir, mode: "syncpod", json: true, logLevel: "error", untilUp: true}
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	var sum summary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("summary is not JSON: %v\n%s", err, out.String())
	}
	if len(sum.Pods) != 1 || sum.Pods[0].Name != "web" || sum.Pods[0].State != "Running" || sum.Started != 1 {
		t.Fatalf("summary: %+v", sum)
	}
}

// go run ./examples/syncpod with no flags: the demo burst completes and
// prints the table.
func TestRunDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo takes about 20 s")
	}
	for _, mode := range []string{"syncpod"} {
		var out bytes.Buffer
		o := options{mode: mode, logLevel: "error", timeout: defaultDemoTimeout}
		if err := run(context.Background(), o, &out); err != nil {
			t.Fatalf("%s: run: %v\n%s", mode, err, out.String())
		}
		for _, want := range []string{"default/web-00", "default/ml-worker", "CrashLoopBackOff", "startup p50"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s: output lacks %q:\n%s", mode, want, out.String())
			}
		}
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	if err := run(context.Background(), options{mode: "fast", logLevel: "info"}, &bytes.Buffer{}); err == nil {
		t.Error("unknown mode accepted")
	}
	if err := run(context.Background(), options{mode: "syncpod", logLevel: "loud"}, &bytes.Buffer{}); err == nil {
		t.Error("unknown log level accepted")
	}
	if err := run(context.Background(), options{mode: "syncpod", logLevel: "info", endpoint: "unix:///nowhere"}, &bytes.Buffer{}); err == nil {
		t.Error("a real runtime without manifests accepted")
	}
}

// --cleanup on a runtime that cannot remove sandboxes: the run retries
// until --cleanup-timeout, then fails naming the pod it left.
func TestRunCleanupNamesPodsLeft(t *testing.T) {
	srv, err := crisim.Start(crisim.WithImage("registry.sim/app:1", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.Runtime().SetErrorRate("RemovePodSandbox", 1, codes.Unavailable)
	dir := t.TempDir()
	manifest := "metadata: {name: stuck}\nspec: {containers: [{name: a, image: registry.sim/app:1}]}\n"
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	o := options{manifests: dir, endpoint: srv.Endpoint(), mode: "syncpod", json: true, logLevel: "error",
		untilUp: true, cleanup: true, cleanupWait: 500 * time.Millisecond}
	err = run(context.Background(), o, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "1 pods still on the runtime") || !strings.Contains(err.Error(), "default/stuck") {
		t.Fatalf("run = %v, want a cleanup failure naming default/stuck", err)
	}
	srv.Runtime().SetErrorRate("RemovePodSandbox", 0, codes.OK)
}
