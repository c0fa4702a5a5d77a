package statecache

import "errors"

var (
	// ErrNilContext is returned (wrapped) when a nil context is passed to a
	// blocking call. A nil context cannot be cancelled, so accepting it would
	// allow a call that can never be abandoned.
	ErrNilContext = errors.New("statecache: nil context")

	// ErrClosed is returned (wrapped) by Memo.Get after Memo.Close.
	ErrClosed = errors.New("statecache: closed")

	// ErrInvalidOption is returned (wrapped) by NewMemo for a nil loader or
	// an option value out of range.
	ErrInvalidOption = errors.New("statecache: invalid option")

	// ErrLoaderPanic is returned (wrapped) by Memo.Get when the loader
	// panicked. The panic is recovered so that one bad lookup cannot crash
	// the process from the loader's goroutine.
	ErrLoaderPanic = errors.New("statecache: loader panicked")
)
