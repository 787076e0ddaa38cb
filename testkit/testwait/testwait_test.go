package testwait

import (
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that records a failure instead of stopping.
type recorder struct {
	testing.TB
	failed atomic.Bool
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(string, ...any) {
	r.failed.Store(true)
	panic(r) // stop the helper as Fatalf's Goexit would
}

func run(f func(tb testing.TB)) (failed bool) {
	r := &recorder{}
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
		failed = r.failed.Load()
	}()
	f(r)
	return false
}

func TestEventually(t *testing.T) {
	start := time.Now()
	if run(func(tb testing.TB) {
		Eventually(tb, time.Second, "soon", func() bool { return time.Since(start) > 50*time.Millisecond })
	}) {
		t.Fatal("a condition that comes true within the deadline failed")
	}
	if !run(func(tb testing.TB) { Eventually(tb, 50*time.Millisecond, "never", func() bool { return false }) }) {
		t.Fatal("a condition that never comes true passed")
	}
}

func TestHolds(t *testing.T) {
	if run(func(tb testing.TB) { Holds(tb, 50*time.Millisecond, "always", func() bool { return true }) }) {
		t.Fatal("a condition that stays true failed")
	}
	var n atomic.Int32
	if !run(func(tb testing.TB) { Holds(tb, time.Second, "breaks", func() bool { return n.Add(1) < 3 }) }) {
		t.Fatal("a condition that turns false within the window passed")
	}
}
