package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"

	"github.com/syncpod/syncpod/examples/virtualkubelet/provider"
)

// The provider serves every call of virtual-kubelet's node API.
var _ nodeutil.Provider = (*provider.Provider)(nil)

// apiOptions are the settings of the node's kubelet API (the kubelet's
// --address/--port, --tls-cert-file, --tls-private-key-file and
// --client-ca-file).
type apiOptions struct {
	// listen is the address the API listens on ("0.0.0.0:10250"; port 0
	// picks a free one); empty: the API is not served.
	listen string
	// certFile and keyFile are the serving certificate and key; empty: a
	// self-signed certificate made at start, as the kubelet makes one.
	certFile, keyFile string
	// clientCAFile holds the CAs whose client certificates authenticate
	// (the API server's kubelet client certificate); empty: only bearer
	// tokens authenticate.
	clientCAFile string
}

// Kubelet API defaults: the kubelet's stream timeouts.
const (
	streamIdleTimeout     = 4 * time.Hour
	streamCreationTimeout = 30 * time.Second
)

// kubeletAPI is the node's kubelet API being served.
type kubeletAPI struct {
	ln   net.Listener
	port int32
	srv  *http.Server
	wg   sync.WaitGroup
}

// listenKubeletAPI opens the API's listener, so that its port is known
// before the node registers (Status.DaemonEndpoints).
func listenKubeletAPI(o apiOptions) (*kubeletAPI, error) {
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return nil, fmt.Errorf("kubelet API: %w", err)
	}
	return &kubeletAPI{ln: ln, port: int32(ln.Addr().(*net.TCPAddr).Port)}, nil
}

// serve serves h over TLS with tlsCfg until stop.
func (k *kubeletAPI) serve(tlsCfg *tls.Config, h http.Handler, logger *zap.Logger) {
	k.srv = &http.Server{Handler: h, TLSConfig: tlsCfg, ReadHeaderTimeout: 30 * time.Second,
		ErrorLog: zap.NewStdLog(logger.Named("kubelet-api"))}
	k.wg.Go(func() {
		if err := k.srv.Serve(tls.NewListener(k.ln, tlsCfg)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("kubelet API stopped", zap.Error(err))
		}
	})
}

// stop closes the listener and every connection, and waits for the server.
func (k *kubeletAPI) stop() {
	if k.srv != nil {
		_ = k.srv.Close()
	} else {
		_ = k.ln.Close()
	}
	k.wg.Wait()
}

// kubeletAuth authenticates requests as the kubelet does with webhook
// authentication: client certificates signed by clientCA (none if empty),
// bearer tokens by TokenReview; and authorizes them with
// SubjectAccessReview on the node's subresources (nodes/proxy, /stats,
// /metrics, /log) through kube. Anonymous requests are refused (401).
func kubeletAuth(kube kubernetes.Interface, nodeName string, clientCA []byte) (nodeutil.Auth, error) {
	var ca dynamiccertificates.CAContentProvider
	if len(clientCA) > 0 {
		var err error
		if ca, err = dynamiccertificates.NewStaticCAContent("client-ca", clientCA); err != nil {
			return nil, fmt.Errorf("kubelet API client CA: %w", err)
		}
	}
	return nodeutil.WebhookAuth(kube, nodeName, func(c *nodeutil.WebhookAuthConfig) error {
		c.AuthnConfig.ClientCertificateCAContentProvider = ca
		c.AuthnConfig.Anonymous = nil // no anonymous access
		return nil
	})
}

// kubeletAPIHandler routes the kubelet API's paths (containerLogs, exec,
// attach, portForward, pods, stats/summary, metrics/resource) to prov,
// behind auth.
func kubeletAPIHandler(prov *provider.Provider, pods corev1listers.PodLister, auth nodeutil.Auth) http.Handler {
	h := api.PodHandler(api.PodHandlerConfig{
		RunInContainer:    prov.RunInContainer,
		AttachToContainer: prov.AttachToContainer,
		PortForward:       prov.PortForward,
		GetContainerLogs:  prov.GetContainerLogs,
		GetPods:           prov.GetPods,
		GetPodsFromKubernetes: func(context.Context) ([]*corev1.Pod, error) {
			return pods.List(labels.Everything())
		},
		GetStatsSummary:       prov.GetStatsSummary,
		GetMetricsResource:    prov.GetMetricsResource,
		StreamIdleTimeout:     streamIdleTimeout,
		StreamCreationTimeout: streamCreationTimeout,
	}, false)
	return nodeutil.WithAuth(auth, h)
}

// serverTLS is the API's TLS config: the certificate of o, or a
// self-signed one for the node's name and IP. Client certificates are
// asked for, not required: the authenticator verifies them, and bearer
// tokens work without one.
func serverTLS(o apiOptions, nodeName, nodeIP string) (*tls.Config, error) {
	var cert tls.Certificate
	var err error
	switch {
	case o.certFile != "" || o.keyFile != "":
		cert, err = tls.LoadX509KeyPair(o.certFile, o.keyFile)
	default:
		cert, err = selfSignedCert(nodeName, nodeIP)
	}
	if err != nil {
		return nil, fmt.Errorf("kubelet API serving certificate: %w", err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert},
		ClientAuth: tls.RequestClientCert, NextProtos: []string{"http/1.1"}}, nil
}

// selfSignedCert is a serving certificate for the node's name, its IP and
// localhost, valid for a year.
func selfSignedCert(nodeName, nodeIP string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: nodeName + "@" + fmt.Sprint(now.Unix())},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{nodeName, "localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	if ip := net.ParseIP(nodeIP); ip != nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// startKubeletAPI serves the node's kubelet API on the listener k with
// o's certificates, authenticating and authorizing through kube.
func startKubeletAPI(k *kubeletAPI, o apiOptions, kube kubernetes.Interface, nodeName, nodeIP string,
	prov *provider.Provider, pods corev1listers.PodLister, logger *zap.Logger) error {
	var clientCA []byte
	if o.clientCAFile != "" {
		var err error
		if clientCA, err = os.ReadFile(o.clientCAFile); err != nil {
			return fmt.Errorf("kubelet API client CA: %w", err)
		}
	}
	auth, err := kubeletAuth(kube, nodeName, clientCA)
	if err != nil {
		return err
	}
	tlsCfg, err := serverTLS(o, nodeName, nodeIP)
	if err != nil {
		return err
	}
	k.serve(tlsCfg, kubeletAPIHandler(prov, pods, auth), logger)
	logger.Info("serving the kubelet API", zap.String("address", k.ln.Addr().String()))
	return nil
}
