package statecache

// Option configures a Cache.
type Option func(*config)

type config struct {
	sizeHint int
}

// maxSizeHint caps WithSizeHint: presizing for more keys than a node holds
// would only spend memory, and a huge hint could not be allocated at all.
const maxSizeHint = 1 << 16

// WithSizeHint presizes the cache for about n keys (for example the expected
// number of pods on the node), avoiding growth while it fills. n <= 0 means
// no hint, and a hint above 65536 keys counts as 65536: a hint cannot be
// wrong, so it is never refused.
func WithSizeHint(n int) Option {
	return func(o *config) { o.sizeHint = n }
}
