package statecache

// Option configures a Cache.
type Option func(*config)

type config struct {
	sizeHint int
}

// WithSizeHint presizes the cache for about n keys (for example the expected
// number of pods on the node), avoiding growth while it fills. n <= 0 means
// no hint: a hint cannot be wrong, so it is never refused.
func WithSizeHint(n int) Option {
	return func(o *config) { o.sizeHint = n }
}
