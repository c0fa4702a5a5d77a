package controlplane

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/syncpod/syncpod/internal/testnode"
)

// Versions the package is written for (their flags); hack/install-kube.sh
// installs them. kube-controller-manager and kubectl are APIServerVersion
// too.
const (
	APIServerVersion = "v1.37.2"
	EtcdVersion      = "v3.6.16"
)

const (
	etcdName      = "etcd"
	apiServerName = "kube-apiserver"
)

const installHint = "install them with: bash hack/install-kube.sh (from the repository root; " +
	"or point " + testnode.EnvBinDir + " at a directory holding etcd, kube-apiserver, kube-controller-manager and kubectl)"

// ControlPlane is a running etcd and kube-apiserver on 127.0.0.1, and
// kube-controller-manager with WithRealCluster. Create it with New or
// Start; its exported fields are read-only.
type ControlPlane struct {
	// URL is the API server's address, "https://127.0.0.1:PORT".
	URL string
	// Token is a bearer token of a user in system:masters.
	Token string
	// CAData is the PEM the API server's serving certificate verifies
	// against (its self-signed certificate and issuer).
	CAData []byte
	// EtcdURL is etcd's client address, "http://127.0.0.1:PORT".
	EtcdURL string
	// KubeconfigPath is a kubeconfig file for the admin user (what
	// Kubeconfig returns), ready for kubectl --kubeconfig or any client
	// that reads one. It is in Dir.
	KubeconfigPath string
	// KubeletClientCAData is the PEM of the CA that signed the client
	// certificate the API server presents to kubelets (user
	// KubeletClientUser, group system:masters): a node's API trusts it as
	// its client CA (the kubelet's --client-ca-file) to serve kubectl
	// logs, exec, attach, port-forward and the node proxy. The API server
	// does not verify the kubelets' serving certificates.
	KubeletClientCAData []byte
	// Dir holds everything the processes write: data, certificates,
	// kubeconfigs, logs. Close removes it.
	Dir string

	cfg      config
	apiBin   string
	binDir   string
	apiArgs  []string
	insecure *http.Client // for readiness before the certificate exists
	verified *http.Client // GetJSON's: trusts CAData only

	mu             sync.Mutex // guards api, kcm and closed
	etcd, api, kcm *process
	closed         bool

	closeOnce sync.Once
	closeErr  error
}

// New starts etcd, then kube-apiserver, and waits until the API server's
// /readyz says ok; with WithRealCluster it then starts
// kube-controller-manager and waits until its /healthz says ok and the
// default ServiceAccount exists. Missing binaries give an error wrapping
// ErrUnavailable, bad options a *ConfigError, a process that exits or does
// not get ready a *StartError. Nothing is left running or on disk when New
// fails.
func New(opts ...Option) (*ControlPlane, error) {
	c := config{binDir: defaultBinDir(), startTimeout: 2 * time.Minute, stopTimeout: 10 * time.Second}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	bins := map[string]string{}
	names := []string{etcdName, apiServerName}
	if c.realCluster {
		names = append(names, controllerManagerName)
	}
	for _, name := range names {
		bin := filepath.Join(c.binDir, name)
		if fi, err := os.Stat(bin); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("%w: no %s binary at %s; %s", ErrUnavailable, name, bin, installHint)
		}
		bins[name] = bin
	}
	reapStale()
	dir, err := os.MkdirTemp("", dirPattern)
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	cp, err := launch(dir, bins, c)
	if err != nil {
		if cp != nil {
			cp.stopAll()
		}
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return cp, nil
}

func defaultBinDir() string {
	if d := os.Getenv(testnode.EnvBinDir); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = "/root"
	}
	return filepath.Join(home, ".cache", "syncpod", "node", "bin")
}

// launch prepares dir and starts the processes; on error the returned
// ControlPlane (if any) holds what must be stopped.
func launch(dir string, bins map[string]string, c config) (*ControlPlane, error) {
	if err := testnode.WriteOwner(dir); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	etcdPort, peerPort, apiPort, kcmPort := ports[0], ports[1], ports[2], ports[3]
	token, err := randomHex(16)
	if err != nil {
		return nil, err
	}
	kcmToken, err := randomHex(16)
	if err != nil {
		return nil, err
	}
	if err := writeServiceAccountKeys(dir); err != nil {
		return nil, err
	}
	kubeletCA, err := writeKubeletClientCert(dir)
	if err != nil {
		return nil, err
	}
	tokens := token + ",admin,admin,system:masters\n"
	if c.realCluster {
		tokens += kcmToken + "," + controllerManagerUser + "," + controllerManagerUser + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	cp := &ControlPlane{
		URL:                 "https://127.0.0.1:" + strconv.Itoa(apiPort),
		Token:               token,
		EtcdURL:             "http://127.0.0.1:" + strconv.Itoa(etcdPort),
		Dir:                 dir,
		KubeletClientCAData: kubeletCA,
		cfg:                 c,
		apiBin:              bins[apiServerName],
		binDir:              c.binDir,
		insecure: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // readiness only: CAData is read once the server has written it
		}},
	}
	peer := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	cp.etcd, err = startProcess(dir, etcdName, bins[etcdName], []string{
		"--name=controlplane",
		"--data-dir=" + filepath.Join(dir, "etcd-data"),
		"--listen-client-urls=" + cp.EtcdURL,
		"--advertise-client-urls=" + cp.EtcdURL,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=controlplane=" + peer,
		"--unsafe-no-fsync",
		"--log-level=warn",
	})
	if err != nil {
		return nil, err
	}
	if err := cp.waitReady(cp.etcd, http.DefaultClient, cp.EtcdURL+"/health", ""); err != nil {
		return cp, cp.startError(cp.etcd, err)
	}
	certDir := filepath.Join(dir, "certs")
	admission := "--disable-admission-plugins=ServiceAccount"
	if c.realCluster {
		admission = "--enable-admission-plugins=ServiceAccount"
	}
	cp.apiArgs = append([]string{
		"--etcd-servers=" + cp.EtcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + certDir,
		"--service-account-key-file=" + filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(dir, "sa.key"),
		"--service-account-issuer=" + serviceAccountIssuer,
		"--token-auth-file=" + filepath.Join(dir, "tokens.csv"),
		"--kubelet-client-certificate=" + filepath.Join(dir, kubeletClientCertFile),
		"--kubelet-client-key=" + filepath.Join(dir, kubeletClientKeyFile),
		// As kubeadm sets it: a node's InternalIP before its Hostname, which
		// need not resolve to where the node listens.
		"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--enable-priority-and-fairness=false",
		admission,
		"--allow-privileged=true",
		"--profiling=false",
	}, c.extraFlags...)
	if err := cp.startAPIServer(); err != nil {
		return cp, err
	}
	ca, err := os.ReadFile(filepath.Join(certDir, "apiserver.crt"))
	if err != nil {
		return cp, fmt.Errorf("controlplane: the API server's certificate: %w", err)
	}
	cp.CAData = ca
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return cp, fmt.Errorf("controlplane: no PEM certificate in the API server's %s", filepath.Join(certDir, "apiserver.crt"))
	}
	cp.verified = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}
	cp.KubeconfigPath = filepath.Join(dir, "admin.kubeconfig")
	if err := os.WriteFile(cp.KubeconfigPath, cp.Kubeconfig(), 0o600); err != nil {
		return cp, fmt.Errorf("controlplane: %w", err)
	}
	if c.realCluster {
		if err := cp.startControllerManager(bins[controllerManagerName], kcmToken, kcmPort); err != nil {
			return cp, err
		}
	}
	return cp, nil
}

// startAPIServer starts kube-apiserver with cp's arguments and waits for
// /readyz.
func (cp *ControlPlane) startAPIServer() error {
	p, err := startProcess(cp.Dir, apiServerName, cp.apiBin, cp.apiArgs)
	if err != nil {
		return err
	}
	cp.mu.Lock()
	cp.api = p
	cp.mu.Unlock()
	if err := cp.waitReady(p, cp.insecure, cp.URL+"/readyz", cp.Token); err != nil {
		return cp.startError(p, err)
	}
	return nil
}

func (cp *ControlPlane) startError(p *process, err error) error {
	return &StartError{Process: p.name, Dir: cp.Dir, LogTail: testnode.LogTail(p.logPath, 40), Err: err}
}

// waitReady polls url until it answers 200 "ok"-like, p exits, or the start
// timeout passes.
func (cp *ControlPlane) waitReady(p *process, client *http.Client, url, token string) error {
	ctx, cancel := context.WithTimeout(context.Background(), cp.cfg.startTimeout)
	defer cancel()
	var last error
	for {
		if ended, werr := p.exited(); ended {
			return fmt.Errorf("%s exited: %v", p.name, werr)
		}
		if last = get(ctx, client, url, token); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready within %v: %w", cp.cfg.startTimeout, last)
		case <-p.done:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func get(ctx context.Context, client *http.Client, url, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// errZero is what a ControlPlane not made by New or Start answers.
var errZero = errors.New("controlplane: a zero ControlPlane cannot be used; use New or Start")

// RestartAPIServer stops kube-apiserver (SIGTERM) and starts it again on
// the same port, certificate and etcd, returning once it is ready: what a
// client sees during an API server upgrade or crash. etcd keeps running,
// so nothing stored is lost; kube-controller-manager, with
// WithRealCluster, keeps running and reconnects.
func (cp *ControlPlane) RestartAPIServer() error {
	if cp == nil || cp.apiBin == "" {
		return errZero
	}
	cp.mu.Lock()
	closed, api := cp.closed, cp.api
	cp.mu.Unlock()
	if closed {
		return ErrClosed
	}
	api.stop(cp.cfg.stopTimeout)
	return cp.startAPIServer()
}

// Healthy returns nil when the API server's /readyz says ok.
func (cp *ControlPlane) Healthy(ctx context.Context) error {
	if cp == nil || cp.apiBin == "" {
		return errZero
	}
	return get(ctx, cp.insecure, cp.URL+"/readyz", cp.Token)
}

// Kubeconfig returns a kubeconfig (YAML) for the admin user: server URL,
// CAData and Token, for kubectl and any client that reads one.
func (cp *ControlPlane) Kubeconfig() []byte {
	if cp == nil || cp.apiBin == "" {
		return nil
	}
	return kubeconfigYAML(cp.URL, cp.CAData, "admin", cp.Token)
}

// LogPaths returns the log files of etcd and kube-apiserver;
// kube-controller-manager's, with WithRealCluster, is
// kube-controller-manager.log beside them.
func (cp *ControlPlane) LogPaths() (etcd, apiServer string) {
	if cp == nil || cp.apiBin == "" {
		return "", ""
	}
	return filepath.Join(cp.Dir, etcdName+".log"), filepath.Join(cp.Dir, apiServerName+".log")
}

// Close stops kube-controller-manager (with WithRealCluster), then
// kube-apiserver, then etcd (SIGTERM, then SIGKILL after the
// stop timeout), waits for both and removes Dir. Close is idempotent; later
// calls return what the first returned.
func (cp *ControlPlane) Close() error {
	if cp == nil || cp.apiBin == "" {
		return errZero
	}
	cp.closeOnce.Do(func() {
		cp.mu.Lock()
		cp.closed = true
		cp.mu.Unlock()
		cp.stopAll()
		cp.insecure.CloseIdleConnections()
		if cp.verified != nil {
			cp.verified.CloseIdleConnections()
		}
		if err := testnode.RemoveAll(cp.Dir); err != nil {
			cp.closeErr = fmt.Errorf("controlplane: %w", err)
		}
	})
	return cp.closeErr
}

func (cp *ControlPlane) stopAll() {
	cp.mu.Lock()
	kcm, api, etcd := cp.kcm, cp.api, cp.etcd
	cp.mu.Unlock()
	stopTimeout := cp.cfg.stopTimeout
	if kcm != nil {
		kcm.stop(stopTimeout)
	}
	if api != nil {
		api.stop(stopTimeout)
	}
	if etcd != nil {
		etcd.stop(stopTimeout)
	}
}

// freePorts finds n free loopback ports. Another process could take one
// before the control plane binds it; the process then fails to start, with
// the reason in its log.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	out := make([]int, n)
	for i := range out {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("controlplane: free port: %w", err)
		}
		ls = append(ls, l)
		out[i] = l.Addr().(*net.TCPAddr).Port
	}
	return out, nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("controlplane: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// writeServiceAccountKeys writes the RSA pair the API server signs and
// verifies service account tokens with: sa.key (PKCS #1) and sa.pub (PKIX).
func writeServiceAccountKeys(dir string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("controlplane: service account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("controlplane: service account key: %w", err)
	}
	files := map[string]*pem.Block{
		"sa.key": {Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)},
		"sa.pub": {Type: "PUBLIC KEY", Bytes: pub},
	}
	for name, block := range files {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			return fmt.Errorf("controlplane: %w", err)
		}
	}
	return nil
}
