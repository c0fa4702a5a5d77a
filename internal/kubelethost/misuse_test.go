package kubelethost_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/syncpod/syncpod/internal/kubelethost"
)

func TestNewRefusesBadConfig(t *testing.T) {
	const ep = "unix:///tmp/none.sock"
	for _, tc := range []struct {
		endpoint string
		opt      kubelethost.Option
		option   string
	}{
		{"", nil, "endpoint"},
		{"/tmp/x.sock", nil, "endpoint"},
		{"unix://relative", nil, "endpoint"},
		{"tcp://127.0.0.1:1", nil, "endpoint"},
		{ep, kubelethost.WithBinDir(""), "WithBinDir"},
		{ep, kubelethost.WithNodeName("Upper"), "WithNodeName"},
		{ep, kubelethost.WithNodeName(""), "WithNodeName"},
		{ep, kubelethost.WithNodeName("a-very-long-node-name-that-is-longer-than-42"), "WithNodeName"},
		{ep, kubelethost.WithImageEndpoint("x"), "WithImageEndpoint"},
		{ep, kubelethost.WithFeatureGate("", true), "WithFeatureGate"},
		{ep, kubelethost.WithMaxContainerRestartPeriod(-1), "WithMaxContainerRestartPeriod"},
		{ep, kubelethost.WithMaxContainerRestartPeriod(500e6), "WithMaxContainerRestartPeriod"},
		{ep, kubelethost.WithMaxContainerRestartPeriod(301e9), "WithMaxContainerRestartPeriod"},
		{ep, kubelethost.WithVerbosity(-1), "WithVerbosity"},
		{ep, kubelethost.WithParallelImagePulls(-1), "WithParallelImagePulls"},
		{ep, kubelethost.WithRegistryPullQPS(-1), "WithRegistryPullQPS"},
		{ep, kubelethost.WithStartTimeout(0), "WithStartTimeout"},
		{ep, kubelethost.WithStopTimeout(-1), "WithStopTimeout"},
		{ep, kubelethost.WithFileCheckFrequency(0), "WithFileCheckFrequency"},
		{ep, kubelethost.WithConfigEdit(nil), "WithConfigEdit"},
		{ep, kubelethost.WithKubeconfig(nil), "WithKubeconfig"},
	} {
		k, err := kubelethost.New(tc.endpoint, nil, tc.opt)
		var ce *kubelethost.ConfigError
		if !errors.As(err, &ce) || ce.Option != tc.option {
			t.Errorf("New(%q, %s) = %v, %v; want a *ConfigError for %s", tc.endpoint, tc.option, k, err, tc.option)
		}
	}
}

func TestNewWithoutBinaryIsUnavailable(t *testing.T) {
	_, err := kubelethost.New("unix:///tmp/none.sock", kubelethost.WithBinDir(t.TempDir()))
	if !errors.Is(err, kubelethost.ErrUnavailable) {
		t.Fatalf("New without a kubelet binary = %v, want ErrUnavailable", err)
	}
}

func TestZeroKubeletSaysUseNew(t *testing.T) {
	var k kubelethost.Kubelet
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	for name, err := range map[string]error{
		"Close":           k.Close(),
		"Healthz":         k.Healthz(ctx),
		"WriteStaticPod":  k.WriteStaticPod(pod),
		"RemoveStaticPod": k.RemoveStaticPod("p"),
		"Metrics":         second(k.Metrics(ctx)),
		"Configz":         second(k.Configz(ctx)),
		"Log":             second(k.Log()),
		"CRIErrors":       second(k.CRIErrors()),
		"Exited":          second(k.Exited()),
	} {
		if err == nil || !strings.Contains(err.Error(), "use New") {
			t.Errorf("zero Kubelet %s = %v, want an error saying to use New", name, err)
		}
	}
	if k.PID() != 0 {
		t.Errorf("zero Kubelet PID = %d", k.PID())
	}
}

func TestMethodsRefuseBadArgs(t *testing.T) {
	var k kubelethost.Kubelet
	var nilCtx context.Context
	for name, err := range map[string]error{
		"Healthz":                k.Healthz(nilCtx),
		"Metrics":                second(k.Metrics(nilCtx)),
		"Configz":                second(k.Configz(nilCtx)),
		"WriteStaticPod(nil)":    k.WriteStaticPod(nil),
		"WriteStaticPod(noname)": k.WriteStaticPod(&corev1.Pod{}),
		"WriteStaticPod(path)":   k.WriteStaticPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "../x"}}),
		"RemoveStaticPod(dot)":   k.RemoveStaticPod(".hidden"),
		"Histogram":              second(k.Histogram(context.Background(), "")),
	} {
		var ae *kubelethost.ArgError
		if !errors.As(err, &ae) {
			t.Errorf("%s = %v, want an *ArgError", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }
