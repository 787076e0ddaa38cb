package lease

import (
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"
)

// The checkpoint queue gives the scan the tenures whose time came, earliest
// first, each once: an entry superseded by a later push, or of a tenure no
// longer held, is dropped.
func TestCheckpointQueueGivesTheDueTenuresOnce(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	k := &Keeper{held: map[string]*Held{}}
	mk := func(id string) *Held {
		h := &Held{token: Token{ConnectionID: id}}
		k.held[id] = h
		return h
	}
	a, b, c, gone := mk("a"), mk("b"), mk("c"), mk("gone")
	k.mu.Lock()
	defer k.mu.Unlock()
	k.queueLocked(c, t0.Add(3*time.Second))
	k.queueLocked(a, t0.Add(time.Second))
	k.queueLocked(b, t0.Add(2*time.Second))
	k.queueLocked(b, t0.Add(10*time.Second)) // supersedes b's first entry
	k.queueLocked(gone, t0)
	delete(k.held, "gone")
	ids := func(hs []*Held) (out []string) {
		for _, h := range hs {
			out = append(out, h.ID())
		}
		return out
	}
	for _, tc := range []struct {
		at   time.Duration
		want []string
	}{
		{0, nil},
		{time.Second, []string{"a"}},
		{5 * time.Second, []string{"c"}}, // not b: its entry at 2 s was superseded
		{9 * time.Second, nil},
		{10 * time.Second, []string{"b"}},
		{time.Hour, nil}, // each once
	} {
		got := ids(k.dueLocked(nil, t0.Add(tc.at)))
		if len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) {
			t.Fatalf("due at +%v: %v, want %v", tc.at, got, tc.want)
		}
	}
	if len(k.ckpts) != 0 {
		t.Fatalf("%d entries left", len(k.ckpts))
	}
}

// The queue's push and pop allocate nothing once its array has room (every
// tenure is pushed and popped once a checkpoint interval), and pop gives
// the entries earliest first.
func TestCheckpointQueueAllocatesNothing(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	h := &Held{}
	var q ckptQueue
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		q.push(ckptEntry{at: t0.Add(time.Duration(r.IntN(1000)) * time.Millisecond), h: h})
	}
	last := time.Time{}
	for len(q) > 0 {
		e := q.pop()
		if e.at.Before(last) {
			t.Fatalf("popped %v after %v", e.at, last)
		}
		last = e.at
	}
	// Through the Keeper: a tenure queued and its entry popped by the scan
	// (dropped, as it is no longer held: the scan's list stays empty).
	k := &Keeper{held: map[string]*Held{}, ckpts: q}
	if n := testing.AllocsPerRun(100, func() {
		k.queueLocked(h, t0)
		k.queueLocked(h, t0.Add(time.Millisecond))
		if due := k.dueLocked(nil, t0.Add(time.Second)); len(due) != 0 {
			t.Fatalf("due: %d tenures not held", len(due))
		}
	}); n != 0 {
		t.Fatalf("queue and scan: %.0f allocations, want 0", n)
	}
}

// A tenure's Held stays in the 448-byte size class (it was 456 B, 480
// allocated, its two flags padded to a word; the atomic end flag where
// the generation announced on Changed was, its item's being the one):
// every held session keeps one for its life, and no channel unless waited
// on (docs/worker.md, "Where a session's memory goes").
func TestHeldSize(t *testing.T) {
	if n := unsafe.Sizeof(Held{}); n > 448 {
		t.Fatalf("Held is %d B, want ≤ 448 (the size class it is allocated in)", n)
	}
}

// A tenure's Changed is made when first asked for (a session's back-off
// waits on it; most tenures never do, and a channel is 112 B): a new
// generation before that only moves Generation, one after it signals.
func TestChangedMadeWhenWaitedOn(t *testing.T) {
	env := &heldEnv{trusted: func(time.Time) bool { return true }, until: func() time.Time { return time.Time{} }, now: time.Now}
	it := Item{ConnectionID: "c", Owner: "w", Epoch: 1, Generation: 1, LastSeq: NoSeq}
	h := newHeld(it, time.Now(), time.Minute, env)
	if h.changed != nil {
		t.Fatal("a new tenure has a Changed channel before anyone asked for it")
	}
	it.Generation = 2
	h.SetItem(it)
	if h.Generation() != 2 || h.changed != nil {
		t.Fatalf("after a new generation nobody waited on: generation %d, channel made %v", h.Generation(), h.changed != nil)
	}
	c := h.Changed()
	if h.Changed() != c {
		t.Fatal("a second Changed channel")
	}
	select {
	case <-c:
		t.Fatal("signalled a generation from before it was asked for (Generation says)")
	default:
	}
	it.Generation = 3
	h.SetItem(it)
	select {
	case <-c:
	default:
		t.Fatal("no signal for a new generation after Changed was asked for")
	}
}

// A tenure's Done is made when first waited on (a session's back-off, an
// anchor waiting for a free slot; most tenures never are, and a channel is
// 112 B): its end shows without it (Err, RemainingAt), a Done made before
// the end is closed by it, and one asked for after is closed already.
func TestDoneMadeWhenWaitedOn(t *testing.T) {
	env := &heldEnv{trusted: func(time.Time) bool { return true }, until: func() time.Time { return time.Now().Add(time.Hour) }, now: time.Now}
	it := Item{ConnectionID: "c", Owner: "w", Epoch: 1, Generation: 1, LastSeq: NoSeq}
	closed := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	a := newHeld(it, time.Now(), time.Minute, env)
	if a.done != nil || a.RemainingAt(time.Now()) <= 0 {
		t.Fatalf("a new tenure: Done made %v, remaining %s", a.done != nil, a.RemainingAt(time.Now()))
	}
	if !a.end(ErrReleased) || a.done != nil || a.Err() == nil || a.RemainingAt(time.Now()) != 0 {
		t.Fatalf("ended with nobody waiting: Done made %v, err %v, remaining %s", a.done != nil, a.Err(), a.RemainingAt(time.Now()))
	}
	if !closed(a.Done()) {
		t.Fatal("Done asked for after the end is not closed")
	}
	b := newHeld(it, time.Now(), time.Minute, env)
	c := b.Done()
	if closed(c) || b.Done() != c {
		t.Fatal("waited on: closed before the end, or a second channel")
	}
	b.end(ErrLeaseLost)
	if !closed(c) {
		t.Fatal("Done made before the end not closed by it")
	}
	if n := testing.AllocsPerRun(20, func() { _ = newHeld(it, time.Now(), time.Minute, env) }); n > 1 {
		t.Fatalf("newHeld: %.0f allocations, want 1 (the Held, no channel)", n)
	}
}
