package agent

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/syncpod/syncpod/asyncpull"
	"github.com/syncpod/syncpod/criclient/podcri"
)

// ErrUnknownPod is returned by Agent.Pod for a pod the agent does not hold.
var ErrUnknownPod = errors.New("agent: unknown pod")

// pullFailureShown is how long a failed pull shows as errImagePull,
// whatever syncs the pod meanwhile (another container's event), before it
// shows as ImagePullBackOff (scaled by Tuning.TimeScale): long enough for a
// user, or a status watcher, to see why.
const pullFailureShown = 2 * time.Second

// versionTimeout bounds the one Version call that names the runtime.
const versionTimeout = 5 * time.Second

// Pod returns a copy of the pod with uid as last applied, its Status the
// corev1.PodStatus the agent reports for it (podcri.PodStatus of what the
// runtime shows and what the pod's worker knows: why containers wait, what
// the probes say). It reads no runtime state but the agent's own (the
// PLEG's cache), except for one Version call, the first time, that names
// the runtime for container IDs. A pod not applied, or removed, gives
// ErrUnknownPod.
func (a *Agent) Pod(uid types.UID) (*corev1.Pod, error) {
	pod, _, ok := a.reportPod(uid, false)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownPod, uid)
	}
	return pod, nil
}

// reportPod computes uid's pod with its status. With publish it also
// records the status as given to the status hook and reports whether it
// differs from the one given before; a pod whose terminal status is made
// is not reported again.
func (a *Agent) reportPod(uid types.UID, publish bool) (pod *corev1.Pod, changed, ok bool) {
	runtimeName := a.runtimeName()
	st := a.runtimeStatus(uid)
	found := a.pods.with(uid, func(rec *podRecord) {
		if rec.pod == nil || (publish && rec.final) {
			return
		}
		in := a.statusInput(rec, st, runtimeName)
		status, err := podcri.PodStatus(in)
		if err != nil {
			return
		}
		pod = rec.pod.DeepCopy()
		pod.Status = status
		ok = true
		if publish {
			if rec.published != nil && apiequality.Semantic.DeepEqual(*rec.published, status) {
				return
			}
			rec.published = status.DeepCopy()
			changed = true
		}
	})
	return pod, changed, found && ok
}

// runtimeStatus is the runtime's view of the pod the workers read: the
// PLEG's cache in syncpod mode, the relist's in baseline mode.
func (a *Agent) runtimeStatus(uid types.UID) *runtimePodStatus {
	return a.source.podStatus(uid)
}

// statusInput gathers what podcri.PodStatus needs of rec and st, and
// remembers the exited instances it sees (an exited instance is removed
// when its container restarts, and stays the container's lastState).
func (a *Agent) statusInput(rec *podRecord, st *runtimePodStatus, runtimeName string) podcri.StatusInput {
	in := podcri.StatusInput{
		Pod:         rec.pod,
		RuntimeName: runtimeName,
		HostIP:      a.cfg.nodeIP,
		PodIP:       a.podIP(rec.pod, st),
		StartTime:   startTime(rec),
		Previous:    rec.published,
		Now:         a.clock.Now(),
		PodWaiting:  rec.podWaiting,
	}
	if len(rec.waiting) > 0 {
		in.Waiting = make(map[string]podcri.Waiting, len(rec.waiting))
		for k, v := range rec.waiting {
			in.Waiting[k] = v
		}
	}
	uid := rec.uid
	in.Probe = func(cs *runtimeapi.ContainerStatus) (bool, bool) {
		return a.probeState(uid, cs.GetMetadata().GetName(), cs.GetId())
	}
	if st != nil {
		in.SandboxID = st.SandboxID
		if st.SandboxID != "" {
			state := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
			if st.SandboxReady {
				state = runtimeapi.PodSandboxState_SANDBOX_READY
			}
			in.Sandbox = &runtimeapi.PodSandboxStatus{Id: st.SandboxID, State: state, CreatedAt: st.SandboxCreated.UnixNano()}
		}
		for _, c := range st.Containers {
			if c.Runtime != nil {
				in.Containers = append(in.Containers, c.Runtime)
				rec.rememberExit(c.Runtime)
			}
		}
	}
	if in.SandboxID == "" && rec.ownSandbox != "" {
		in.SandboxID = rec.ownSandbox // just created: the status has not caught up
	}
	in.LastExited = make(map[string]*runtimeapi.ContainerStatus, len(rec.lastExited))
	for k, v := range rec.lastExited {
		in.LastExited[k] = v
	}
	return in
}

func (rec *podRecord) rememberExit(cs *runtimeapi.ContainerStatus) {
	name := cs.GetMetadata().GetName()
	if n, ok := rec.seenAttempt[name]; !ok || cs.GetMetadata().GetAttempt() > n {
		if rec.seenAttempt == nil {
			rec.seenAttempt = map[string]uint32{}
		}
		rec.seenAttempt[name] = cs.GetMetadata().GetAttempt()
	}
	if cs.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
		return
	}
	if old := rec.lastExited[name]; old == nil || cs.GetCreatedAt() > old.GetCreatedAt() {
		if rec.lastExited == nil {
			rec.lastExited = map[string]*runtimeapi.ContainerStatus{}
		}
		rec.lastExited[name] = cs
	}
}

// runtimeName is the runtime's name, the scheme of container IDs
// ("containerd://..."), asked once; "cri" if the runtime does not say.
func (a *Agent) runtimeName() string {
	a.nameOnce.Do(func() {
		ctx, cancel := context.WithTimeout(a.ctx, versionTimeout)
		defer cancel()
		a.rtName = "cri"
		if v, err := a.runtime.version(ctx); err == nil && v.GetRuntimeName() != "" {
			a.rtName = v.GetRuntimeName()
		}
	})
	return a.rtName
}

// finalStatus is the terminal status of a deleted pod whose containers
// have stopped: made from the runtime's statuses of its newest sandbox's
// containers, read before they are removed. It marks the record final, so
// that nothing later replaces it.
func (a *Agent) finalStatus(ctx context.Context, uid types.UID, sandboxes []*runtimeapi.PodSandbox) (*corev1.Pod, bool) {
	var newest *runtimeapi.PodSandbox
	for _, sb := range sandboxes {
		if newest == nil || sb.CreatedAt > newest.CreatedAt {
			newest = sb
		}
	}
	var containers []*runtimeapi.ContainerStatus
	if newest != nil {
		// What cannot be read is reported as the kubelet reports a
		// container whose end it did not see (ContainerStatusUnknown).
		list, err := a.runtime.sandboxContainers(ctx, newest.Id, nil)
		if err != nil {
			a.log.Info("terminal status: list containers", zap.String("pod", string(uid)), zap.String("sandbox", newest.Id), zap.Error(err))
		}
		for _, c := range list {
			resp, err := a.runtime.containerStatus(ctx, c.Id)
			if err != nil || resp.GetStatus() == nil {
				a.log.Info("terminal status: container status", zap.String("pod", string(uid)), zap.String("container", c.Id), zap.Error(err))
				continue
			}
			containers = append(containers, resp.GetStatus())
		}
		sort.SliceStable(containers, func(i, j int) bool { return containers[i].CreatedAt > containers[j].CreatedAt })
	}
	runtimeName := a.runtimeName()
	var pod *corev1.Pod
	a.pods.with(uid, func(rec *podRecord) {
		if rec.pod == nil || rec.final {
			return
		}
		in := a.statusInput(rec, nil, runtimeName)
		in.Terminal, in.Containers, in.Waiting, in.PodWaiting = true, containers, nil, nil
		if newest != nil {
			in.SandboxID = newest.Id
			in.Sandbox = &runtimeapi.PodSandboxStatus{Id: newest.Id, State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}
		}
		status, err := podcri.PodStatus(in)
		if err != nil {
			return
		}
		pod = rec.pod.DeepCopy()
		pod.Status = status
		if d := rec.deleting; d != nil {
			pod.DeletionTimestamp = d.DeletionTimestamp.DeepCopy()
			pod.DeletionGracePeriodSeconds = d.DeletionGracePeriodSeconds
		}
		rec.published = status.DeepCopy()
		rec.final = true
	})
	return pod, pod != nil
}

// recordPull records, for every container of pod that uses image, why it
// waits on the image (errImagePull, ImagePullBackOff), or that it no
// longer does.
func (a *Agent) recordPull(pod *corev1.Pod, image string, ok bool, err error) {
	if !ok && err == nil {
		return // still pulling: ContainerCreating, the default
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if cs[i].Image != image {
				continue
			}
			if err != nil {
				w, now := pullWaiting(err), a.clock.Now()
				a.pods.update(pod.UID, func(rec *podRecord) {
					old, ok := rec.waiting[cs[i].Name]
					if ok && old.Reason == asyncpull.ReasonErrImagePull && w.Reason == asyncpull.ReasonImagePullBackOff &&
						now.Sub(rec.waitingAt[cs[i].Name]) < a.cfg.scaled(pullFailureShown) {
						return // let the failure be seen before the back-off
					}
					rec.setWaiting(cs[i].Name, w, now)
				})
			} else {
				a.pods.clearWaiting(pod.UID, cs[i].Name, asyncpull.ReasonErrImagePull, asyncpull.ReasonImagePullBackOff, reasonImageInspectError)
			}
		}
	}
}

// Healthy reports whether the node can run pods, as the kubelet's Ready
// condition does: nil while the runtime answers its Status check (every
// 30 s, every second while it fails) ready, and the PLEG relists (or
// streams events) within its health threshold. Otherwise it says why,
// naming the runtime when the runtime is the cause (not ready, a failed
// check, or a check not answered for 10 s), so a frozen runtime is
// reported as such within 40 s rather than as a PLEG failure minutes
// later. A front-end uses it for the node's readiness.
func (a *Agent) Healthy() error {
	if err := a.runtimeDown(); err != nil {
		return err
	}
	ok, err, _ := a.plegHealth()
	if rerr := a.runtimeRecovering(ok); rerr != nil {
		if err != nil {
			rerr = fmt.Errorf("%w: %v", rerr, err)
		}
		return rerr
	}
	if ok {
		return nil
	}
	if err == nil {
		err = errors.New("agent: PLEG is not healthy")
	}
	return err
}

// startTime is the pod's start as the kubelet keeps it: the one the pod
// already has (a pod from the API server that an earlier agent started),
// else, for a pod adopted from an earlier run, its sandbox's creation, else
// when this agent accepted it.
func startTime(rec *podRecord) time.Time {
	switch {
	case rec.pod.Status.StartTime != nil && !rec.pod.Status.StartTime.IsZero():
		return rec.pod.Status.StartTime.Time
	case rec.adopted && !rec.startedAt.IsZero():
		return rec.startedAt
	}
	return rec.created
}
