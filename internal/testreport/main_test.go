package main

import (
	"strings"
	"testing"
)

func feed(r *report, events ...event) {
	for _, e := range events {
		r.add(e)
	}
}

func TestRealNodeSkipFailsWhenRequired(t *testing.T) {
	var out strings.Builder
	r := newReport(&out)
	feed(r,
		event{Action: "run", Package: "p", Test: "TestRealNodeA"},
		event{Action: "output", Package: "p", Test: "TestRealNodeA", Output: "    x_test.go:1: testnode: missing runc\n"},
		event{Action: "skip", Package: "p", Test: "TestRealNodeA"},
		event{Action: "run", Package: "p", Test: "TestHelperUsesNode"},
		event{Action: "output", Package: "p", Test: "TestHelperUsesNode", Output: "testnode: critest: no such file\n"},
		event{Action: "skip", Package: "p", Test: "TestHelperUsesNode"},
		event{Action: "run", Package: "p", Test: "TestRealNodeB"},
		event{Action: "pass", Package: "p", Test: "TestRealNodeB/sub"},
		event{Action: "pass", Package: "p", Test: "TestRealNodeB"},
		event{Action: "skip", Package: "p", Test: "TestShortOnly"},
		event{Action: "pass", Package: "p"},
	)
	if r.finish("x", true) {
		t.Fatalf("finish = ok with two real-node skips:\n%s", out.String())
	}
	if r.realSkipped != 2 || r.realRan != 1 || r.passed != 1 || r.skipped != 3 {
		t.Fatalf("counts: realSkipped=%d realRan=%d passed=%d skipped=%d", r.realSkipped, r.realRan, r.passed, r.skipped)
	}
	if !strings.Contains(out.String(), "missing runc") {
		t.Fatalf("summary does not say why:\n%s", out.String())
	}
	var out2 strings.Builder
	r2 := newReport(&out2)
	feed(r2, event{Action: "skip", Package: "p", Test: "TestRealNodeA"}, event{Action: "pass", Package: "p"})
	if !r2.finish("x", false) {
		t.Fatalf("finish without -require-realnode failed on a skip:\n%s", out2.String())
	}
}

func TestFailuresAndEmptyInput(t *testing.T) {
	var out strings.Builder
	r := newReport(&out)
	feed(r,
		event{Action: "output", Package: "p", Test: "TestX", Output: "boom\n"},
		event{Action: "fail", Package: "p", Test: "TestX"},
		event{Action: "fail", Package: "p"},
	)
	if r.finish("x", false) {
		t.Fatal("a failed test passed the run")
	}
	if !strings.Contains(out.String(), "boom") || !strings.Contains(out.String(), "FAIL p") {
		t.Fatalf("failure output missing:\n%s", out.String())
	}
	var empty strings.Builder
	if newReport(&empty).finish("x", false) {
		t.Fatal("no events passed the run")
	}
}
