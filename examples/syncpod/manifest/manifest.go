package manifest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// ErrInvalid is matched (errors.Is) by every *Error.
var ErrInvalid = errors.New("invalid pod manifest")

// Error tells which file, which document in it and which pod
// failed to parse or validate. Other documents and files are unaffected.
type Error struct {
	File  string // path of the manifest file
	Doc   int    // 0-based document index inside the file, -1 for the whole file
	Pod   string // namespace/name when known
	Field string // offending field path when known, e.g. "spec.containers[1].image"
	Err   error  // what is wrong
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Doc >= 0 {
		fmt.Fprintf(&b, " (document %d)", e.Doc+1)
	}
	if e.Pod != "" {
		fmt.Fprintf(&b, " pod %s", e.Pod)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": %s", e.Field)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// maxManifestSize bounds a manifest file, so a stray huge file is an error
// rather than a memory spike.
const maxManifestSize = 4 << 20

// LoadFile reads one manifest file: YAML or JSON, one pod, several
// YAML documents separated by "---", or a v1 List of pods. It returns the
// valid pods and one error per invalid document (joined with errors.Join);
// a bad document never hides the good ones.
func LoadFile(path string) ([]*corev1.Pod, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Doc: -1, Err: err}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxManifestSize+1))
	if err != nil {
		return nil, &Error{File: path, Doc: -1, Err: err}
	}
	if len(data) > maxManifestSize {
		return nil, &Error{File: path, Doc: -1, Err: fmt.Errorf("file larger than %d bytes", maxManifestSize)}
	}
	return Parse(path, data)
}

// Parse parses manifest bytes; name is only used in errors.
func Parse(name string, data []byte) ([]*corev1.Pod, error) {
	var pods []*corev1.Pod
	var errs []error
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for doc := 0; ; doc++ {
		raw, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			errs = append(errs, &Error{File: name, Doc: doc, Err: fmt.Errorf("read: %w", err)})
			break
		}
		if len(bytes.TrimSpace(stripComments(raw))) == 0 {
			doc-- // an empty document (leading "---") is not counted
			continue
		}
		got, err := parseDocument(name, doc, raw)
		pods = append(pods, got...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return pods, errors.Join(errs...)
}

func stripComments(b []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, line...)
		}
	}
	return out
}

type typeMeta struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"` // decoded as pods once the kind is known
}

func parseDocument(file string, doc int, raw []byte) ([]*corev1.Pod, error) {
	var tm typeMeta
	if err := yaml.Unmarshal(raw, &tm); err != nil {
		return nil, &Error{File: file, Doc: doc, Err: fmt.Errorf("parse: %w", err)}
	}
	switch tm.Kind {
	case "List", "PodList":
		var pods []*corev1.Pod
		var errs []error
		for i, item := range tm.Items {
			p, err := decodePod(file, doc, item)
			if err != nil {
				var me *Error
				if errors.As(err, &me) {
					me.Field = strings.TrimPrefix(fmt.Sprintf("items[%d].%s", i, me.Field), ".")
				}
				errs = append(errs, err)
				continue
			}
			pods = append(pods, p)
		}
		return pods, errors.Join(errs...)
	case "", "Pod":
		p, err := decodePod(file, doc, raw)
		if err != nil {
			return nil, err
		}
		return []*corev1.Pod{p}, nil
	default:
		return nil, &Error{File: file, Doc: doc, Field: "kind", Err: fmt.Errorf("kind %q is not Pod or List", tm.Kind)}
	}
}

func decodePod(file string, doc int, raw []byte) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	if err := yaml.UnmarshalStrict(raw, pod); err != nil {
		return nil, &Error{File: file, Doc: doc, Err: fmt.Errorf("parse pod: %w", err)}
	}
	if pod.Namespace == "" {
		pod.Namespace = "default"
	}
	if pod.Spec.RestartPolicy == "" {
		pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if field, err := Validate(pod); err != nil {
		return nil, &Error{File: file, Doc: doc, Pod: podKey(pod), Field: field, Err: err}
	}
	return pod, nil
}

func podKey(p *corev1.Pod) string {
	if p.Name == "" {
		return ""
	}
	return p.Namespace + "/" + p.Name
}

// Validate checks what the agent relies on: a DNS-1123 name and
// namespace, at least one container, unique DNS-1123 container names across
// init and regular containers, a parseable image reference for each, and a
// known restart policy. It returns the offending field path and the reason.
func Validate(p *corev1.Pod) (field string, err error) {
	if p.Name == "" {
		return "metadata.name", errors.New("name is required")
	}
	if msgs := validation.IsDNS1123Subdomain(p.Name); len(msgs) > 0 {
		return "metadata.name", fmt.Errorf("%q: %s", p.Name, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Label(p.Namespace); len(msgs) > 0 {
		return "metadata.namespace", fmt.Errorf("%q: %s", p.Namespace, strings.Join(msgs, "; "))
	}
	switch p.Spec.RestartPolicy {
	case corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
	default:
		return "spec.restartPolicy", fmt.Errorf("unknown restart policy %q", p.Spec.RestartPolicy)
	}
	if len(p.Spec.Containers) == 0 {
		return "spec.containers", errors.New("at least one container is required")
	}
	seen := map[string]string{}
	check := func(list string, i int, c *corev1.Container) (string, error) {
		f := fmt.Sprintf("spec.%s[%d]", list, i)
		if c.Name == "" {
			return f + ".name", errors.New("container name is required")
		}
		if msgs := validation.IsDNS1123Label(c.Name); len(msgs) > 0 {
			return f + ".name", fmt.Errorf("%q: %s", c.Name, strings.Join(msgs, "; "))
		}
		if prev, dup := seen[c.Name]; dup {
			return f + ".name", fmt.Errorf("duplicate container name %q (also %s)", c.Name, prev)
		}
		seen[c.Name] = f
		if c.Image == "" {
			return f + ".image", errors.New("image is required")
		}
		if _, err := reference.ParseNormalizedNamed(c.Image); err != nil {
			return f + ".image", fmt.Errorf("bad image reference %q: %w", c.Image, err)
		}
		if list == "initContainers" && c.RestartPolicy != nil && *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			return f + ".restartPolicy", fmt.Errorf("init container restartPolicy may only be Always (a sidecar), got %q", *c.RestartPolicy)
		}
		return "", nil
	}
	for i := range p.Spec.InitContainers {
		if f, err := check("initContainers", i, &p.Spec.InitContainers[i]); err != nil {
			return f, err
		}
	}
	for i := range p.Spec.Containers {
		if f, err := check("containers", i, &p.Spec.Containers[i]); err != nil {
			return f, err
		}
	}
	return "", nil
}
