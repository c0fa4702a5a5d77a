package pleg

import (
	"errors"
	"testing"
)

func TestSubscribeBounded(t *testing.T) {
	f := newFixture(t)
	big, err := f.p.Subscribe(10)
	if err != nil {
		t.Fatal(err)
	}
	small, err := f.p.Subscribe(1)
	if err != nil {
		t.Fatal(err)
	}
	closed, err := f.p.Subscribe(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	f.setContainers(fc{"a", "c1", running}, fc{"a", "c2", running})
	f.relist()
	watched := drain(f.p)

	var got []Event
	for len(got) < len(watched) {
		got = append(got, <-big.Events())
	}
	if len(got) != 2 {
		t.Fatalf("big subscriber got %v, Watch %v", got, watched)
	}
	n := 0
	for range small.Events() {
		n++
	}
	if n != 1 || !errors.Is(small.Err(), ErrOverflow) {
		t.Errorf("small subscriber got %d events and %v, want 1 and ErrOverflow", n, small.Err())
	}
	if _, ok := <-closed.Events(); ok || closed.Err() != nil {
		t.Errorf("closed subscription: %v", closed.Err())
	}

	if err := f.p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-big.Events(); ok || !errors.Is(big.Err(), ErrClosed) {
		t.Errorf("after the PLEG's Close: %v", big.Err())
	}
	if _, err := f.p.Subscribe(1); !errors.Is(err, ErrClosed) {
		t.Errorf("Subscribe after Close: %v", err)
	}
}

func TestSubscribeNegativeBuffer(t *testing.T) {
	f := newFixture(t)
	var ae *ArgError
	if _, err := f.p.Subscribe(-1); !errors.As(err, &ae) || ae.Arg != "buffer" {
		t.Errorf("Subscribe(-1): %v", err)
	}
}
