package criclient

import (
	"maps"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Snapshot answers are deep copies, so callers may modify what they get.
// proto.Clone is reflection-driven and was most of the CPU of a List served
// from a snapshot; these copy the fields directly. clone_internal_test.go
// fills every field through protoreflect, so a field added to cri-api fails
// the test instead of being dropped. Messages carrying unknown fields (a
// newer runtime) fall back to proto.Clone.

func cloneContainer(c *runtimeapi.Container) *runtimeapi.Container {
	if c == nil {
		return nil
	}
	if len(c.ProtoReflect().GetUnknown()) > 0 || hasUnknown(c.Metadata) || hasUnknown(c.Image) {
		return proto.Clone(c).(*runtimeapi.Container)
	}
	out := &runtimeapi.Container{
		Id:           c.Id,
		PodSandboxId: c.PodSandboxId,
		ImageRef:     c.ImageRef,
		State:        c.State,
		CreatedAt:    c.CreatedAt,
		Labels:       maps.Clone(c.Labels),
		Annotations:  maps.Clone(c.Annotations),
		ImageId:      c.ImageId,
	}
	if m := c.Metadata; m != nil {
		out.Metadata = &runtimeapi.ContainerMetadata{Name: m.Name, Attempt: m.Attempt}
	}
	if i := c.Image; i != nil {
		out.Image = &runtimeapi.ImageSpec{
			Image:              i.Image,
			Annotations:        maps.Clone(i.Annotations),
			UserSpecifiedImage: i.UserSpecifiedImage,
			RuntimeHandler:     i.RuntimeHandler,
			ImageRef:           i.ImageRef,
		}
	}
	return out
}

func clonePodSandbox(s *runtimeapi.PodSandbox) *runtimeapi.PodSandbox {
	if s == nil {
		return nil
	}
	if len(s.ProtoReflect().GetUnknown()) > 0 || hasUnknown(s.Metadata) {
		return proto.Clone(s).(*runtimeapi.PodSandbox)
	}
	out := &runtimeapi.PodSandbox{
		Id:             s.Id,
		State:          s.State,
		CreatedAt:      s.CreatedAt,
		Labels:         maps.Clone(s.Labels),
		Annotations:    maps.Clone(s.Annotations),
		RuntimeHandler: s.RuntimeHandler,
	}
	if m := s.Metadata; m != nil {
		out.Metadata = &runtimeapi.PodSandboxMetadata{Name: m.Name, Uid: m.Uid, Namespace: m.Namespace, Attempt: m.Attempt}
	}
	return out
}

func hasUnknown[M interface {
	comparable
	proto.Message
}](m M) bool {
	var zero M
	return m != zero && len(m.ProtoReflect().GetUnknown()) > 0
}
