package statecache

// Option configures a Cache.
type Option interface {
	apply(*options)
}

type options struct {
	sizeHint int
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithSizeHint presizes the cache for about n keys (for example the expected
// number of pods on the node), avoiding growth while it fills. n <= 0 keeps
// the default.
func WithSizeHint(n int) Option {
	return optionFunc(func(o *options) { o.sizeHint = n })
}
