package agent

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
)

func handlerAgent() *Agent { return &Agent{clock: clock.RealClock{}} }

func serverPort(t *testing.T, s *httptest.Server) int {
	t.Helper()
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(u.Port())
	return p
}

func httpProbeOn(port intstr.IntOrString, path string, headers ...corev1.HTTPHeader) *corev1.Probe {
	return &corev1.Probe{TimeoutSeconds: 1, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: path, Port: port, HTTPHeaders: headers}}}
}

// httpGet probes judge as the kubelet does: 200-399 succeed, other codes
// fail; a redirect to the same host is followed, one to another host is
// not and counts as success; the default host is loopback; named ports
// come from the container; headers (Host included) are sent, with the
// probe user agent by default.
func TestHTTPProbe(t *testing.T) {
	var otherHits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { otherHits.Add(1) }))
	defer other.Close()
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1) // another host name
	var gotUA, gotHost, gotX atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			gotUA.Store(r.UserAgent())
			gotHost.Store(r.Host)
			gotX.Store(r.Header.Get("X-Probe"))
			_, _ = w.Write([]byte("fine"))
		case "/missing":
			http.NotFound(w, r)
		case "/here":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/away":
			http.Redirect(w, r, otherURL+"/x", http.StatusFound)
		case "/slow":
			<-r.Context().Done()
		}
	}))
	defer srv.Close()
	port := serverPort(t, srv)
	c := &corev1.Container{Name: "web", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}}
	a := handlerAgent()
	run := func(p *corev1.Probe) (probeResult, string, error) {
		return a.runProbe(context.Background(), handlerTarget{container: c}, p)
	}
	res, out, err := run(httpProbeOn(intstr.FromString("http"), "ok", corev1.HTTPHeader{Name: "X-Probe", Value: "1"},
		corev1.HTTPHeader{Name: "Host", Value: "app.example"}))
	if res != resultSuccess || out != "fine" || err != nil {
		t.Fatalf("/ok = %v %q %v, want success", res, out, err)
	}
	if gotUA.Load() != probeUserAgent || gotHost.Load() != "app.example" || gotX.Load() != "1" {
		t.Fatalf("request had user agent %v, host %v, X-Probe %v", gotUA.Load(), gotHost.Load(), gotX.Load())
	}
	if res, out, _ := run(httpProbeOn(intstr.FromInt32(int32(port)), "/missing")); res != resultFailure || !strings.Contains(out, "404") {
		t.Fatalf("/missing = %v %q, want a failure naming 404", res, out)
	}
	if res, out, _ := run(httpProbeOn(intstr.FromInt32(int32(port)), "/here")); res != resultSuccess || out != "fine" {
		t.Fatalf("/here = %v %q, want the same-host redirect followed to /ok", res, out)
	}
	if res, out, _ := run(httpProbeOn(intstr.FromInt32(int32(port)), "/away")); res != resultSuccess || !strings.Contains(out, "redirect") {
		t.Fatalf("/away = %v %q, want success with a redirect warning", res, out)
	}
	if otherHits.Load() != 0 {
		t.Fatal("a redirect to another host was followed")
	}
	if res, out, _ := run(httpProbeOn(intstr.FromInt32(int32(port)), "/slow")); res != resultFailure || out == "" {
		t.Fatalf("/slow = %v %q, want a failure after the 1 s timeout", res, out)
	}
	if res, _, err := run(httpProbeOn(intstr.FromString("nope"), "/ok")); res != resultUnknown || err == nil {
		t.Fatalf("unknown named port = %v %v, want unknown with an error", res, err)
	}
}

// tcpSocket probes succeed when the port accepts a connection.
func TestTCPProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	a := handlerAgent()
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}}
	if res, _, err := a.runProbe(context.Background(), handlerTarget{container: &corev1.Container{}}, probe); res != resultSuccess {
		t.Fatalf("open port = %v %v, want success", res, err)
	}
	l.Close()
	if res, out, _ := a.runProbe(context.Background(), handlerTarget{container: &corev1.Container{}}, probe); res != resultFailure || out == "" {
		t.Fatalf("closed port = %v %q, want failure", res, out)
	}
}

// An httpGet hook fails only when the request does, whatever the status;
// a sleep hook ends early, failing, when its ctx does.
func TestHookHandlers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	port := serverPort(t, srv)
	a := handlerAgent()
	c := &corev1.Container{Name: "web"}
	hook := &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/stop", Port: intstr.FromInt32(int32(port))}}
	if err := a.runHook(context.Background(), handlerTarget{container: c}, hook); err != nil {
		t.Fatalf("hook answered 500 = %v, want nil (status codes are not looked at)", err)
	}
	srv.Close()
	if err := a.runHook(context.Background(), handlerTarget{container: c}, hook); err == nil {
		t.Fatal("hook to a closed server succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.runHook(ctx, handlerTarget{container: c}, &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 3600}}); err == nil {
		t.Fatal("a cancelled sleep hook succeeded")
	}
	if err := a.runHook(context.Background(), handlerTarget{container: c}, &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{}}); err != nil {
		t.Fatalf("a 0 s sleep hook = %v", err)
	}
	if err := a.runHook(context.Background(), handlerTarget{container: c}, &corev1.LifecycleHandler{}); err == nil {
		t.Fatal("an empty hook succeeded")
	}
}

// WithNodeIP is the host of handlers that name none.
func TestNodeIPIsTheDefaultHost(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 on this machine: %v", err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}}
	a := handlerAgent()
	WithNodeIP("127.0.0.2")(&a.cfg)
	if res, out, _ := a.runProbe(context.Background(), handlerTarget{container: &corev1.Container{}}, probe); res != resultSuccess {
		t.Fatalf("probe of the node IP = %v %q, want success", res, out)
	}
	if got := handlerAgent().handlerHost(""); got != defaultNodeIP {
		t.Fatalf("default host %q, want %q", got, defaultNodeIP)
	}
}
