package podcri

import (
	"encoding/json"
	"fmt"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
)

// ContainerHash is a stable hash of c's spec: 16 hex digits of FNV-64a
// over its JSON encoding. Two specs that differ in any field hash apart, so
// a running container whose hash annotation differs from its spec's hash
// is out of date. A nil c hashes as JSON null.
func ContainerHash(c *corev1.Container) string {
	b, _ := json.Marshal(c) // a corev1.Container always marshals
	h := fnv.New64a()
	_, _ = h.Write(b)
	return fmt.Sprintf("%016x", h.Sum64())
}
