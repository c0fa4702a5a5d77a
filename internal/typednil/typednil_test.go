package typednil

import "testing"

type svc interface{ Do() }
type impl struct{}

func (*impl) Do() {}

func TestIs(t *testing.T) {
	var p *impl
	var s svc = p
	var m map[string]int
	var f func()
	for _, v := range []any{nil, p, s, m, f} {
		if !Is(v) {
			t.Errorf("Is(%T) = false", v)
		}
	}
	for _, v := range []any{&impl{}, svc(&impl{}), 0, "", struct{}{}, map[string]int{}} {
		if Is(v) {
			t.Errorf("Is(%T %v) = true", v, v)
		}
	}
}
