// Package typednil tells whether an interface value holds nothing usable: nil
// itself or a nil pointer, map, slice, func or channel behind a non-nil
// interface (what `c, err := criclient.Dial(...)` hands on error). The
// constructors of every syncpod package refuse such values with a
// *ConfigError instead of panicking later in a background goroutine.
package typednil

import "reflect"

// Is reports whether v is nil or an interface holding a nil pointer, map,
// slice, func, channel or interface.
func Is(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}
