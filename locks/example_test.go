package locks_test

import (
	"context"
	"fmt"
	"maps"

	"github.com/syncpod/syncpod/locks"
)

func ExampleKeyedMutex() {
	km := locks.NewKeyedMutex[string]()
	ctx := context.Background()

	if err := km.Lock(ctx, "pod-a"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("pod-b free:", km.TryLock("pod-b")) // exact keys: never blocked by pod-a
	fmt.Println("pod-a free:", km.TryLock("pod-a"))
	_ = km.Unlock("pod-b")
	_ = km.Unlock("pod-a")

	fmt.Println("entries:", km.Len())
	fmt.Println(km.Unlock("pod-a"))
	// Output:
	// pod-b free: true
	// pod-a free: false
	// entries: 0
	// locks: KeyedMutex.Unlock(pod-a): locks: key not locked
}

func ExampleSnapshot() {
	pods := locks.NewSnapshot(map[string]string{"pod-a": "Running"})

	// Writers copy, change the copy, and publish it.
	pods.Update(func(old map[string]string) map[string]string {
		next := maps.Clone(old)
		next["pod-b"] = "Pending"
		return next
	})

	// Readers get a consistent map without locking.
	cur := pods.Load()
	fmt.Println(len(cur), cur["pod-b"])
	// Output:
	// 2 Pending
}

func ExampleStriped() {
	s := locks.NewStriped[string](64)
	s.Lock("pod-a")
	defer s.Unlock("pod-a")
	fmt.Println(s.Stripes())
	// Output:
	// 64
}
