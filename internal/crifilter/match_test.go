package crifilter

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestLabelsMatch(t *testing.T) {
	labels := map[string]string{"app": "web", "tier": "front", "empty": ""}
	tests := []struct {
		name     string
		selector map[string]string
		labels   map[string]string
		want     bool
	}{
		{"nil selector", nil, labels, true},
		{"empty selector on nil labels", map[string]string{}, nil, true},
		{"one key", map[string]string{"app": "web"}, labels, true},
		{"every key", map[string]string{"app": "web", "tier": "front"}, labels, true},
		{"empty value present", map[string]string{"empty": ""}, labels, true},
		{"empty value absent", map[string]string{"missing": ""}, labels, false},
		{"other value", map[string]string{"app": "db"}, labels, false},
		{"one of two keys differs", map[string]string{"app": "web", "tier": "back"}, labels, false},
		{"selector on nil labels", map[string]string{"app": "web"}, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := LabelsMatch(tc.selector, tc.labels); got != tc.want {
				t.Errorf("LabelsMatch(%v, %v) = %v, want %v", tc.selector, tc.labels, got, tc.want)
			}
		})
	}
}

func TestMatchSandbox(t *testing.T) {
	s := Sandbox{ID: "abc", State: runtimeapi.PodSandboxState_SANDBOX_READY, Labels: map[string]string{"app": "web"}}
	ready := &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}
	notReady := &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}
	tests := []struct {
		name string
		f    *runtimeapi.PodSandboxFilter
		id   string
		want bool
	}{
		{"nil filter", nil, "", true},
		{"empty filter", &runtimeapi.PodSandboxFilter{}, "", true},
		{"resolved id equal", nil, "abc", true},
		{"resolved id other", nil, "abd", false},
		{"filter id is not read", &runtimeapi.PodSandboxFilter{Id: "zzz"}, "", true},
		{"state equal", &runtimeapi.PodSandboxFilter{State: ready}, "", true},
		{"state other", &runtimeapi.PodSandboxFilter{State: notReady}, "", false},
		{"zero state value is a filter", &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{}}, "", true},
		{"labels equal", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "web"}}, "", true},
		{"labels other", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "db"}}, "", false},
		{"all set and equal", &runtimeapi.PodSandboxFilter{State: ready, LabelSelector: map[string]string{"app": "web"}}, "abc", true},
		{"all set, id other", &runtimeapi.PodSandboxFilter{State: ready, LabelSelector: map[string]string{"app": "web"}}, "x", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := MatchSandbox(tc.f, tc.id, s); got != tc.want {
				t.Errorf("MatchSandbox(%v, %q) = %v, want %v", tc.f, tc.id, got, tc.want)
			}
		})
	}
	notReadySandbox := s
	notReadySandbox.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	if MatchSandbox(&runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{}}, "", notReadySandbox) {
		t.Error("a zero State value (SANDBOX_READY) matched a not-ready sandbox")
	}
}

func TestMatchContainer(t *testing.T) {
	c := Container{ID: "c1", PodSandboxID: "s1", State: runtimeapi.ContainerState_CONTAINER_RUNNING, Labels: map[string]string{"app": "web"}}
	running := &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}
	exited := &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_EXITED}
	tests := []struct {
		name        string
		f           *runtimeapi.ContainerFilter
		id, sandbox string
		want        bool
	}{
		{"nil filter", nil, "", "", true},
		{"empty filter", &runtimeapi.ContainerFilter{}, "", "", true},
		{"resolved id equal", nil, "c1", "", true},
		{"resolved id other", nil, "c2", "", false},
		{"resolved sandbox equal", nil, "", "s1", true},
		{"resolved sandbox other", nil, "", "s2", false},
		{"filter ids are not read", &runtimeapi.ContainerFilter{Id: "zzz", PodSandboxId: "zzz"}, "", "", true},
		{"state equal", &runtimeapi.ContainerFilter{State: running}, "", "", true},
		{"state other", &runtimeapi.ContainerFilter{State: exited}, "", "", false},
		{"labels equal", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"app": "web"}}, "", "", true},
		{"labels other", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"app": "db"}}, "", "", false},
		{"all set and equal", &runtimeapi.ContainerFilter{State: running, LabelSelector: map[string]string{"app": "web"}}, "c1", "s1", true},
		{"all set, sandbox other", &runtimeapi.ContainerFilter{State: running, LabelSelector: map[string]string{"app": "web"}}, "c1", "s2", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := MatchContainer(tc.f, tc.id, tc.sandbox, c); got != tc.want {
				t.Errorf("MatchContainer(%v, %q, %q) = %v, want %v", tc.f, tc.id, tc.sandbox, got, tc.want)
			}
		})
	}
}

func TestSandboxOfContainerOf(t *testing.T) {
	labels := map[string]string{"app": "web"}
	s := SandboxOf(&runtimeapi.PodSandbox{Id: "s1", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, Labels: labels})
	if s.ID != "s1" || s.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY || s.Labels["app"] != "web" {
		t.Errorf("SandboxOf = %+v", s)
	}
	c := ContainerOf(&runtimeapi.Container{Id: "c1", PodSandboxId: "s1", State: runtimeapi.ContainerState_CONTAINER_EXITED, Labels: labels})
	if c.ID != "c1" || c.PodSandboxID != "s1" || c.State != runtimeapi.ContainerState_CONTAINER_EXITED || c.Labels["app"] != "web" {
		t.Errorf("ContainerOf = %+v", c)
	}
	if got := SandboxOf(nil); got.ID != "" || got.Labels != nil {
		t.Errorf("SandboxOf(nil) = %+v, want zero", got)
	}
	if got := ContainerOf(nil); got.ID != "" || got.PodSandboxID != "" || got.Labels != nil {
		t.Errorf("ContainerOf(nil) = %+v, want zero", got)
	}
}
