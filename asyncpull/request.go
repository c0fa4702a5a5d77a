package asyncpull

import (
	"encoding/json"
	"fmt"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PullPolicy says when an image is pulled. Values mirror corev1.PullPolicy.
type PullPolicy string

const (
	// PullIfNotPresent pulls only if the image is absent (the runtime is asked first). It is
	// the default when Request.PullPolicy is empty.
	PullIfNotPresent PullPolicy = "IfNotPresent"
	// PullAlways pulls every time (one pull serves every request waiting when it completes).
	PullAlways PullPolicy = "Always"
	// PullNever never pulls: absent images fail with ReasonErrImageNeverPull.
	PullNever PullPolicy = "Never"
)

// Kubelet reason strings, as shown in a container's Waiting state.
const (
	// ReasonErrImagePull: the pull failed.
	ReasonErrImagePull = "ErrImagePull"
	// ReasonImagePullBackOff: a previous pull failed and the back-off has not expired.
	ReasonImagePullBackOff = "ImagePullBackOff"
	// ReasonErrImageNeverPull: the image is absent and the policy is Never.
	ReasonErrImageNeverPull = "ErrImageNeverPull"
	// ReasonInvalidImageName: the reference does not parse.
	ReasonInvalidImageName = "InvalidImageName"
	// ReasonImageInspectError: ImageStatus failed.
	ReasonImageInspectError = "ImageInspectError"
	// ReasonRegistryUnavailable: the pull failed because the registry could not be reached.
	ReasonRegistryUnavailable = "RegistryUnavailable"
)

// Request asks for one image on behalf of one pod.
type Request struct {
	// Image is the reference as written in the pod spec ("nginx", "ghcr.io/x/y:1", "a@sha256:...").
	Image string
	// PullPolicy defaults to PullIfNotPresent.
	PullPolicy PullPolicy
	// Auth is passed to PullImage. It is never logged, printed or used as a key: the scheduler
	// keys on a keyed hash of it.
	Auth *runtimeapi.AuthConfig
	// PodSandboxConfig is passed to PullImage (runtimes use it for per-pod pull settings).
	PodSandboxConfig *runtimeapi.PodSandboxConfig
	// PodUID identifies the waiter: completions are delivered per pod, Cancel(PodUID) drops
	// its interest. Empty means an anonymous waiter that only Wait can observe.
	PodUID types.UID
	// Priority orders queued pulls under PriorityPolicy (higher first). A pull shared by several
	// pods takes the highest priority of its waiters.
	Priority int32
	// SizeHint is the expected image size in bytes, 0 if unknown. Used by SmallestFirstPolicy
	// and WithLargeImageLimit.
	SizeHint int64
}

// Request prints without credentials through every path a caller may use:
// %v/%s, %#v, encoding/json and zap. Each check below keeps its method from
// silently dropping out (a changed receiver or signature would make that path
// fall back to printing the Auth field).
var (
	_ fmt.Stringer            = Request{}
	_ fmt.GoStringer          = Request{}
	_ json.Marshaler          = Request{}
	_ zapcore.ObjectMarshaler = Request{}
)

// String implements fmt.Stringer without credentials.
func (r Request) String() string {
	return fmt.Sprintf("Request{Image:%q PullPolicy:%s Auth:%s PodUID:%s Priority:%d SizeHint:%d}",
		r.Image, r.PullPolicy, redactedAuth(r.Auth), r.PodUID, r.Priority, r.SizeHint)
}

// GoString implements fmt.GoStringer without credentials, so %#v is safe too.
func (r Request) GoString() string { return r.String() }

// MarshalJSON encodes the request without credentials.
func (r Request) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{
		"image": r.Image, "pullPolicy": r.PullPolicy, "auth": redactedAuth(r.Auth),
		"podUID": r.PodUID, "priority": r.Priority, "sizeHint": r.SizeHint,
	})
}

// MarshalLogObject implements zapcore.ObjectMarshaler without credentials, so zap.Any is safe.
func (r Request) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("image", r.Image)
	enc.AddString("pullPolicy", string(r.PullPolicy))
	enc.AddString("auth", redactedAuth(r.Auth))
	enc.AddString("podUID", string(r.PodUID))
	enc.AddInt32("priority", r.Priority)
	enc.AddInt64("sizeHint", r.SizeHint)
	return nil
}

func redactedAuth(a *runtimeapi.AuthConfig) string {
	if isAnonymous(a) {
		return "none"
	}
	return "REDACTED"
}

// State is where a request stands.
type State int

const (
	// StateQueued: a pull (or the presence check before it) is waiting to run.
	StateQueued State = iota + 1
	// StatePulling: PullImage is in flight.
	StatePulling
	// StatePresent: the image is on the node; Result.ImageRef names it.
	StatePresent
	// StateBackOff: an earlier pull failed; no pull before Result.BackOffUntil. The pod is
	// woken then (WithNotify, Subscribe) and its next Ensure starts the retry.
	StateBackOff
	// StateFailed: terminal for this attempt; Result.Err and Result.Reason say why.
	StateFailed
)

// String returns the state's name.
func (s State) String() string {
	switch s {
	case StateQueued:
		return "Queued"
	case StatePulling:
		return "Pulling"
	case StatePresent:
		return "Present"
	case StateBackOff:
		return "BackOff"
	case StateFailed:
		return "Failed"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Done reports whether the state is final for this attempt (Present, BackOff or Failed).
func (s State) Done() bool { return s == StatePresent || s == StateBackOff || s == StateFailed }

// Result is the answer to Ensure and Wait.
type Result struct {
	// State is where the request stands.
	State State
	// Image is the normalised reference ("docker.io/library/nginx:latest"), empty if invalid.
	Image string
	// ImageRef is the runtime's image ID when State is StatePresent.
	ImageRef string
	// Reason is a kubelet reason string (ReasonErrImagePull ...) when State is StateBackOff
	// or StateFailed. It is empty when the call itself was wrong (a nil ctx, a Scheduler not
	// made by New): then Err is an *ArgError and nothing was pulled.
	Reason string
	// Err is the error when State is StateBackOff (the last pull error) or StateFailed.
	Err error
	// BackOffUntil is when the next pull may start, when State is StateBackOff (scheduler
	// clock). The requesting pod is woken at that time, like for a completed pull, unless it
	// was cancelled (its context, Cancel) or the scheduler closed; no caller timer is needed.
	BackOffUntil time.Time
}
