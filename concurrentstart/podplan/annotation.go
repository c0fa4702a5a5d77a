package podplan

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/syncpod/syncpod/concurrentstart"
)

// AnnotationStartAfter is the pod annotation that orders regular containers
// among themselves. Its value is a JSON object mapping a regular container's
// name to the regular containers it starts after:
//
//	concurrentstart.syncpod.io/start-after: '{"app": ["proxy", "migrate:started"]}'
//
// Each entry is a container name, optionally followed by ":started" or
// ":ready". "name:started" waits until the container has been started;
// "name" and "name:ready" wait until it has also passed its startup check
// (Funcs.WaitStartup), which is the same as started when it has none. Only
// regular containers may appear, as keys or entries: init containers and
// sidecars already run before every regular container. One annotation for
// the whole pod, rather than one per container, keeps the key a valid
// annotation name whatever the container names are.
const AnnotationStartAfter = "concurrentstart.syncpod.io/start-after"

// parseStartAfter parses the annotation into container -> dependencies, in
// the order written for each container. roles maps every container name of
// the pod to its role.
func parseStartAfter(value string, roles map[string]Role) (map[string][]concurrentstart.Dependency, error) {
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	var raw map[string][]string
	if err := json.Unmarshal([]byte(value), &raw); err != nil {
		return nil, &AnnotationError{Reason: "want a JSON object of string lists, e.g. {\"app\": [\"proxy\"]}: " + err.Error()}
	}
	out := make(map[string][]concurrentstart.Dependency, len(raw))
	for _, name := range sortedKeys(raw) {
		switch role, ok := roles[name]; {
		case !ok:
			return nil, &UnknownContainerError{Name: name, Source: "annotation"}
		case role != Regular:
			return nil, &OrderingError{Container: name, Reason: "only regular containers can be ordered; " + role.String() + " containers already start first"}
		}
		for _, entry := range raw[name] {
			dep, cond, found := strings.Cut(strings.TrimSpace(entry), ":")
			c := concurrentstart.Ready
			if found {
				switch cond {
				case "started":
					c = concurrentstart.Started
				case "ready":
				default:
					return nil, &AnnotationError{Container: name, Entry: entry, Reason: "condition must be \"started\" or \"ready\""}
				}
			}
			if dep == "" {
				return nil, &AnnotationError{Container: name, Entry: entry, Reason: "empty container name"}
			}
			switch role, ok := roles[dep]; {
			case !ok:
				return nil, &UnknownContainerError{Name: dep, Source: "annotation", Container: name}
			case role != Regular:
				return nil, &OrderingError{Container: name, Dependency: dep, Reason: "only regular containers can be ordered; " + role.String() + " containers already start first"}
			}
			out[name] = append(out[name], concurrentstart.Dependency{Node: dep, Condition: c})
		}
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	// Sorted so that the first error reported does not depend on map order.
	return slices.Sorted(maps.Keys(m))
}
