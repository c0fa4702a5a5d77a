package podplan_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	cs "github.com/syncpod/syncpod/concurrentstart"
	"github.com/syncpod/syncpod/concurrentstart/podplan"
	corev1 "k8s.io/api/core/v1"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criPod implements podplan.Funcs over a CRI runtime for one sandbox:
// Start is CreateContainer + StartContainer, WaitCompleted polls
// ContainerStatus until the container exited.
type criPod struct {
	rs     criapi.RuntimeService
	podID  string
	sb     *runtimeapi.PodSandboxConfig
	config func(c podplan.Container) *runtimeapi.ContainerConfig
	poll   time.Duration

	mu  sync.Mutex
	ids map[string]string
}

func (p *criPod) id(name string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ids[name]
}

func (p *criPod) funcs() podplan.Funcs {
	return podplan.Funcs{
		Start: func(ctx context.Context, c podplan.Container) error {
			id, err := p.rs.CreateContainer(ctx, p.podID, p.config(c), p.sb)
			if err != nil {
				return fmt.Errorf("create %s: %w", c.Name, err)
			}
			p.mu.Lock()
			if p.ids == nil {
				p.ids = map[string]string{}
			}
			p.ids[c.Name] = id
			p.mu.Unlock()
			if err := p.rs.StartContainer(ctx, id); err != nil {
				return fmt.Errorf("start %s: %w", c.Name, err)
			}
			return nil
		},
		WaitCompleted: func(ctx context.Context, c podplan.Container) error {
			id := p.id(c.Name)
			for {
				st, err := p.rs.ContainerStatus(ctx, id, false)
				if err != nil {
					return fmt.Errorf("status %s: %w", c.Name, err)
				}
				if s := st.GetStatus(); s.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
					if s.GetExitCode() != 0 {
						return fmt.Errorf("%s exited %d", c.Name, s.GetExitCode())
					}
					return nil
				}
				t := time.NewTimer(p.poll)
				select {
				case <-ctx.Done():
					t.Stop()
					return ctx.Err()
				case <-t.C:
				}
			}
		},
	}
}

// podStarter is how a pod's containers get started: the kubelet-like
// sequential loop or a concurrentstart plan. Benchmarks run both through it.
type podStarter interface {
	startPod(ctx context.Context, pod *corev1.Pod, f podplan.Funcs) error
}

// sequentialStarter does what the kubelet's SyncPod does across its syncs,
// without the relist waits between steps (so it flatters the kubelet): init
// containers one by one, waiting for each to exit (sidecars: to start), then
// the regular containers one after another.
type sequentialStarter struct{}

func (sequentialStarter) startPod(ctx context.Context, pod *corev1.Pod, f podplan.Funcs) error {
	for i, spec := range pod.Spec.InitContainers {
		sidecar := spec.RestartPolicy != nil && *spec.RestartPolicy == corev1.ContainerRestartPolicyAlways
		c := podplan.Container{Name: spec.Name, Role: podplan.Init, Index: i, Spec: &pod.Spec.InitContainers[i]}
		if sidecar {
			c.Role = podplan.Sidecar
		}
		if err := f.Start(ctx, c); err != nil {
			return err
		}
		if !sidecar {
			if err := f.WaitCompleted(ctx, c); err != nil {
				return err
			}
		}
	}
	var firstErr error
	for i := range pod.Spec.Containers {
		c := podplan.Container{Name: pod.Spec.Containers[i].Name, Role: podplan.Regular, Index: i, Spec: &pod.Spec.Containers[i]}
		if err := f.Start(ctx, c); err != nil && firstErr == nil {
			firstErr = err // the kubelet records the error and goes on
		}
	}
	return firstErr
}

// planStarter builds a podplan and runs it.
type planStarter struct{ maxParallel int }

func (s planStarter) startPod(ctx context.Context, pod *corev1.Pod, f podplan.Funcs) error {
	nodes, err := podplan.Build(pod, f)
	if err != nil {
		return err
	}
	plan, err := cs.New(nodes, cs.WithMaxParallel(s.maxParallel))
	if err != nil {
		return err
	}
	_, err = plan.Run(ctx)
	return err
}

var (
	_ podStarter = sequentialStarter{}
	_ podStarter = planStarter{}
)
