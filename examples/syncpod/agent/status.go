package agent

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/criclient/podcri"
)

// Labels and annotations the agent puts on what it creates. The pod and
// container labels are the kubelet's, so crictl and other tools understand
// them; managedLabel marks what --cleanup may remove.
const (
	labelPodUID        = podcri.LabelPodUID
	labelPodName       = podcri.LabelPodName
	labelPodNamespace  = podcri.LabelPodNamespace
	labelContainerName = podcri.LabelContainerName
	managedLabel       = "syncpod.io/managed"
	annotationHash     = "syncpod.io/container-hash"
	annotationInit     = "syncpod.io/container-kind"
)

// containerState is the agent's view of one container instance.
type containerState int

// Container states, as the PLEG groups them.
const (
	stateUnknown containerState = iota // created, not started, or unknown
	stateRunning                       // running
	stateExited                        // exited; ExitCode and FinishedAt are set
)

// String implements fmt.Stringer.
func (s containerState) String() string {
	switch s {
	case stateRunning:
		return "running"
	case stateExited:
		return "exited"
	}
	return "unknown"
}

// containerInstance is one container instance (one attempt).
type containerInstance struct {
	ID         string         // the runtime's container ID ("" when Assumed)
	Name       string         // the container's name in the pod spec
	Attempt    uint32         // restart count: 0 for the first instance
	State      containerState // running, exited or unknown
	ExitCode   int32          // for stateExited
	CreatedAt  time.Time      // when the runtime created it
	FinishedAt time.Time      // for stateExited: when it exited
	Hash       string         // hash of the spec it was started from, to detect changes
	Assumed    bool           // started by this agent, not yet seen in the status
	// Runtime is the runtime's own status of the instance (image, reason,
	// start time) when known; nil for an Assumed one. In ModeBaseline a
	// running instance's comes from its list entry, which has no start
	// time: its creation time stands for it.
	Runtime *runtimeapi.ContainerStatus
}

// runtimePodStatus is what the runtime has for one pod (the kubelet's
// kubecontainer.PodStatus).
type runtimePodStatus struct {
	UID            types.UID                     // the pod's UID
	SandboxID      string                        // newest sandbox, "" if none
	SandboxReady   bool                          // the newest sandbox is ready
	SandboxAttempt uint32                        // the newest sandbox's attempt
	OldSandboxes   []string                      // other sandboxes of the pod, to remove
	StaleReady     []string                      // other sandboxes that are ready: duplicates to remove now
	SandboxCreated time.Time                     // when the chosen sandbox was created
	SandboxIP      string                        // the chosen sandbox's IP, when the runtime gives it (syncpod mode)
	Containers     []*containerInstance          // all instances, newest first
	Observed       time.Time                     // when the runtime was read for it (syncpod mode: the PLEG's timestamp)
	latest         map[string]*containerInstance // by name, newest instance
}

// Latest returns the newest instance of the named container, or nil.
func (s *runtimePodStatus) Latest(name string) *containerInstance {
	if s == nil || s.latest == nil {
		return nil
	}
	return s.latest[name]
}

func (s *runtimePodStatus) index() {
	sort.SliceStable(s.Containers, func(i, j int) bool {
		a, b := s.Containers[i], s.Containers[j]
		if a.Attempt != b.Attempt {
			return a.Attempt > b.Attempt
		}
		return a.CreatedAt.After(b.CreatedAt)
	})
	s.latest = map[string]*containerInstance{}
	for _, c := range s.Containers {
		if _, ok := s.latest[c.Name]; !ok {
			s.latest[c.Name] = c
		}
	}
}

// inspector reads one pod's status from the runtime with two list calls,
// plus a ContainerStatus call per newly exited container (exit code and
// finish time). Exited statuses never change, so they are remembered.
type inspector struct {
	runtime *runtimeLayer

	mu     sync.Mutex
	exited map[string]*runtimeapi.ContainerStatus
}

func newInspector(rt *runtimeLayer) *inspector {
	return &inspector{runtime: rt, exited: map[string]*runtimeapi.ContainerStatus{}}
}

func (in *inspector) forget(ids ...string) {
	in.mu.Lock()
	for _, id := range ids {
		delete(in.exited, id)
	}
	in.mu.Unlock()
}

func (in *inspector) inspect(ctx context.Context, uid types.UID) (*runtimePodStatus, error) {
	sbs, err := in.runtime.sandboxes(ctx, map[string]string{labelPodUID: string(uid)})
	if err != nil {
		return nil, fmt.Errorf("inspect pod %s: ListPodSandbox: %w", uid, err)
	}
	st := &runtimePodStatus{UID: uid}
	if len(sbs) == 0 {
		st.index()
		return st, nil
	}
	cs, err := in.runtime.containers(ctx, map[string]string{labelPodUID: string(uid)})
	if err != nil {
		return nil, fmt.Errorf("inspect pod %s: ListContainers: %w", uid, err)
	}
	running := map[string]int{}
	for _, c := range cs {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			running[c.PodSandboxId]++
		}
	}
	cands := make([]sandboxCandidate, len(sbs))
	for i, sb := range sbs {
		cands[i] = sandboxCandidate{id: sb.Id, ready: sb.State == runtimeapi.PodSandboxState_SANDBOX_READY,
			attempt: sb.GetMetadata().GetAttempt(), created: sb.CreatedAt, running: running[sb.Id]}
	}
	chosen, staleReady, others := pickSandbox(cands)
	st.OldSandboxes, st.StaleReady = others, staleReady
	st.SandboxID, st.SandboxReady, st.SandboxAttempt = cands[chosen].id, cands[chosen].ready, cands[chosen].attempt
	st.SandboxCreated = time.Unix(0, cands[chosen].created)
	for _, c := range cs {
		if c.PodSandboxId != st.SandboxID {
			continue // containers of an old sandbox are removed with it
		}
		s := &containerInstance{
			ID:        c.Id,
			Name:      c.GetMetadata().GetName(),
			Attempt:   c.GetMetadata().GetAttempt(),
			CreatedAt: time.Unix(0, c.CreatedAt),
			Hash:      c.Annotations[annotationHash],
		}
		if n := c.Labels[labelContainerName]; n != "" && s.Name == "" {
			s.Name = n
		}
		s.Runtime = &runtimeapi.ContainerStatus{Id: c.Id, Metadata: c.Metadata, State: c.State, CreatedAt: c.CreatedAt,
			StartedAt: c.CreatedAt, Image: c.Image, ImageRef: c.ImageRef, Labels: c.Labels, Annotations: c.Annotations}
		switch c.State {
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			s.State = stateRunning
		case runtimeapi.ContainerState_CONTAINER_EXITED:
			s.State = stateExited
			full, err := in.exitedStatus(ctx, c.Id)
			if err != nil {
				return nil, err
			}
			s.ExitCode = full.ExitCode
			s.FinishedAt = time.Unix(0, full.FinishedAt)
			s.Runtime = full
		default:
			s.State = stateUnknown
		}
		st.Containers = append(st.Containers, s)
	}
	st.index()
	return st, nil
}

func (in *inspector) exitedStatus(ctx context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	in.mu.Lock()
	s, ok := in.exited[id]
	in.mu.Unlock()
	if ok {
		return s, nil
	}
	resp, err := in.runtime.containerStatus(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("inspect container %s: ContainerStatus: %w", id, err)
	}
	s = resp.GetStatus()
	if s == nil {
		return nil, fmt.Errorf("inspect container %s: ContainerStatus: empty status", id)
	}
	if s.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		in.mu.Lock()
		in.exited[id] = s
		in.mu.Unlock()
	}
	return s, nil
}
