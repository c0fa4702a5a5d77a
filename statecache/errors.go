package statecache

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned (wrapped) by Memo.Get after Memo.Close.
	ErrClosed = errors.New("statecache: closed")
	// ErrOverflow is a Subscription's Err when its reader fell behind its
	// buffer: changes were lost.
	ErrOverflow = errors.New("statecache: subscriber fell behind, changes lost")
)

// ConfigError is a constructor parameter or option that cannot be used.
type ConfigError struct {
	Option string // e.g. "WithTTL", or "load" for NewMemo's loader
	Reason string
}

func (e *ConfigError) Error() string { return fmt.Sprintf("statecache: %s: %s", e.Option, e.Reason) }

// ArgError is a bad argument to a method, such as a nil context.
type ArgError struct {
	Method string // e.g. "Memo.Get"
	Arg    string // e.g. "ctx"
	Reason string
}

func (e *ArgError) Error() string {
	return fmt.Sprintf("statecache: %s: %s %s", e.Method, e.Arg, e.Reason)
}
