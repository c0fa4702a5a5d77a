package controlplane_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/syncpod/syncpod/internal/controlplane"
)

// waitUntil polls cond every 200 ms until it returns nil or the bound (a
// loaded machine's, not a measured speed) passes, then fails t with cond's
// last error.
func waitUntil(t *testing.T, what string, cond func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		err := cond(ctx)
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// kubectlJSON runs kubectl with -o json and decodes its answer into out.
func kubectlJSON(ctx context.Context, cp *controlplane.ControlPlane, out any, args ...string) error {
	b, err := cp.Kubectl(ctx, append(args, "-o", "json")...)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

type objectList struct {
	Items []struct {
		Metadata struct {
			Name            string            `json:"name"`
			Labels          map[string]string `json:"labels"`
			OwnerReferences []struct {
				Kind string `json:"kind"`
				Name string `json:"name"`
			} `json:"ownerReferences"`
		} `json:"metadata"`
		Spec struct {
			NodeName           string `json:"nodeName"`
			ServiceAccountName string `json:"serviceAccountName"`
			Volumes            []struct {
				Name      string          `json:"name"`
				Projected json.RawMessage `json:"projected"`
			} `json:"volumes"`
		} `json:"spec"`
		Status struct {
			Phase string `json:"phase"`
		} `json:"status"`
	} `json:"items"`
}

// With WithRealCluster the control plane behaves as a cluster's: the
// default namespace has its default ServiceAccount and kube-root-ca.crt,
// a TokenRequest gives a token of the asked audience and lifetime that
// authenticates, a Deployment makes a ReplicaSet that makes a Pod with the
// kube-api-access volume, a Job makes a Pod, the garbage collector removes
// what a deleted Deployment owned, and a deleted namespace is emptied and
// removed. Most of it goes through the real kubectl.
func TestRealNodeCluster(t *testing.T) {
	cp := controlplane.Start(t, controlplane.WithRealCluster())
	do := client(t, cp)
	ctx := context.Background()

	// New has waited for the default ServiceAccount.
	var sa struct {
		Metadata struct{ Name string } `json:"metadata"`
	}
	if err := cp.GetJSON(ctx, "/api/v1/namespaces/default/serviceaccounts/default", &sa); err != nil || sa.Metadata.Name != "default" {
		t.Fatalf("the default ServiceAccount after New: %+v, %v", sa, err)
	}
	waitUntil(t, "kube-root-ca.crt in default", func(ctx context.Context) error {
		var cm struct {
			Data map[string]string `json:"data"`
		}
		if err := cp.GetJSON(ctx, "/api/v1/namespaces/default/configmaps/kube-root-ca.crt", &cm); err != nil {
			return err
		}
		if !strings.Contains(cm.Data["ca.crt"], strings.TrimSpace(string(cp.CAData))) {
			return errors.New("its ca.crt is not the API server's CA: " + cm.Data["ca.crt"])
		}
		return nil
	})

	// A TokenRequest for the API server's audience and one of ours.
	const audience = "syncpod-test"
	tr := map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
		"spec": map[string]any{"audiences": []string{"https://kubernetes.default.svc.cluster.local", audience}, "expirationSeconds": 3600}}
	code, body := do(http.MethodPost, "/api/v1/namespaces/default/serviceaccounts/default/token", tr)
	if code != http.StatusCreated {
		t.Fatalf("TokenRequest: %d %s", code, body)
	}
	var got struct {
		Status struct {
			Token               string    `json:"token"`
			ExpirationTimestamp time.Time `json:"expirationTimestamp"`
		} `json:"status"`
	}
	if err := json.Unmarshal(body, &got); err != nil || got.Status.Token == "" {
		t.Fatalf("TokenRequest answer %s: %v", body, err)
	}
	if left := time.Until(got.Status.ExpirationTimestamp); left < 50*time.Minute || left > 61*time.Minute {
		t.Fatalf("the token expires at %v, %v from now; want the hour asked for", got.Status.ExpirationTimestamp, left)
	}
	who, err := cp.Kubectl(ctx, "auth", "whoami", "--token="+got.Status.Token, "-o", "jsonpath={.status.userInfo.username}")
	if err != nil || string(who) != "system:serviceaccount:default:default" {
		t.Fatalf("kubectl auth whoami with the token = %q, %v", who, err)
	}
	review := map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
		"spec": map[string]any{"token": got.Status.Token, "audiences": []string{audience}}}
	code, body = do(http.MethodPost, "/apis/authentication.k8s.io/v1/tokenreviews", review)
	var rev struct {
		Status struct {
			Authenticated bool     `json:"authenticated"`
			Audiences     []string `json:"audiences"`
			User          struct {
				Username string `json:"username"`
			} `json:"user"`
		} `json:"status"`
	}
	if code != http.StatusCreated || json.Unmarshal(body, &rev) != nil || !rev.Status.Authenticated ||
		rev.Status.User.Username != "system:serviceaccount:default:default" || len(rev.Status.Audiences) != 1 || rev.Status.Audiences[0] != audience {
		t.Fatalf("TokenReview for audience %s: %d %s", audience, code, body)
	}
	// A token for another audience only is not the API server's.
	tr["spec"] = map[string]any{"audiences": []string{audience}, "expirationSeconds": 3600}
	code, body = do(http.MethodPost, "/api/v1/namespaces/default/serviceaccounts/default/token", tr)
	if code != http.StatusCreated || json.Unmarshal(body, &got) != nil {
		t.Fatalf("TokenRequest for %s only: %d %s", audience, code, body)
	}
	var ke *controlplane.KubectlError
	if _, err := cp.Kubectl(ctx, "get", "--raw", "/api", "--token="+got.Status.Token); !errors.As(err, &ke) || !strings.Contains(ke.Stderr, "Unauthorized") {
		t.Fatalf("kubectl get --raw /api with a token for %s only = %v, want a *KubectlError saying Unauthorized", audience, err)
	}

	// A namespace of our own, with a Deployment and a Job in it.
	if _, err := cp.Kubectl(ctx, "create", "namespace", "apps"); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Kubectl(ctx, "-n", "apps", "create", "deployment", "web", "--image=busybox", "--replicas=1"); err != nil {
		t.Fatal(err)
	}
	var rsName string
	waitUntil(t, "the Deployment's ReplicaSet", func(ctx context.Context) error {
		var rs objectList
		if err := kubectlJSON(ctx, cp, &rs, "-n", "apps", "get", "replicasets"); err != nil {
			return err
		}
		if len(rs.Items) != 1 || len(rs.Items[0].Metadata.OwnerReferences) != 1 || rs.Items[0].Metadata.OwnerReferences[0].Name != "web" {
			return errors.New("want one ReplicaSet owned by Deployment web")
		}
		rsName = rs.Items[0].Metadata.Name
		return nil
	})
	waitUntil(t, "the ReplicaSet's Pod", func(ctx context.Context) error {
		var pods objectList
		if err := kubectlJSON(ctx, cp, &pods, "-n", "apps", "get", "pods", "-l", "app=web"); err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return errors.New("want one Pod")
		}
		p := pods.Items[0]
		if len(p.Metadata.OwnerReferences) != 1 || p.Metadata.OwnerReferences[0].Kind != "ReplicaSet" || p.Metadata.OwnerReferences[0].Name != rsName {
			t.Fatalf("Pod %s is owned by %+v, want ReplicaSet %s", p.Metadata.Name, p.Metadata.OwnerReferences, rsName)
		}
		if p.Status.Phase != "Pending" || p.Spec.NodeName != "" {
			t.Fatalf("Pod %s: phase %q on node %q, want Pending on none (no scheduler runs)", p.Metadata.Name, p.Status.Phase, p.Spec.NodeName)
		}
		if p.Spec.ServiceAccountName != "default" || len(p.Spec.Volumes) != 1 ||
			!strings.HasPrefix(p.Spec.Volumes[0].Name, "kube-api-access-") || len(p.Spec.Volumes[0].Projected) == 0 {
			t.Fatalf("Pod %s: service account %q, volumes %+v; want default and one projected kube-api-access volume", p.Metadata.Name, p.Spec.ServiceAccountName, p.Spec.Volumes)
		}
		return nil
	})
	if _, err := cp.Kubectl(ctx, "-n", "apps", "create", "job", "once", "--image=busybox"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the Job's Pod", func(ctx context.Context) error {
		var pods objectList
		if err := kubectlJSON(ctx, cp, &pods, "-n", "apps", "get", "pods", "-l", "job-name=once"); err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return errors.New("want one Pod")
		}
		return nil
	})

	// The garbage collector removes what the deleted Deployment owned.
	if _, err := cp.Kubectl(ctx, "-n", "apps", "delete", "deployment", "web", "--wait=false"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the ReplicaSet and Pod of the deleted Deployment", func(ctx context.Context) error {
		var left objectList
		if err := kubectlJSON(ctx, cp, &left, "-n", "apps", "get", "replicasets,pods", "-l", "app=web"); err != nil {
			return err
		}
		if len(left.Items) != 0 {
			return errors.New("still there: " + left.Items[0].Metadata.Name)
		}
		return nil
	})

	// The namespace controller empties a deleted namespace, then removes it.
	if _, err := cp.Kubectl(ctx, "-n", "apps", "create", "configmap", "settings", "--from-literal=k=v"); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Kubectl(ctx, "delete", "namespace", "apps", "--wait=false"); err != nil {
		t.Fatal(err)
	}
	var se *controlplane.StatusError
	waitUntil(t, "the deleted namespace gone", func(ctx context.Context) error {
		var ns map[string]any
		if err := cp.GetJSON(ctx, "/api/v1/namespaces/apps", &ns); !errors.As(err, &se) || se.Code != http.StatusNotFound {
			return errors.New("namespace apps is still there")
		}
		return nil
	})
	for _, path := range []string{"/api/v1/namespaces/apps/configmaps/settings", "/apis/batch/v1/namespaces/apps/jobs/once",
		"/api/v1/namespaces/apps/serviceaccounts/default", "/api/v1/namespaces/apps/configmaps/kube-root-ca.crt"} {
		var obj map[string]any
		if err := cp.GetJSON(ctx, path, &obj); !errors.As(err, &se) || se.Code != http.StatusNotFound {
			t.Errorf("GET %s after the namespace was removed = %v, want 404", path, err)
		}
	}
}
