// Package manifest is the syncpod command's pod source: a directory of
// pod manifests (YAML or JSON, one pod, several documents or a v1 List per
// file) turned into agent.PodUpdate values, like the kubelet's static pod
// source.
//
//	src := manifest.NewDir("/etc/pods", a.Apply)
//	go src.Run(ctx) // adding, changing or deleting a file adds, updates or deletes its pods
//
// A bad document gives an *Error naming file, document, pod and field, and
// never stops the other pods. Pods without a UID get agent.StaticPodUID
// from the agent, so an edited manifest updates its pod.
package manifest
