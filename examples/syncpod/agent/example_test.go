package agent_test

import (
	"context"
	"fmt"

	"github.com/syncpod/syncpod/criclient"
	"github.com/syncpod/syncpod/criclient/crisim"
	"github.com/syncpod/syncpod/examples/syncpod/agent"
	"github.com/syncpod/syncpod/examples/syncpod/manifest"
)

func ExampleAgent() {
	srv, _ := crisim.Start(crisim.WithImage("nginx", 1<<20))
	defer srv.Close()
	c, _ := criclient.Dial(context.Background(), srv.Endpoint())
	defer c.Close()

	running := make(chan struct{}, 1)
	a, _ := agent.New(c.CRI(), c.CRI(), agent.WithEventHook(func(e agent.Event) {
		if e.Type == agent.EventRunning {
			running <- struct{}{}
		}
	}))
	_ = a.Start()
	pods, _ := manifest.Parse("web.yaml", []byte(`
metadata: {name: web}
spec: {containers: [{name: app, image: nginx}]}`))
	a.Apply(agent.PodUpdate{Op: agent.OpAdd, Pod: pods[0]})
	<-running
	p := a.Snapshot().Pods[0]
	fmt.Println(p.Name, p.State, p.Restarts)
	a.Stop()
	_ = a.Cleanup(context.Background())
	// Output:
	// web Running 0
}
