package backoff

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestKeyedDoublesCapsAndForgets(t *testing.T) {
	p := Policy{Initial: 10 * time.Second, Max: 40 * time.Second}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	b := NewKeyed[string](p)
	now := time.Unix(1000, 0)
	var got []time.Duration
	for range 4 {
		got = append(got, b.Fail("a", now))
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 40 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delays %v, want %v", got, want)
		}
	}
	if !b.Blocked("a", now.Add(39*time.Second)) || b.Blocked("a", now.Add(40*time.Second)) {
		t.Fatal("Blocked disagrees with the last delay")
	}
	if b.Blocked("b", now) {
		t.Fatal("a key that never failed is blocked")
	}
	// More than 2*Max later a failure starts again from Initial.
	if d := b.Fail("a", now.Add(81*time.Second)); d != 10*time.Second {
		t.Fatalf("after 2*Max quiet: %v, want 10s", d)
	}
	b.Fail("b", now)
	b.Forget(now.Add(81 * time.Second))
	if _, ok := b.Until("b"); ok || b.Len() != 1 {
		t.Fatalf("Forget kept a stale key: len %d", b.Len())
	}
	b.Reset("a")
	if b.Len() != 0 {
		t.Fatal("Reset kept the key")
	}
}

func TestValidate(t *testing.T) {
	for _, p := range []Policy{{}, {Initial: -1, Max: time.Second}, {Initial: 2 * time.Second, Max: time.Second}} {
		if p.Validate() == nil {
			t.Errorf("%+v accepted", p)
		}
	}
}

func TestSequenceJitterStaysInBounds(t *testing.T) {
	s := Sequence{Policy: Policy{Initial: 100 * time.Millisecond, Max: time.Second}, Jitter: 0.2, Rand: rand.New(rand.NewPCG(1, 2))}
	base := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, b := range base {
		b *= time.Millisecond
		d := s.Next()
		if d < b*8/10 || d > b*12/10 {
			t.Fatalf("step %d: %v outside %v±20%%", i, d, b)
		}
	}
	s.Reset()
	if d := s.Next(); d > 120*time.Millisecond {
		t.Fatalf("after Reset: %v", d)
	}
}

func TestKeyedDelayAndDrop(t *testing.T) {
	b := NewKeyed[string](Policy{Initial: time.Second, Max: 4 * time.Second})
	now := time.Unix(100, 0)
	b.Fail("pod1/a", now)
	b.Fail("pod1/a", now)
	b.Fail("pod2/a", now)
	if d, ok := b.Delay("pod1/a"); !ok || d != 2*time.Second {
		t.Fatalf("Delay = %v, %v; want 2s", d, ok)
	}
	if _, ok := b.Delay("none"); ok {
		t.Fatal("Delay of an unknown key")
	}
	b.Drop(func(k string) bool { return k[:4] == "pod1" })
	if b.Len() != 1 {
		t.Fatalf("Len after Drop = %d, want 1", b.Len())
	}
}
