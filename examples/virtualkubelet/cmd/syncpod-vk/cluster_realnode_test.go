package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/internal/controlplane"
	"github.com/syncpod/syncpod/internal/testnode"
)

// kubeAPIAccessDir is the host directory of pod's kube-api-access-*
// volume under podDir, "" when the pod has none.
func kubeAPIAccessDir(podDir string, pod *corev1.Pod) string {
	for _, v := range pod.Spec.Volumes {
		if v.Projected != nil && strings.HasPrefix(v.Name, "kube-api-access-") {
			return filepath.Join(podDir, string(pod.UID), "volumes", "kubernetes.io~projected", v.Name)
		}
	}
	return ""
}

// The command's node in a real cluster (ServiceAccount admission and
// kube-controller-manager on, real kubectl, real containerd): a
// Deployment of 3 replicas, each pod with the kube-api-access volume
// admission adds, a configMap volume, env from the configMap and a
// secret (as containerd shows them), and an imagePullSecret, comes up Running and Ready; the
// mounted token, read in the container with kubectl exec, authenticates
// as the pod's service account (kubectl auth whoami and a TokenReview),
// next to the cluster's CA and the
// pod's namespace; a configMap update reaches the mounted files (within
// 60 s); a Job runs to completion.
func TestRealNodeClusterWorkloads(t *testing.T) {
	n := testnode.Start(t)
	img := n.PushImage(t, "vk/app", testnode.WithSize(1<<20))
	cp := controlplane.Start(t, controlplane.WithRealCluster())
	kube := kubeClient(t, cp)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	podDir := filepath.Join(n.Dir, "kubelet-pods")
	// The node's kubelet API, for kubectl exec: on an address the API
	// server may proxy to, trusting its kubelet client certificate.
	ip := hostIP(t)
	caFile := filepath.Join(t.TempDir(), "kubelet-client-ca.crt")
	if err := os.WriteFile(caFile, cp.KubeletClientCAData, 0o600); err != nil {
		t.Fatal(err)
	}
	o := options{nodeName: "vk-cluster", endpoint: n.Endpoint, podLogDir: filepath.Join(n.Dir, "pods"), podDir: podDir,
		nodeIP: ip, taint: true, workers: 4, capacity: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")},
		api: apiOptions{listen: net.JoinHostPort(ip, "0"), clientCAFile: caFile}}
	go func() { done <- runNode(ctx, kube, o, zap.NewNop()) }()
	t.Cleanup(func() { // before the control plane and the node go
		cancel()
		if err := <-done; err != nil {
			t.Errorf("runNode: %v", err)
		}
	})
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := cp.Kubectl(ctx, args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
		}
		return string(out)
	}
	apply := func(name, manifest string) {
		t.Helper()
		path := filepath.Join(t.TempDir(), name+".yaml")
		if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		kubectl("apply", "-f", path)
	}

	kubectl("create", "configmap", "settings", "--from-literal=level=debug")
	kubectl("create", "secret", "generic", "creds", "--from-literal=password=s3cret")
	auth := base64.StdEncoding.EncodeToString([]byte("u:p"))
	kubectl("create", "secret", "generic", "regcred", "--type=kubernetes.io/dockerconfigjson",
		`--from-literal=.dockerconfigjson={"auths":{"`+n.Registry+`":{"auth":"`+auth+`"}}}`)
	apply("web", fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeName: %[1]s
      hostNetwork: true
      terminationGracePeriodSeconds: 5
      tolerations: [{key: virtual-kubelet.io/provider, operator: Exists}]
      imagePullSecrets: [{name: regcred}]
      volumes:
      - {name: settings, configMap: {name: settings, defaultMode: 0640}}
      containers:
      - name: app
        image: %[2]s
        env:
        - {name: PASSWORD, valueFrom: {secretKeyRef: {name: creds, key: password}}}
        envFrom:
        - {prefix: CFG_, configMapRef: {name: settings}}
        volumeMounts:
        - {name: settings, mountPath: /etc/settings}
`, o.nodeName, img))

	var pods []corev1.Pod
	eventually(t, "3 web pods Running and Ready", func() string {
		list, err := kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return err.Error()
		}
		if len(list.Items) != 3 {
			return fmt.Sprintf("%d pods", len(list.Items))
		}
		for i := range list.Items {
			p := &list.Items[i]
			if p.Status.Phase != corev1.PodRunning || podCondition(p, corev1.PodReady) != corev1.ConditionTrue {
				return fmt.Sprintf("%s: phase %s ready %s, %s %+v", p.Name, p.Status.Phase, podCondition(p, corev1.PodReady), p.Status.Message, p.Status.ContainerStatuses)
			}
		}
		pods = list.Items
		return ""
	})

	pod := &pods[0]
	access := kubeAPIAccessDir(podDir, pod)
	if access == "" {
		t.Fatalf("pod %s has no kube-api-access volume: %+v", pod.Name, pod.Spec.Volumes)
	}
	token, err := os.ReadFile(filepath.Join(access, "token"))
	if err != nil {
		t.Fatal(err)
	}
	// Inside the container, as a client in the pod reads it.
	if inPod := kubectl("exec", pod.Name, "-c", "app", "--", "/workload", "cat", "/var/run/secrets/kubernetes.io/serviceaccount/token"); strings.TrimSpace(inPod) != strings.TrimSpace(string(token)) {
		t.Errorf("kubectl exec cat of the token: %d bytes, not the %d mounted on the node", len(inPod), len(token))
	}
	who := strings.TrimSpace(kubectl("auth", "whoami", "--token="+string(token), "-o", "jsonpath={.status.userInfo.username}"))
	if who != "system:serviceaccount:default:default" {
		t.Errorf("the mounted token is %q, want the default service account", who)
	}
	review := kubectl("create", "-o", "jsonpath={.status.authenticated} {.status.user.extra.authentication\\.kubernetes\\.io/pod-name}", "-f", writeTokenReview(t, string(token)))
	if review != `true ["`+pod.Name+`"]` {
		t.Errorf("TokenReview of the mounted token: %q, want authenticated and bound to %s", review, pod.Name)
	}
	if ca, err := os.ReadFile(filepath.Join(access, "ca.crt")); err != nil || strings.TrimSpace(string(ca)) != strings.TrimSpace(string(cp.CAData)) {
		t.Errorf("ca.crt (%v) is not the cluster's CA", err)
	}
	if ns, err := os.ReadFile(filepath.Join(access, "namespace")); err != nil || string(ns) != "default" {
		t.Errorf("namespace file %q, %v", ns, err)
	}
	settings := filepath.Join(podDir, string(pod.UID), "volumes", "kubernetes.io~configmap", "settings", "level")
	if b, err := os.ReadFile(settings); err != nil || string(b) != "debug" {
		t.Fatalf("settings/level %q, %v", b, err)
	}
	if fi, err := os.Stat(settings); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("settings/level mode %v, %v; want 0640", fi.Mode(), err)
	}

	id := pod.Status.ContainerStatuses[0].ContainerID
	st, err := n.RuntimeService().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{
		ContainerId: id[strings.Index(id, "://")+3:], Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	if info := st.GetInfo()["info"]; !strings.Contains(info, `"key":"PASSWORD","value":"s3cret"`) || !strings.Contains(info, `"key":"CFG_level","value":"debug"`) {
		t.Errorf("the container's env, as containerd holds it, lacks PASSWORD and CFG_level: %s", info)
	}

	start := time.Now()
	kubectl("patch", "configmap", "settings", "-p", `{"data":{"level":"info"}}`)
	deadline := start.Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(settings)
		if string(b) == "info" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the configMap update did not reach the mounted file within 60 s: %q", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("configMap update reached the mounted file in %v", time.Since(start).Round(time.Millisecond))

	apply("once", fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: once, namespace: default}
spec:
  backoffLimit: 0
  template:
    spec:
      nodeName: %[1]s
      hostNetwork: true
      restartPolicy: Never
      tolerations: [{key: virtual-kubelet.io/provider, operator: Exists}]
      containers:
      - {name: job, image: %[2]s, args: [echo, done, exit, "0"]}
`, o.nodeName, img))
	eventually(t, "the Job complete", func() string {
		j, err := kube.BatchV1().Jobs("default").Get(ctx, "once", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				if j.Status.Succeeded != 1 {
					return fmt.Sprintf("complete with %d succeeded", j.Status.Succeeded)
				}
				return ""
			}
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				t.Fatalf("the Job failed: %s", c.Message)
			}
		}
		return fmt.Sprintf("status %+v", j.Status)
	})
}

// writeTokenReview writes a TokenReview of token for kubectl create -f.
func writeTokenReview(t *testing.T, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "review.json")
	body := fmt.Sprintf(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":%q}}`, token)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
