package podcri

import (
	"errors"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestVolumeFiles(t *testing.T) {
	mode := func(m int32) *int32 { return &m }
	field := func(path, fp string) corev1.DownwardAPIVolumeFile {
		return corev1.DownwardAPIVolumeFile{Path: path, FieldRef: &corev1.ObjectFieldSelector{FieldPath: fp}}
	}
	res := func(path, c, r, divisor string) corev1.DownwardAPIVolumeFile {
		f := corev1.DownwardAPIVolumeFile{Path: path, ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: c, Resource: r}}
		if divisor != "" {
			f.ResourceFieldRef.Divisor = resource.MustParse(divisor)
		}
		return f
	}
	downward := func(items ...corev1.DownwardAPIVolumeFile) corev1.VolumeSource {
		return corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: items}}
	}
	type file struct {
		path, data string
		mode       os.FileMode
	}
	cases := []struct {
		name   string // the kubelet behaviour the case follows
		src    corev1.VolumeSource
		want   []file
		errHas string // a *VolumeError whose message holds this
	}{
		{name: "name, namespace and uid are the values, files sorted by path, mode 0644 by default",
			src:  downward(field("uid", "metadata.uid"), field("name", "metadata.name"), field("ns", "metadata.namespace")),
			want: []file{{"name", "web", 0o644}, {"ns", "default", 0o644}, {"uid", "u1", 0o644}}},
		{name: `labels and annotations are key="value" lines sorted by key, values quoted, no final newline`,
			src: downward(field("labels", "metadata.labels"), field("annotations", "metadata.annotations")),
			want: []file{{"annotations", `a.b="two\nlines"` + "\n" + `note="x"`, 0o644},
				{"labels", `app="web"` + "\n" + `io.kubernetes.pod.name="spoof"`, 0o644}}},
		{name: "one label or annotation by subscript is its value",
			src:  downward(field("app", "metadata.labels['app']"), field("note", "metadata.annotations['note']")),
			want: []file{{"app", "web", 0o644}, {"note", "x", 0o644}}},
		{name: "a nested path is kept (the writer makes its directories)",
			src:  downward(field("meta/name", "metadata.name")),
			want: []file{{"meta/name", "web", 0o644}}},
		{name: "defaultMode, then the item's mode",
			src: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{DefaultMode: mode(0o400), Items: []corev1.DownwardAPIVolumeFile{
				field("a", "metadata.name"), {Path: "b", Mode: mode(0o640), FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
			want: []file{{"a", "web", 0o400}, {"b", "web", 0o640}}},
		{name: "resource fields of a named container over the divisor, rounded up",
			src:  downward(res("cpu", "app", "limits.cpu", "1m"), res("mem", "app", "requests.memory", "1Mi"), res("cores", "app", "limits.cpu", "")),
			want: []file{{"cores", "1", 0o644}, {"cpu", "500", 0o644}, {"mem", "64", 0o644}}},
		{name: "a resource field needs a containerName in a volume",
			src: downward(res("cpu", "", "limits.cpu", "")), errHas: "needs a containerName"},
		{name: "a resource field of an unknown container is refused",
			src: downward(res("cpu", "ghost", "limits.cpu", "")), errHas: `no container "ghost"`},
		{name: "a missing limit (the node's allocatable in the kubelet) is refused",
			src: downward(res("mem", "app", "limits.memory", "")), errHas: "sets no such value"},
		{name: "fields only env variables have are refused in a volume",
			src: downward(field("node", "spec.nodeName")), errHas: `fieldRef "spec.nodeName" is not supported`},
		{name: "an absolute item path is refused", src: downward(field("/etc/x", "metadata.name")), errHas: "must be relative"},
		{name: "an item path with .. is refused", src: downward(field("a/../../x", "metadata.name")), errHas: "must not contain '..'"},
		{name: "an item path starting with .. is refused (the writer's own names)", src: downward(field("..data", "metadata.name")), errHas: "must not start with '..'"},
		{name: "two items with one path are refused", src: downward(field("a", "metadata.name"), field("./a", "metadata.uid")), errHas: "duplicate path"},
		{name: "a projected volume of downwardAPI sources, with the projected defaultMode",
			src: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: mode(0o444), Sources: []corev1.VolumeProjection{
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{field("name", "metadata.name")}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{field("ns", "metadata.namespace")}}}}}},
			want: []file{{"name", "web", 0o444}, {"ns", "default", 0o444}}},
		{name: "a projected serviceAccountToken needs the API server",
			src: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}, errHas: "serviceAccountToken, which needs the API server"},
		{name: "a projected configMap needs the API server",
			src: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{}}}}}, errHas: "configMap, which needs the API server"},
		{name: "a projected secret needs the API server",
			src: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{}}}}}, errHas: "secret, which needs the API server"},
		{name: "an emptyDir has no files to write", src: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}, errHas: "not a downwardAPI or projected volume"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod()
			pod.Annotations["a.b"] = "two\nlines"
			pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: rl("cpu", "500m"), Requests: rl("memory", "64Mi")}
			got, err := VolumeFiles(pod, &corev1.Volume{Name: "info", VolumeSource: tc.src})
			if tc.errHas != "" {
				var ve *VolumeError
				if !errors.As(err, &ve) || ve.Volume != "info" || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err %v, want a *VolumeError containing %q", err, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("files %v, want %v", got, tc.want)
			}
			for i, f := range got {
				if w := tc.want[i]; f.Path != w.path || string(f.Data) != w.data || f.Mode != w.mode {
					t.Errorf("file %d = %s %q %o, want %s %q %o", i, f.Path, f.Data, f.Mode, w.path, w.data, w.mode)
				}
			}
		})
	}
}
