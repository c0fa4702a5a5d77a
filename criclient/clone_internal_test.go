package criclient

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fill sets every field of m (recursively) to a distinct non-zero value.
func fill(m protoreflect.Message, seed *int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		*seed++
		n := *seed
		switch {
		case f.IsMap():
			mp := m.Mutable(f).Map()
			mp.Set(protoreflect.ValueOfString(fmt.Sprint("k", n)).MapKey(), protoreflect.ValueOfString(fmt.Sprint("v", n)))
		case f.IsList():
			t := fmt.Sprintf("list field %s", f.FullName())
			panic(t + ": extend fill")
		case f.Kind() == protoreflect.MessageKind:
			fill(m.Mutable(f).Message(), seed)
		case f.Kind() == protoreflect.StringKind:
			m.Set(f, protoreflect.ValueOfString(fmt.Sprint("s", n)))
		case f.Kind() == protoreflect.EnumKind:
			m.Set(f, protoreflect.ValueOfEnum(protoreflect.EnumNumber(1)))
		case f.Kind() == protoreflect.Int64Kind:
			m.Set(f, protoreflect.ValueOfInt64(int64(n)))
		case f.Kind() == protoreflect.Uint32Kind:
			m.Set(f, protoreflect.ValueOfUint32(uint32(n)))
		default:
			panic(fmt.Sprintf("field %s of kind %v: extend fill", f.FullName(), f.Kind()))
		}
	}
}

func TestCloneCopiesEveryField(t *testing.T) {
	seed := 0
	c := &runtimeapi.Container{}
	fill(c.ProtoReflect(), &seed)
	got := cloneContainer(c)
	if !proto.Equal(got, c) {
		t.Fatalf("cloneContainer dropped a field:\n got %v\nwant %v", got, c)
	}
	got.Labels["x"] = "y"
	got.Image.Annotations["x"] = "y"
	got.Metadata.Name = "changed"
	if _, ok := c.Labels["x"]; ok || c.Image.Annotations["x"] == "y" || c.Metadata.Name == "changed" {
		t.Fatal("cloneContainer shares state with its source")
	}

	s := &runtimeapi.PodSandbox{}
	fill(s.ProtoReflect(), &seed)
	gs := clonePodSandbox(s)
	if !proto.Equal(gs, s) {
		t.Fatalf("clonePodSandbox dropped a field:\n got %v\nwant %v", gs, s)
	}
	gs.Metadata.Uid = "changed"
	if s.Metadata.Uid == "changed" {
		t.Fatal("clonePodSandbox shares state with its source")
	}
	if cloneContainer(nil) != nil || clonePodSandbox(nil) != nil {
		t.Fatal("clone of nil is not nil")
	}
}

func TestCloneKeepsUnknownFields(t *testing.T) {
	c := &runtimeapi.Container{Id: "a", Metadata: &runtimeapi.ContainerMetadata{Name: "n"}}
	// Field 99, varint 1: what a newer runtime could send.
	c.Metadata.ProtoReflect().SetUnknown(protoreflect.RawFields{0x98, 0x06, 0x01})
	if got := cloneContainer(c); !proto.Equal(got, c) || len(got.Metadata.ProtoReflect().GetUnknown()) == 0 {
		t.Fatal("unknown fields were dropped")
	}
}

func BenchmarkCloneContainer(b *testing.B) {
	c := &runtimeapi.Container{
		Id: "0123456789abcdef", PodSandboxId: "fedcba9876543210",
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image:    &runtimeapi.ImageSpec{Image: "docker.io/library/busybox:1.36"},
		Labels:   map[string]string{"io.kubernetes.pod.name": "p", "io.kubernetes.pod.namespace": "ns", "io.kubernetes.pod.uid": "u", "io.kubernetes.container.name": "app"},
	}
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			_ = cloneContainer(c)
		}
	})
	b.Run("proto.Clone", func(b *testing.B) {
		for b.Loop() {
			_ = proto.Clone(c)
		}
	})
}
