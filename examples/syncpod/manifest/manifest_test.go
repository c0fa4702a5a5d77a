package manifest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/syncpod/syncpod/examples/syncpod/manifest"
)

func TestParseMultiDocumentAndList(t *testing.T) {
	data := `
# a comment-only document is skipped
---
apiVersion: v1
kind: Pod
metadata: {name: a}
spec:
  containers: [{name: app, image: busybox}]
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: b, namespace: team}
  spec:
    restartPolicy: OnFailure
    containers: [{name: app, image: "registry.example:5000/x/y:1"}]
- apiVersion: v1
  kind: Pod
  metadata: {name: c}
  spec:
    containers: [{name: app, image: nginx}]
`
	pods, err := manifest.Parse("pods.yaml", []byte(data))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	var names []string
	for _, p := range pods {
		names = append(names, p.Namespace+"/"+p.Name+"/"+string(p.Spec.RestartPolicy))
	}
	if got, want := strings.Join(names, ","), "default/a/Always,team/b/OnFailure,default/c/Always"; got != want {
		t.Errorf("pods = %s, want %s", got, want)
	}
}

func TestParseJSON(t *testing.T) {
	pods, err := manifest.Parse("p.json", []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"a","image":"busybox:1.36"}]}}`))
	if err != nil || len(pods) != 1 || pods[0].Name != "j" {
		t.Fatalf("got %v, %v", pods, err)
	}
}

func TestParseErrorsKeepGoodPods(t *testing.T) {
	data := `
metadata: {name: good}
spec: {containers: [{name: app, image: busybox}]}
---
metadata: {name: ""}
spec: {containers: [{name: app, image: busybox}]}
---
metadata: {name: dup}
spec:
  initContainers: [{name: app, image: busybox}]
  containers: [{name: app, image: busybox}]
---
metadata: {name: badimage}
spec: {containers: [{name: app, image: "UPPER/Case::bad"}]}
---
metadata: {name: Bad_Name}
spec: {containers: [{name: app, image: busybox}]}
---
kind: Deployment
metadata: {name: d}
---
metadata: {name: unknownfield}
spec: {containers: [{name: app, image: busybox, imagee: x}]}
---
: not yaml : [
`
	pods, err := manifest.Parse("mixed.yaml", []byte(data))
	if len(pods) != 1 || pods[0].Name != "good" {
		t.Fatalf("pods = %v, want only good", pods)
	}
	if !errors.Is(err, manifest.ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
	var me *manifest.Error
	if !errors.As(err, &me) || me.File != "mixed.yaml" {
		t.Fatalf("errors.As: %v", err)
	}
	msg := err.Error()
	for _, want := range []string{
		"(document 2): metadata.name: name is required",
		"pod default/dup: spec.containers[0].name: duplicate container name \"app\" (also spec.initContainers[0])",
		"pod default/badimage: spec.containers[0].image: bad image reference",
		"pod default/Bad_Name: metadata.name",
		"kind \"Deployment\" is not Pod or List",
		"(document 7): parse pod",
		"(document 8)",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not mention %q:\n%s", want, msg)
		}
	}
}

func TestValidateRules(t *testing.T) {
	pods, _ := manifest.Parse("x", []byte(`
metadata: {name: ok}
spec:
  initContainers: [{name: side, image: busybox, restartPolicy: Always}]
  containers: [{name: app, image: busybox}]
`))
	if len(pods) != 1 {
		t.Fatal("valid pod with a sidecar rejected")
	}
	p := pods[0].DeepCopy()
	p.Spec.RestartPolicy = "Sometimes"
	if f, err := manifest.Validate(p); err == nil || f != "spec.restartPolicy" {
		t.Errorf("restart policy: field %q err %v", f, err)
	}
	p = pods[0].DeepCopy()
	p.Spec.Containers = nil
	if f, err := manifest.Validate(p); err == nil || f != "spec.containers" {
		t.Errorf("no containers: field %q err %v", f, err)
	}
}
