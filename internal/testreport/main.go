// Command testreport reads `go test -json` output on stdin, prints the
// usual per-package lines and the output of every failed test, and at the end
// checks what a plain `go test` cannot: that no real-node test was skipped.
//
// A real-node test is a top-level test named TestRealNode*, or any test whose
// skip message comes from internal/testnode's gate ("testnode: ..."). With
// -require-realnode, one such skip is a failure. The last line is a summary:
//
//	testreport: 412 passed, 0 failed, 3 skipped; real-node tests: 38 ran, 0 skipped
//
// Usage (hack/test.sh):
//
//	go test -json ./... | go run ./internal/testreport -label root -require-realnode
//
// It exits 1 when a test or package failed, the stream held no test events,
// or (with -require-realnode) a real-node test was skipped.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// event is one line of test2json output.
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type testKey struct{ pkg, test string }

type report struct {
	out                  io.Writer
	output               map[testKey]*strings.Builder
	passed, failed       int
	skipped              int
	realRan, realSkipped int
	failedPkgs           []string
	failedTests          []string
	realSkips            []string
	events               int
}

func newReport(out io.Writer) *report {
	return &report{out: out, output: map[testKey]*strings.Builder{}}
}

func isRealNodeName(test string) bool {
	top, _, _ := strings.Cut(test, "/")
	return strings.HasPrefix(top, "TestRealNode")
}

func (r *report) add(e event) {
	r.events++
	k := testKey{e.Package, e.Test}
	switch e.Action {
	case "output":
		b := r.output[k]
		if b == nil {
			b = &strings.Builder{}
			r.output[k] = b
		}
		if b.Len() < 1<<20 {
			b.WriteString(e.Output)
		}
		return
	case "build-output":
		// Compiler errors, reported apart from any test (go 1.24+).
		fmt.Fprint(r.out, e.Output)
		return
	case "pass", "fail", "skip":
	default:
		return
	}
	text := ""
	if b := r.output[k]; b != nil {
		text = b.String()
	}
	delete(r.output, k)
	if e.Test == "" {
		r.packageDone(e, text)
		return
	}
	top := !strings.Contains(e.Test, "/")
	gated := strings.Contains(text, "testnode: ")
	real := (top && isRealNodeName(e.Test)) || (e.Action == "skip" && gated)
	switch e.Action {
	case "pass":
		if top {
			r.passed++
		}
		if real {
			r.realRan++
		}
	case "fail":
		if top {
			r.failed++
		}
		if real {
			r.realRan++
		}
		r.failedTests = append(r.failedTests, e.Package+"."+e.Test)
		fmt.Fprintf(r.out, "--- FAIL: %s %s (%.2fs)\n%s", e.Package, e.Test, e.Elapsed, indent(text))
	case "skip":
		if top {
			r.skipped++
		}
		if real {
			r.realSkipped++
			r.realSkips = append(r.realSkips, fmt.Sprintf("%s.%s: %s", e.Package, e.Test, lastLines(text, 3)))
		}
	}
}

func (r *report) packageDone(e event, text string) {
	switch e.Action {
	case "pass":
		fmt.Fprintf(r.out, "ok   %s %.1fs\n", e.Package, e.Elapsed)
	case "skip":
		fmt.Fprintf(r.out, "?    %s [no test files]\n", e.Package)
	case "fail":
		r.failedPkgs = append(r.failedPkgs, e.Package)
		fmt.Fprintf(r.out, "FAIL %s %.1fs\n", e.Package, e.Elapsed)
		// Output outside any test: build errors, a panic, a timeout, TestMain.
		if strings.TrimSpace(text) != "" {
			fmt.Fprint(r.out, indent(lastLines(text, 60)))
		}
	}
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString("    " + l)
		}
	}
	if !strings.HasSuffix(b.String(), "\n") {
		b.WriteString("\n")
	}
	return b.String()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, " | ")
}

func (r *report) finish(label string, requireReal bool) (ok bool) {
	ok = true
	if r.events == 0 {
		fmt.Fprintf(r.out, "testreport %s: no test events on stdin (did go test run with -json?)\n", label)
		ok = false
	}
	if len(r.failedPkgs) > 0 || r.failed > 0 {
		ok = false
	}
	if requireReal && r.realSkipped > 0 {
		ok = false
		fmt.Fprintf(r.out, "testreport %s: real-node tests skipped although a real node is required:\n", label)
		sort.Strings(r.realSkips)
		for _, s := range r.realSkips {
			fmt.Fprintf(r.out, "    %s\n", s)
		}
	}
	if len(r.failedTests) > 0 {
		fmt.Fprintf(r.out, "testreport %s: failed: %s\n", label, strings.Join(r.failedTests, ", "))
	}
	fmt.Fprintf(r.out, "testreport %s: %d passed, %d failed, %d skipped; packages failed: %d; real-node tests: %d ran, %d skipped\n",
		label, r.passed, r.failed, r.skipped, len(r.failedPkgs), r.realRan, r.realSkipped)
	return ok
}

func main() {
	label := flag.String("label", "tests", "name printed in the summary")
	requireReal := flag.Bool("require-realnode", false, "a skipped real-node test fails the run")
	flag.Parse()
	r := newReport(os.Stdout)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			// go test prints build failures outside the JSON stream.
			fmt.Fprintf(os.Stdout, "%s\n", line)
			continue
		}
		r.add(e)
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(os.Stdout, "testreport: reading stdin: %v\n", err)
		os.Exit(1)
	}
	if !r.finish(*label, *requireReal) {
		os.Exit(1)
	}
}
