package manifest_test

import (
	"fmt"

	"github.com/syncpod/syncpod/examples/syncpod/manifest"
)

func ExampleParse() {
	pods, err := manifest.Parse("pods.yaml", []byte(`
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: app, image: nginx}]
---
metadata: {name: broken}
spec:
  containers: [{name: app, image: nginx}, {name: app, image: redis}]
`))
	for _, p := range pods {
		fmt.Println("pod", p.Namespace+"/"+p.Name)
	}
	fmt.Println(err)
	// Output:
	// pod default/web
	// pods.yaml (document 2) pod default/broken: spec.containers[1].name: duplicate container name "app" (also spec.containers[0])
}
