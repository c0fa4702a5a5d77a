package locks

import "errors"

var (
	// ErrNotLocked is returned (wrapped) by KeyedMutex.Unlock for a key that
	// is not locked. sync.Mutex makes this a fatal error; a key usually comes
	// from outside (a pod UID), so here it is an error the caller can log.
	ErrNotLocked = errors.New("locks: key not locked")

	// ErrNilContext is returned (wrapped) by KeyedMutex.Lock for a nil
	// context, which could never be cancelled.
	ErrNilContext = errors.New("locks: nil context")
)
