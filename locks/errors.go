package locks

import (
	"errors"
	"fmt"
)

// ErrNotLocked is returned (wrapped) by KeyedMutex.Unlock for a key that is
// not locked. sync.Mutex makes this a fatal error; a key usually comes from
// outside (a pod UID), so here it is an error the caller can log.
var ErrNotLocked = errors.New("locks: key not locked")

// ArgError is a bad argument to a method, such as a nil context.
type ArgError struct {
	Method string // e.g. "KeyedMutex.Lock"
	Arg    string // e.g. "ctx"
	Reason string
}

func (e *ArgError) Error() string {
	return fmt.Sprintf("locks: %s: %s %s", e.Method, e.Arg, e.Reason)
}
