package controlplane

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

const controllerManagerName = "kube-controller-manager"

// controllerManagerUser is the user the bootstrap RBAC policy grants the
// system:kube-controller-manager role to.
const controllerManagerUser = "system:kube-controller-manager"

// serviceAccountIssuer is the API server's --service-account-issuer, and so
// the audience its own service-account tokens are issued for.
const serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// clusterControllers are the controllers WithRealCluster runs, by their
// v1.37 names (kube-controller-manager --help lists them).
var clusterControllers = []string{
	"serviceaccount-token-controller",
	"serviceaccount-controller",
	"root-ca-certificate-publisher-controller",
	"namespace-controller",
	"garbage-collector-controller",
	"deployment-controller",
	"replicaset-controller",
	"job-controller",
}

// startControllerManager writes kube-controller-manager's kubeconfig (its
// own user's token, the API server's CA), starts it and waits until its
// /healthz says ok and the default namespace's default ServiceAccount
// exists.
func (cp *ControlPlane) startControllerManager(bin, token string, port int) error {
	kubeconfig := filepath.Join(cp.Dir, controllerManagerName+".kubeconfig")
	if err := os.WriteFile(kubeconfig, kubeconfigYAML(cp.URL, cp.CAData, controllerManagerUser, token), 0o600); err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	p, err := startProcess(cp.Dir, controllerManagerName, bin, []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(cp.Dir, controllerManagerName+"-certs"),
		"--controllers=" + strings.Join(clusterControllers, ","),
		"--service-account-private-key-file=" + filepath.Join(cp.Dir, "sa.key"),
		"--root-ca-file=" + filepath.Join(cp.Dir, "certs", "apiserver.crt"),
		"--use-service-account-credentials",
		"--leader-elect=false",
		"--profiling=false",
	})
	if err != nil {
		return err
	}
	cp.mu.Lock()
	cp.kcm = p
	cp.mu.Unlock()
	if err := cp.waitReady(p, cp.insecure, "https://127.0.0.1:"+strconv.Itoa(port)+"/healthz", ""); err != nil {
		return cp.startError(p, err)
	}
	if err := cp.waitReady(p, cp.verified, cp.URL+"/api/v1/namespaces/default/serviceaccounts/default", cp.Token); err != nil {
		return cp.startError(p, fmt.Errorf("the default ServiceAccount: %w", err))
	}
	return nil
}

// kubeconfigYAML is a kubeconfig for one token user of the API server at
// server, verified against ca.
func kubeconfigYAML(server string, ca []byte, user, token string) []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: controlplane
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: controlplane
  context:
    cluster: controlplane
    user: %s
current-context: controlplane
`, server, base64.StdEncoding.EncodeToString(ca), user, token, user)
}
