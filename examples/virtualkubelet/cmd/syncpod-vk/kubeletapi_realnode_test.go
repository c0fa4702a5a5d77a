package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/syncpod/syncpod/internal/controlplane"
	"github.com/syncpod/syncpod/internal/testnode"
)

// kubectlStream runs a kubectl that streams (logs -f, attach,
// port-forward) and sends its output lines; stop kills it and waits.
func kubectlStream(t *testing.T, cp *controlplane.ControlPlane, args ...string) (lines <-chan string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd, err := cp.KubectlCommand(ctx, args...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	ch := make(chan string, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	var stopped bool
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-done
		_ = cmd.Wait()
		if s := strings.TrimSpace(stderr.String()); s != "" {
			t.Logf("kubectl %s: stderr: %s", strings.Join(args, " "), s)
		}
	}
	t.Cleanup(stop)
	return ch, stop
}

// waitLine reads lines until one contains want; it fails the test if the
// stream ends or waitTimeout passes first.
func waitLine(t *testing.T, lines <-chan string, want string) string {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the stream ended before a line with %q", want)
			}
			if strings.Contains(l, want) {
				return l
			}
		case <-deadline:
			t.Fatalf("no line with %q in %v", want, waitTimeout)
		}
	}
}

// hostIP is a global unicast IPv4 address of the machine: the API server
// proxies to nodes (nodes/proxy) at such addresses only, never loopback.
func hostIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	t.Fatalf("no global unicast IPv4 address on this machine (interfaces %v): the API server proxies to none other", addrs)
	return ""
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// The node's kubelet API with the real control plane, kubectl and
// containerd: kubectl logs (whole, tail, timestamps, limit, since) and
// logs -f (a line written after the follow began arrives), exec (output
// and exit code), attach, port-forward (one HTTP request through it), and
// /stats/summary and /metrics/resource through the API server's node
// proxy; a request to the node's port without credentials is refused.
func TestRealNodeKubeletAPI(t *testing.T) {
	n := testnode.Start(t)
	img := n.PushImage(t, "vk/api", testnode.WithSize(1<<20))
	cp := controlplane.Start(t)
	kube := kubeClient(t, cp)
	caFile := filepath.Join(t.TempDir(), "kubelet-client-ca.crt")
	if err := os.WriteFile(caFile, cp.KubeletClientCAData, 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ip := hostIP(t)
	o := options{nodeName: "vk-api", endpoint: n.Endpoint, podLogDir: filepath.Join(n.Dir, "pods"), nodeIP: ip,
		taint: true, workers: 2, capacity: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")},
		api: apiOptions{listen: net.JoinHostPort(ip, "0"), clientCAFile: caFile}}
	go func() { done <- runNode(ctx, kube, o, zap.NewNop()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("runNode: %v", err)
		}
	})

	var port int32
	eventually(t, "a Ready node with its kubelet port", func() string {
		nd, err := kube.CoreV1().Nodes().Get(ctx, o.nodeName, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if port = nd.Status.DaemonEndpoints.KubeletEndpoint.Port; !nodeReady(nd) || port == 0 {
			return fmt.Sprintf("ready %v, kubelet port %d", nodeReady(nd), port)
		}
		return ""
	})

	webPort := freePort(t)
	ticks := []string{}
	for i := range 300 {
		ticks = append(ticks, "echo", "tick-"+strconv.Itoa(i), "sleep", "1s")
	}
	no := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "api"},
		Spec: corev1.PodSpec{NodeName: o.nodeName, HostNetwork: true, AutomountServiceAccountToken: &no,
			Tolerations: []corev1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{
				{Name: "log", Image: img, Args: []string{"echo", "first", "echo", "second", "wait-file", "/go-on", "stderr", "late", "pause"}},
				{Name: "tick", Image: img, Args: append(ticks, "pause")},
				{Name: "web", Image: img, Args: []string{"http", "127.0.0.1:" + strconv.Itoa(webPort), "pause"}},
			}},
	}
	if _, err := kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod Running", func() string {
		p, err := kube.CoreV1().Pods("default").Get(ctx, "api", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if p.Status.Phase != corev1.PodRunning || podCondition(p, corev1.PodReady) != corev1.ConditionTrue {
			return fmt.Sprintf("phase %s ready %s", p.Status.Phase, podCondition(p, corev1.PodReady))
		}
		return ""
	})
	eventually(t, "kubectl logs with both lines", func() string {
		out, err := cp.Kubectl(ctx, "logs", "api", "-c", "log")
		if err != nil {
			return err.Error()
		}
		if string(out) != "first\nsecond\n" {
			return fmt.Sprintf("logs %q", out)
		}
		return ""
	})

	t.Run("logs options", func(t *testing.T) {
		if out, err := cp.Kubectl(ctx, "logs", "api", "-c", "log", "--tail=1"); err != nil || string(out) != "second\n" {
			t.Errorf("logs --tail=1 = %q, %v; want the last line", out, err)
		}
		if out, err := cp.Kubectl(ctx, "logs", "api", "-c", "log", "--limit-bytes=3"); err != nil || string(out) != "fir" {
			t.Errorf("logs --limit-bytes=3 = %q, %v; want %q", out, err, "fir")
		}
		out, err := cp.Kubectl(ctx, "logs", "api", "-c", "log", "--timestamps")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
			ts, text, _ := strings.Cut(l, " ")
			if _, err := time.Parse(time.RFC3339Nano, ts); err != nil || (text != "first" && text != "second") {
				t.Errorf("logs --timestamps line %q: %v", l, err)
			}
		}
		future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		if out, err := cp.Kubectl(ctx, "logs", "api", "-c", "log", "--since-time="+future); err != nil || len(out) != 0 {
			t.Errorf("logs --since-time=<in an hour> = %q, %v; want nothing", out, err)
		}
		if out, err := cp.Kubectl(ctx, "logs", "api", "-c", "log", "--since=1h"); err != nil || string(out) != "first\nsecond\n" {
			t.Errorf("logs --since=1h = %q, %v; want both lines", out, err)
		}
		var ke *controlplane.KubectlError
		if _, err := cp.Kubectl(ctx, "logs", "api", "-c", "log", "--previous"); !errors.As(err, &ke) {
			t.Errorf("logs --previous of a container that never restarted = %v, want an error", err)
		}
	})

	t.Run("logs -f and exec", func(t *testing.T) {
		lines, stop := kubectlStream(t, cp, "logs", "-f", "api", "-c", "log")
		defer stop()
		waitLine(t, lines, "second")
		// The line is written only now, after the follow has begun.
		if out, err := cp.Kubectl(ctx, "exec", "api", "-c", "log", "--", "/workload", "touch", "/go-on"); err != nil {
			t.Fatalf("exec touch: %v (%s)", err, out)
		}
		waitLine(t, lines, "late")

		out, err := cp.Kubectl(ctx, "exec", "api", "-c", "log", "--", "/workload", "echo", "hello", "stderr", "oops", "exit", "3")
		var ke *controlplane.KubectlError
		var ee *exec.ExitError
		if !errors.As(err, &ke) || !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Fatalf("exec ... exit 3 = %v, want kubectl's exit code 3", err)
		}
		if string(out) != "hello\n" || !strings.Contains(ke.Stderr, "oops") {
			t.Errorf("exec stdout %q stderr %q, want hello and oops", out, ke.Stderr)
		}
		if out, err := cp.Kubectl(ctx, "exec", "api", "-c", "log", "--", "/workload", "echo", "ok"); err != nil || string(out) != "ok\n" {
			t.Errorf("exec echo ok = %q, %v", out, err)
		}
	})

	t.Run("attach", func(t *testing.T) {
		lines, stop := kubectlStream(t, cp, "attach", "api", "-c", "tick")
		defer stop()
		first := waitLine(t, lines, "tick-")
		// A second, later tick: the attach streams the live output.
		n, err := strconv.Atoi(strings.TrimPrefix(first, "tick-"))
		if err != nil {
			t.Fatalf("attach line %q", first)
		}
		waitLine(t, lines, "tick-"+strconv.Itoa(n+1))
	})

	t.Run("port-forward", func(t *testing.T) {
		lines, stop := kubectlStream(t, cp, "port-forward", "pod/api", ":"+strconv.Itoa(webPort))
		defer stop()
		l := waitLine(t, lines, "Forwarding from 127.0.0.1:")
		local, _, _ := strings.Cut(strings.TrimPrefix(l, "Forwarding from "), " ")
		hc := &http.Client{Timeout: waitTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := hc.Get("http://" + local + "/")
		if err != nil {
			t.Fatalf("GET through the port-forward: %v", err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || string(body) != "ok\n" {
			t.Fatalf("GET through the port-forward: %s %q %v", resp.Status, body, err)
		}
	})

	t.Run("stats", func(t *testing.T) {
		var sum statsv1alpha1.Summary
		eventually(t, "the pod's containers in /stats/summary", func() string {
			out, err := cp.Kubectl(ctx, "get", "--raw", "/api/v1/nodes/vk-api/proxy/stats/summary")
			if err != nil {
				return err.Error()
			}
			sum = statsv1alpha1.Summary{}
			if err := json.Unmarshal(out, &sum); err != nil {
				return err.Error()
			}
			if sum.Node.NodeName != o.nodeName || sum.Node.CPU == nil || sum.Node.Memory == nil || sum.Node.Memory.WorkingSetBytes == nil {
				return fmt.Sprintf("node %+v", sum.Node)
			}
			if len(sum.Pods) != 1 || sum.Pods[0].PodRef.Name != "api" || len(sum.Pods[0].Containers) != 3 {
				return fmt.Sprintf("pods %+v", sum.Pods)
			}
			ps := sum.Pods[0]
			if ps.CPU == nil || ps.CPU.UsageCoreNanoSeconds == nil || ps.Memory == nil || ps.Memory.WorkingSetBytes == nil {
				return fmt.Sprintf("pod cpu %+v memory %+v", ps.CPU, ps.Memory)
			}
			for _, c := range ps.Containers {
				if c.CPU == nil || c.CPU.UsageCoreNanoSeconds == nil || c.Memory == nil || c.Memory.WorkingSetBytes == nil || *c.Memory.WorkingSetBytes == 0 {
					return fmt.Sprintf("container %s: cpu %+v memory %+v", c.Name, c.CPU, c.Memory)
				}
			}
			return ""
		})
		out, err := cp.Kubectl(ctx, "get", "--raw", "/api/v1/nodes/vk-api/proxy/metrics/resource")
		if err != nil {
			t.Fatal(err)
		}
		text := string(out)
		for _, want := range []string{
			`container_cpu_usage_seconds_total{container="log",namespace="default",pod="api"}`,
			`container_memory_working_set_bytes{container="web",namespace="default",pod="api"}`,
			`container_start_time_seconds{container="tick",namespace="default",pod="api"}`,
			`pod_cpu_usage_seconds_total{namespace="default",pod="api"}`,
			`pod_memory_working_set_bytes{namespace="default",pod="api"}`,
			"node_cpu_usage_seconds_total ", "node_memory_working_set_bytes ", "resource_scrape_error 0",
		} {
			if !strings.Contains(text, want) {
				t.Errorf("/metrics/resource has no %s:\n%s", want, text)
			}
		}
	})

	t.Run("no credentials", func(t *testing.T) {
		hc := &http.Client{Timeout: waitTimeout, Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, // the node's self-signed certificate
			DisableKeepAlives: true}}
		base := "https://" + net.JoinHostPort(ip, strconv.Itoa(int(port)))
		for _, path := range []string{"/pods", "/stats/summary", "/metrics/resource", "/containerLogs/default/api/log"} {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("GET %s without credentials: %s, want 401", path, resp.Status)
			}
			req, _ = http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
			req.Header.Set("Authorization", "Bearer not-a-token")
			if resp, err = hc.Do(req); err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("GET %s with a bad token: %s, want 401", path, resp.Status)
			}
		}
		// The admin's token authenticates (TokenReview) and is authorized
		// (SubjectAccessReview) on the node's port directly.
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/pods", nil)
		req.Header.Set("Authorization", "Bearer "+cp.Token)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET /pods with the admin's token: %s, want 200", resp.Status)
		}
	})
}
