package shim

import "github.com/syncpod/syncpod/criclient"

// Class is an admission class of CRI calls (criclient's): each class has its
// own token bucket and in-flight bound, so reads never queue behind
// mutations. criclient.MethodClass says which method is in which class:
// reads are Version, Status, the *Status and List* calls (when not answered
// from the view), stats, ExecSync, Exec, Attach, PortForward, ImageStatus,
// ListImages and ImageFsInfo; mutations are the Run/Stop/Remove/Create/
// Start/Update/Checkpoint/Restore calls, ReopenContainerLog,
// UpdateRuntimeConfig and RemoveImage; PullImage is its own class.
type Class = criclient.Class

// The admission classes.
const (
	ClassRead      = criclient.ClassRead
	ClassMutating  = criclient.ClassMutating
	ClassImagePull = criclient.ClassImagePull
	numClasses     = 3
)

// Limits is the admission control of one Class (criclient's): a token
// bucket and a FIFO in-flight bound. The zero value admits every call at
// once.
type Limits = criclient.Limits
