package criclient

import (
	"slices"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func containerIDs(cs []*runtimeapi.Container) []string {
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.GetId())
	}
	return ids
}

func TestFilterContainers(t *testing.T) {
	running := runtimeapi.ContainerState_CONTAINER_RUNNING
	exited := runtimeapi.ContainerState_CONTAINER_EXITED
	items := []*runtimeapi.Container{
		{Id: "aaa111", PodSandboxId: "pod1", State: running, Labels: map[string]string{"app": "web", "tier": "fe"}},
		{Id: "aaa222", PodSandboxId: "pod1", State: exited, Labels: map[string]string{"app": "web"}},
		{Id: "bbb333", PodSandboxId: "pod2", State: running, Labels: map[string]string{"app": "db"}},
	}
	for _, tc := range []struct {
		name   string
		filter *runtimeapi.ContainerFilter
		want   []string
		local  bool
	}{
		{"nil filter", nil, []string{"aaa111", "aaa222", "bbb333"}, true},
		{"empty filter", &runtimeapi.ContainerFilter{}, []string{"aaa111", "aaa222", "bbb333"}, true},
		{"exact id", &runtimeapi.ContainerFilter{Id: "aaa222"}, []string{"aaa222"}, true},
		{"unique prefix", &runtimeapi.ContainerFilter{Id: "bbb"}, []string{"bbb333"}, true},
		{"ambiguous prefix", &runtimeapi.ContainerFilter{Id: "aaa"}, nil, true},
		{"unknown id", &runtimeapi.ContainerFilter{Id: "zzz"}, nil, true},
		{"state", &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: running}}, []string{"aaa111", "bbb333"}, true},
		{"sandbox", &runtimeapi.ContainerFilter{PodSandboxId: "pod1"}, []string{"aaa111", "aaa222"}, true},
		{"sandbox and state", &runtimeapi.ContainerFilter{PodSandboxId: "pod1", State: &runtimeapi.ContainerStateValue{State: exited}}, []string{"aaa222"}, true},
		{"labels all must match", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"app": "web", "tier": "fe"}}, []string{"aaa111"}, true},
		{"label value differs", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"app": "cache"}}, nil, true},
		{"empty selector", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{}}, []string{"aaa111", "aaa222", "bbb333"}, true},
		{"id and other sandbox", &runtimeapi.ContainerFilter{Id: "aaa111", PodSandboxId: "pod2"}, nil, true},
		{"sandbox prefix goes to the runtime", &runtimeapi.ContainerFilter{PodSandboxId: "pod"}, nil, false},
		{"sandbox without containers goes to the runtime", &runtimeapi.ContainerFilter{PodSandboxId: "pod3"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := filterContainers(items, tc.filter)
			if ok != tc.local {
				t.Fatalf("decided locally = %v, want %v", ok, tc.local)
			}
			if ids := containerIDs(got); !slices.Equal(ids, tc.want) {
				t.Fatalf("got %v, want %v", ids, tc.want)
			}
		})
	}
}

func TestFilterContainersClones(t *testing.T) {
	items := []*runtimeapi.Container{{Id: "a", Labels: map[string]string{"k": "v"}}}
	got, _ := filterContainers(items, nil)
	got[0].Labels["k"] = "changed"
	got[0].Id = "changed"
	if items[0].Id != "a" || items[0].Labels["k"] != "v" {
		t.Fatal("a caller modified the shared snapshot through a filtered result")
	}
}

func TestFilterPodSandboxes(t *testing.T) {
	ready := runtimeapi.PodSandboxState_SANDBOX_READY
	notReady := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	items := []*runtimeapi.PodSandbox{
		{Id: "abc1", State: ready, Labels: map[string]string{"io.kubernetes.pod.uid": "u1"}},
		{Id: "abc2", State: notReady, Labels: map[string]string{"io.kubernetes.pod.uid": "u2"}},
		{Id: "def3", State: ready},
	}
	ids := func(ss []*runtimeapi.PodSandbox) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.GetId())
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		filter *runtimeapi.PodSandboxFilter
		want   []string
	}{
		{"nil", nil, []string{"abc1", "abc2", "def3"}},
		{"exact", &runtimeapi.PodSandboxFilter{Id: "abc2"}, []string{"abc2"}},
		{"unique prefix", &runtimeapi.PodSandboxFilter{Id: "d"}, []string{"def3"}},
		{"ambiguous prefix", &runtimeapi.PodSandboxFilter{Id: "abc"}, nil},
		{"state", &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: ready}}, []string{"abc1", "def3"}},
		{"label", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": "u2"}}, []string{"abc2"}},
		{"label missing", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"x": ""}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ids(filterPodSandboxes(items, tc.filter)); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
