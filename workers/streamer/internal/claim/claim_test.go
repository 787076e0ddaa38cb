package claim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/draw"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fakeQueue struct {
	mu       sync.Mutex
	batches  [][]notify.Message
	maxAsked []int
	deleted  []string
	requeued []string
	// after is each requeue's delay, by message.
	after map[string]time.Duration
	// deleteCalls counts Delete calls (a receive's handled messages are
	// deleted in one).
	deleteCalls int
	fail        error
}

func (q *fakeQueue) Receive(ctx context.Context, max int) ([]notify.Message, error) {
	q.mu.Lock()
	q.maxAsked = append(q.maxAsked, max)
	if q.fail != nil {
		err := q.fail
		q.mu.Unlock()
		return nil, err
	}
	if len(q.batches) > 0 {
		b := q.batches[0]
		q.batches = q.batches[1:]
		q.mu.Unlock()
		return b, nil
	}
	q.mu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

func (q *fakeQueue) Delete(_ context.Context, ms ...notify.Message) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.deleteCalls++
	for _, m := range ms {
		q.deleted = append(q.deleted, m.MessageID)
	}
	return nil
}

func (q *fakeQueue) Requeue(_ context.Context, m notify.Message, after time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.requeued = append(q.requeued, m.MessageID)
	if q.after == nil {
		q.after = map[string]time.Duration{}
	}
	q.after[m.MessageID] = after
	return nil
}

func (q *fakeQueue) acks() (int, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.deleted), len(q.requeued)
}

// claimArgs is what one Claim call was given.
type claimArgs struct {
	prev     *lease.Token
	sentAtMs int64
}

type fakeClaimer struct {
	mu       sync.Mutex
	outcomes map[string]Outcome
	claims   []string
	args     map[string]claimArgs
	stops    []string
	free     atomic.Int64
	// admits: like the worker's admission, a claim takes a slot at once
	// (Free goes down) and is AtCapacity when none is free.
	admits bool
	// acquired counts the claims that took a slot.
	acquired int
	// failWith: the first claim of an id fails with this error (Failed).
	failWith map[string]error
}

func newClaimer(free int) *fakeClaimer {
	c := &fakeClaimer{outcomes: map[string]Outcome{}, args: map[string]claimArgs{}}
	c.free.Store(int64(free))
	return c
}

func (c *fakeClaimer) Claim(_ context.Context, id string, prev *lease.Token, sentAtMs int64) (Outcome, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.claims = append(c.claims, id)
	c.args[id] = claimArgs{prev: prev, sentAtMs: sentAtMs}
	if err, ok := c.failWith[id]; ok {
		delete(c.failWith, id)
		return Failed, err
	}
	out, ok := c.outcomes[id]
	if !ok {
		out = Acquired
	}
	if out == Acquired && c.admits {
		if c.free.Load() <= 0 {
			return AtCapacity, nil
		}
		c.free.Add(-1)
		c.acquired++
	}
	if out == Failed {
		return out, errors.New("transient")
	}
	if out == Reserved {
		return out, &ReservedUntil{After: 3 * time.Second, Err: lease.ErrHeld}
	}
	return out, nil
}

func (c *fakeClaimer) claimed() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.claims)
}

func (c *fakeClaimer) Free() int { return int(c.free.Load()) }

func (c *fakeClaimer) StopHint(_ context.Context, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stops = append(c.stops, id)
}

func msg(id, typ, conn string) notify.Message {
	return notify.Message{MessageID: id, Notification: notify.Notification{Type: typ, ConnectionID: conn, SentAtMs: 1}}
}

func runConsumer(t *testing.T, c *Consumer) (cancel func()) {
	ctx, cancelCtx := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	return func() { cancelCtx(); <-done }
}

func TestConsumerAcknowledgesByOutcome(t *testing.T) {
	q := &fakeQueue{batches: [][]notify.Message{{
		msg("m1", schema.NotifyStart, "acquired"),
		msg("m2", schema.NotifyStart, "held"),
		msg("m3", schema.NotifyStart, "stopped"),
		msg("m4", schema.NotifyStart, "full"),
		msg("m5", schema.NotifyStart, "flaky"),
		msg("m6", schema.NotifyStop, "s"),
		{MessageID: "m7", Err: notify.ErrMalformed},
		msg("m8", schema.NotifyStart, "mine"),
		msg("m9", schema.NotifyStart, "reserved"),
	}}}
	cl := newClaimer(100)
	cl.outcomes = map[string]Outcome{"held": HeldElsewhere, "stopped": NotStarted, "full": AtCapacity, "flaky": Failed, "mine": OwnedHere, "reserved": Reserved}
	stop := runConsumer(t, &Consumer{Queue: q, Claimer: cl, Log: zerolog.Nop()})
	testwait.Eventually(t, 5*time.Second, "acks", func() bool { d, r := q.acks(); return d+r == 8 })
	stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	want := map[string]bool{"m1": true, "m2": true, "m3": true, "m6": true, "m7": true, "m8": true}
	if len(q.deleted) != len(want) {
		t.Fatalf("deleted %v", q.deleted)
	}
	for _, id := range q.deleted {
		if !want[id] {
			t.Fatalf("deleted %s (all: %v)", id, q.deleted)
		}
	}
	// Full: handed back at once; reserved for another worker: handed
	// back until the reservation lapses (3 s here), not deleted.
	slices.Sort(q.requeued)
	if !slices.Equal(q.requeued, []string{"m4", "m9"}) {
		t.Fatalf("requeued %v, want [m4 m9]", q.requeued)
	}
	if q.after["m4"] != 0 || q.after["m9"] != 3*time.Second+reservedMargin {
		t.Fatalf("requeued after %v, want m4 at once and m9 after %s", q.after, 3*time.Second+reservedMargin)
	}
	if q.deleteCalls != 1 {
		t.Fatalf("%d Delete calls for one receive, want 1 (batched)", q.deleteCalls)
	}
	if len(cl.stops) != 1 || cl.stops[0] != "s" {
		t.Fatalf("stops %v", cl.stops)
	}
	// A start notification claims without a previous tenure, with the
	// notification's sent_at_ms.
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for id, a := range cl.args {
		if a.prev != nil || a.sentAtMs != 1 {
			t.Fatalf("claim of %s given prev %v, sent_at_ms %d; want nil, 1", id, a.prev, a.sentAtMs)
		}
	}
}

// A start whose claim timed out (a store request past its deadline, not a
// throttle) is handed back at once for any consumer; one that failed
// otherwise is left for the queue's visibility timeout.
func TestConsumerHandsBackATimedOutClaimAtOnce(t *testing.T) {
	q := &fakeQueue{batches: [][]notify.Message{{
		msg("m1", schema.NotifyStart, "slow"),
		msg("m2", schema.NotifyStart, "throttled"),
		msg("m3", schema.NotifyStart, "flaky"),
	}}}
	cl := newClaimer(10)
	cl.failWith = map[string]error{
		"slow":      fmt.Errorf("acquire slow: %w", context.DeadlineExceeded),
		"throttled": fmt.Errorf("acquire throttled: %w: %w", lease.ErrThrottled, context.DeadlineExceeded),
		"flaky":     errors.New("transient"),
	}
	stop := runConsumer(t, &Consumer{Queue: q, Claimer: cl, Log: zerolog.Nop()})
	testwait.Eventually(t, 5*time.Second, "every start claimed", func() bool { return len(cl.claimed()) == 3 })
	testwait.Eventually(t, 5*time.Second, "the timed-out one handed back", func() bool { _, r := q.acks(); return r == 1 })
	stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	if !slices.Equal(q.requeued, []string{"m1"}) || q.after["m1"] != 0 || len(q.deleted) != 0 {
		t.Fatalf("requeued %v (after %v), deleted %v; want m1 at once, nothing deleted", q.requeued, q.after, q.deleted)
	}
}

func TestConsumerAsksOnlyForFreeCapacityAndHandsBackWhenFull(t *testing.T) {
	q := &fakeQueue{batches: [][]notify.Message{{msg("m1", schema.NotifyStart, "a")}}}
	cl := newClaimer(0)
	cl.outcomes["a"] = AtCapacity
	stop := runConsumer(t, &Consumer{Queue: q, Claimer: cl, Log: zerolog.Nop(), FullWait: 20 * time.Millisecond})
	testwait.Eventually(t, 5*time.Second, "requeue", func() bool { _, r := q.acks(); return r == 1 })
	stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.maxAsked[0] != 1 {
		t.Fatalf("a full worker asked for %d messages, want 1", q.maxAsked[0])
	}

	q2 := &fakeQueue{}
	cl2 := newClaimer(3)
	stop2 := runConsumer(t, &Consumer{Queue: q2, Claimer: cl2, Log: zerolog.Nop()})
	testwait.Eventually(t, 5*time.Second, "receive", func() bool { q2.mu.Lock(); defer q2.mu.Unlock(); return len(q2.maxAsked) > 0 })
	stop2()
	if q2.maxAsked[0] != 3 {
		t.Fatalf("asked for %d with 3 free", q2.maxAsked[0])
	}
}

func TestConsumerReportsReceiveErrors(t *testing.T) {
	q := &fakeQueue{fail: errors.New("queue down")}
	c := &Consumer{Queue: q, Claimer: newClaimer(1), Log: zerolog.Nop()}
	stop := runConsumer(t, c)
	testwait.Eventually(t, 5*time.Second, "unhealthy", func() bool { return c.Healthy() != nil })
	stop()
}

// fakeLister answers Orphans with the next of its answers (then nothing).
type fakeLister struct {
	mu      sync.Mutex
	answers [][]lease.Candidate
	err     error
	limits  []int
	held    map[string]bool
	skip    map[string]bool // candidates MayClaim refuses
	events  *[]string       // "orphans" appended on every call, when set
	calls   atomic.Int64
}

func (l *fakeLister) Orphans(_ context.Context, limit int) ([]lease.Candidate, error) {
	l.calls.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.limits = append(l.limits, limit)
	if l.events != nil {
		*l.events = append(*l.events, "orphans")
	}
	if len(l.answers) == 0 {
		return nil, l.err
	}
	a := l.answers[0]
	l.answers = l.answers[1:]
	return a, l.err
}

func (l *fakeLister) add(cands ...lease.Candidate) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.answers = append(l.answers, cands)
}

func (l *fakeLister) Holds(id string) bool { return l.held[id] }

func (l *fakeLister) MayClaim(c lease.Candidate) bool { return !l.skip[c.ConnectionID] }

func runReconciler(r *Reconciler) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	return func() { cancel(); <-done }
}

// A pass tries only the candidates the lister says this worker may claim
// (lease.MayClaimUnowned: a fresh orphan is left to the workers ranked
// first for it), and the skipped ones take no free slot.
func TestReconcilerTriesOnlyWhatItMayClaim(t *testing.T) {
	l := &fakeLister{
		answers: [][]lease.Candidate{{{ConnectionID: "a"}, {ConnectionID: "b"}, {ConnectionID: "c"}}},
		skip:    map[string]bool{"a": true, "c": true},
	}
	cl := newClaimer(1)
	r := &Reconciler{Lister: l, Claimer: cl, Log: zerolog.Nop(), Every: time.Hour}
	r.pass(context.Background())
	if got := cl.claimed(); fmt.Sprint(got) != "[b]" {
		t.Fatalf("claims %v, want [b]", got)
	}
}

// Every candidate of a pass is claimed at once, an unowned one with no
// previous tenure and a dead worker's session with the exact tenure to
// take over; a session this worker holds is skipped.
func TestReconcilerClaimsEveryOrphanWithItsPreviousTenure(t *testing.T) {
	dead := lease.Token{ConnectionID: "dead-owned", Owner: "w-dead", Epoch: 7}
	l := &fakeLister{
		answers: [][]lease.Candidate{{
			{ConnectionID: "unowned"},
			{ConnectionID: "dead-owned", Prev: &dead},
			{ConnectionID: "ours"},
		}},
		held: map[string]bool{"ours": true},
	}
	cl := newClaimer(10)
	var orphans atomic.Int64
	r := &Reconciler{Lister: l, Claimer: cl, Log: zerolog.Nop(), Every: time.Hour, OnOrphans: func(n int) { orphans.Add(int64(n)) }}
	stop := runReconciler(r)
	testwait.Eventually(t, 5*time.Second, "both claims", func() bool { return len(cl.claimed()) == 2 })
	stop()
	got := cl.claimed()
	slices.Sort(got)
	if fmt.Sprint(got) != "[dead-owned unowned]" {
		t.Fatalf("claims %v, want dead-owned and unowned (not ours)", got)
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if a := cl.args["unowned"]; a.prev != nil || a.sentAtMs != 0 {
		t.Fatalf("unowned claimed with prev %v, sent_at_ms %d; want nil, 0", a.prev, a.sentAtMs)
	}
	if a := cl.args["dead-owned"]; a.prev == nil || *a.prev != dead || a.sentAtMs != 0 {
		t.Fatalf("dead worker's session claimed with prev %v, sent_at_ms %d; want %v, 0", a.prev, a.sentAtMs, dead)
	}
	if orphans.Load() != 3 {
		t.Fatalf("OnOrphans told %d, want the 3 candidates found", orphans.Load())
	}
	if l.calls.Load() != 1 {
		t.Fatalf("%d listings in one pass of an hourly reconciler", l.calls.Load())
	}
}

// A listing that failed part way still claims what it found (the Keeper
// returns the unowned sessions when listing a gone worker's fails).
func TestReconcilerClaimsWhatAFailedListingFound(t *testing.T) {
	l := &fakeLister{answers: [][]lease.Candidate{{{ConnectionID: "a"}}}, err: errors.New("by_owner: throttled")}
	cl := newClaimer(10)
	r := &Reconciler{Lister: l, Claimer: cl, Log: zerolog.Nop(), Every: time.Hour}
	stop := runReconciler(r)
	testwait.Eventually(t, 5*time.Second, "the claim", func() bool { return len(cl.claimed()) == 1 })
	stop()
}

// A claim whose store request timed out (a latency spike) is tried again
// in the same pass; a throttled one, or one that failed otherwise, waits
// for the next pass (the claim pacer spaces throttled claims).
func TestReconcilerRetriesATimedOutClaimInThePass(t *testing.T) {
	l := &fakeLister{answers: [][]lease.Candidate{{{ConnectionID: "slow"}, {ConnectionID: "throttled"}, {ConnectionID: "flaky"}}}}
	cl := newClaimer(10)
	cl.failWith = map[string]error{
		"slow":      fmt.Errorf("acquire slow: %w", context.DeadlineExceeded),
		"throttled": fmt.Errorf("acquire throttled: %w: %w", lease.ErrThrottled, context.DeadlineExceeded),
		"flaky":     errors.New("transient"),
	}
	r := &Reconciler{Lister: l, Claimer: cl, Log: zerolog.Nop(), Every: time.Hour}
	stop := runReconciler(r)
	testwait.Eventually(t, 5*time.Second, "slow claimed twice", func() bool {
		return slices.Equal(countOf(cl.claimed(), "slow"), []string{"slow", "slow"})
	})
	stop()
	for _, id := range []string{"throttled", "flaky"} {
		if n := len(countOf(cl.claimed(), id)); n != 1 {
			t.Fatalf("%s claimed %d times in one pass, want 1", id, n)
		}
	}
}

// countOf is the elements of ids equal to id.
func countOf(ids []string, id string) []string {
	return slices.DeleteFunc(slices.Clone(ids), func(s string) bool { return s != id })
}

func TestReconcilerStopsAtCapacity(t *testing.T) {
	t.Run("full", func(t *testing.T) {
		l := &fakeLister{answers: [][]lease.Candidate{{{ConnectionID: "a"}, {ConnectionID: "b"}}}}
		cl := newClaimer(0)
		var onPass atomic.Int64
		r := &Reconciler{Lister: l, Claimer: cl, Log: zerolog.Nop(), Every: time.Hour, OnPass: func(context.Context) { onPass.Add(1) }}
		stop := runReconciler(r)
		testwait.Eventually(t, 5*time.Second, "a pass", func() bool { return r.Passes() == 1 })
		stop()
		if len(cl.claims) != 0 || l.calls.Load() != 0 {
			t.Fatalf("a full worker listed (%d) or claimed (%v)", l.calls.Load(), cl.claims)
		}
		if onPass.Load() != 1 {
			t.Fatalf("OnPass ran %d times in the pass of a full worker, want 1 (the audit runs anyway)", onPass.Load())
		}
	})
	t.Run("fills up", func(t *testing.T) {
		var cands []lease.Candidate
		for i := range 6 {
			cands = append(cands, lease.Candidate{ConnectionID: fmt.Sprintf("s%d", i)})
		}
		l := &fakeLister{answers: [][]lease.Candidate{cands}}
		cl := newClaimer(2)
		cl.admits = true
		r := &Reconciler{Lister: l, Claimer: cl, Log: zerolog.Nop(), Every: time.Hour, Concurrency: 1}
		stop := runReconciler(r)
		testwait.Eventually(t, 5*time.Second, "the pass", func() bool { return r.Passes() == 1 && l.calls.Load() == 1 })
		testwait.Eventually(t, 5*time.Second, "two sessions acquired", func() bool {
			cl.mu.Lock()
			defer cl.mu.Unlock()
			return cl.acquired == 2
		})
		stop() // waits for the pass: its claims are all made
		// The reconciler stops offering candidates once Free is 0; the
		// capacity check precedes the wait for a claim slot, so one claim
		// in flight (Concurrency) may still be offered, and the Claimer's
		// admission refuses it.
		if n := len(cl.claimed()); n > 2+r.Concurrency {
			t.Fatalf("%d claims with 2 free slots and Concurrency %d: the reconciler did not stop at capacity (%v)", n, r.Concurrency, cl.claimed())
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.limits) != 1 || l.limits[0] < 2 {
			t.Fatalf("listing limits %v: want one listing asking for at least the 2 free slots", l.limits)
		}
	})
}

// A pass lists no more than its claim rate takes in ListSpan (a listing
// worked through for minutes is mostly claimed by others by the end), at
// least 10 (also before it knows its rate: 0), and twice its free slots up
// to 1,000 without a rate.
func TestReconcilerListsWhatItsClaimRateTakes(t *testing.T) {
	for _, tc := range []struct {
		name string
		free int
		rate func() float64
		want int
	}{
		{"no rate", 5000, nil, 1000},
		{"the default 50/s", 5000, func() float64 { return 50 }, 1000},
		{"a fleet budget's share", 5000, func() float64 { return 3.462 }, 70},
		{"throttled to the floor", 5000, func() float64 { return 0.1 }, 10},
		{"a share not known yet", 5000, func() float64 { return 0 }, 10},
		{"few free slots", 3, func() float64 { return 50 }, 10},
		{"free slots below the rate's", 20, func() float64 { return 3.462 }, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &fakeLister{}
			r := &Reconciler{Lister: l, Claimer: newClaimer(tc.free), Log: zerolog.Nop(), Every: time.Hour, ClaimRate: tc.rate}
			stop := runReconciler(r)
			testwait.Eventually(t, 5*time.Second, "the pass", func() bool { return r.Passes() == 1 && l.calls.Load() == 1 })
			stop()
			l.mu.Lock()
			defer l.mu.Unlock()
			if len(l.limits) != 1 || l.limits[0] != tc.want {
				t.Fatalf("listing limits %v, want [%d]", l.limits, tc.want)
			}
		})
	}
}

// A pass claims its candidates in an order drawn from the reconciler's
// stream: the same for the same seed (the fleet simulator's reruns), another
// for another seed.
func TestReconcilerOrderReplaysASeed(t *testing.T) {
	var cands []lease.Candidate
	for i := range 20 {
		cands = append(cands, lease.Candidate{ConnectionID: fmt.Sprintf("s%02d", i)})
	}
	order := func(seed uint64) []string {
		l := &fakeLister{answers: [][]lease.Candidate{slices.Clone(cands)}}
		cl := newClaimer(100)
		r := &Reconciler{Lister: l, Claimer: cl, Log: zerolog.Nop(), Every: time.Hour, Concurrency: 1,
			Rand: draw.New(seed).Stream("reconcile")}
		r.pass(context.Background()) // Concurrency 1: claims one after another, in the drawn order
		return cl.claimed()
	}
	a, b, c := order(7), order(7), order(8)
	if len(a) != len(cands) {
		t.Fatalf("claimed %v, want the %d candidates", a, len(cands))
	}
	if !slices.Equal(a, b) {
		t.Errorf("seed 7 claimed in the order %v, then %v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 7 and 8 claimed in the same order %v", a)
	}
}

// OnPass (the worker's audit) runs at the start of every pass, before the
// listing, whether the pass came from the timer or a Kick.
func TestReconcilerRunsOnPassBeforeEveryListing(t *testing.T) {
	var events []string // under l.mu
	l := &fakeLister{events: &events}
	r := &Reconciler{Lister: l, Claimer: newClaimer(5), Log: zerolog.Nop(), Every: 30 * time.Millisecond, Jitter: 0.01,
		OnPass: func(context.Context) {
			l.mu.Lock()
			defer l.mu.Unlock()
			events = append(events, "pass")
		}}
	stop := runReconciler(r)
	testwait.Eventually(t, 5*time.Second, "3 timed passes", func() bool { return r.Passes() >= 3 })
	stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	if int64(len(events)) != 2*r.Passes() {
		t.Fatalf("events %v for %d passes", events, r.Passes())
	}
	for i := 0; i < len(events); i += 2 {
		if events[i] != "pass" || events[i+1] != "orphans" {
			t.Fatalf("events %v: want OnPass then the listing, every pass", events)
		}
	}
}

// Kick runs a pass at once rather than after Every, including a Kick that
// arrives while a pass is in progress (it runs right after that one).
func TestReconcilerKickRunsAPassAtOnce(t *testing.T) {
	l := &fakeLister{}
	cl := newClaimer(10)
	inPass := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	r := &Reconciler{Lister: l, Claimer: cl, Log: zerolog.Nop(), Every: time.Hour,
		OnPass: func(context.Context) {
			once.Do(func() { close(inPass); <-release }) // hold the first pass open
		}}
	stop := runReconciler(r)
	defer stop()
	<-inPass
	// A worker is declared dead during the first pass: its session is
	// listed by the next one, which the Kick must start without waiting
	// for the hour.
	dead := lease.Token{ConnectionID: "x", Owner: "w-dead", Epoch: 2}
	l.add()                                                // the first pass finds nothing
	l.add(lease.Candidate{ConnectionID: "x", Prev: &dead}) // the kicked one finds x
	r.Kick()
	r.Kick() // kicks coalesce: at most one pass is pending
	close(release)
	testwait.Eventually(t, 2*time.Second, "the kicked pass claims x", func() bool { return len(cl.claimed()) == 1 })
	if got := r.Passes(); got != 2 {
		t.Fatalf("%d passes, want 2 (the first and one kicked)", got)
	}
	// Idle again: another Kick runs another pass at once.
	l.add(lease.Candidate{ConnectionID: "y"})
	r.Kick()
	testwait.Eventually(t, 2*time.Second, "the second kicked pass claims y", func() bool { return len(cl.claimed()) == 2 })
	testwait.Holds(t, 100*time.Millisecond, "no pass without a kick", func() bool { return r.Passes() == 3 })
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if a := cl.args["x"]; a.prev == nil || *a.prev != dead {
		t.Fatalf("x claimed with prev %v, want %v", a.prev, dead)
	}
}

// The consumer is flowing while a receive within the window brought a start
// notification (lease.Config.Flowing: the takeover's grace applies only
// then), and announcing while one brought a start naming a previous tenure
// (lease.Config.Announcing); a stop counts for neither. A consumer whose
// first receive has not been answered is flowing, for the window after its
// start (it cannot tell a quiet queue yet).
func TestConsumerFlowsWhileStartsArrive(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	q := &fakeQueue{batches: [][]notify.Message{{msg("m1", schema.NotifyStop, "s")}}}
	c := &Consumer{Queue: q, Claimer: newClaimer(100), Log: zerolog.Nop(), Clock: clk}
	if !c.Flowing(time.Second) {
		t.Fatal("not flowing before it ever listened: it cannot tell a quiet queue")
	}
	// handle runs c until it has handled the queued batch (acks acknowledgements in all).
	handle := func(what string, acks int) {
		t.Helper()
		stop := runConsumer(t, c)
		testwait.Eventually(t, 5*time.Second, what+" handled", func() bool { d, _ := q.acks(); return d == acks })
		stop()
	}
	handle("the stop", 1)
	if c.Flowing(time.Minute) {
		t.Fatal("flowing after a receive that brought a stop notification only")
	}
	q.mu.Lock()
	q.batches = [][]notify.Message{{msg("m2", schema.NotifyStart, "s2")}}
	q.mu.Unlock()
	handle("the start", 2)
	if !c.Flowing(10 * time.Second) {
		t.Fatal("not flowing right after a start notification")
	}
	if c.Announcing(time.Minute) {
		t.Fatal("announcing after a start naming no previous tenure")
	}
	// A start naming the tenure a takeover found: announcing too
	// (lease.Config.Announcing: the grace may last up to its max).
	announced := msg("m3", schema.NotifyStart, "s3")
	announced.Notification.PrevOwner, announced.Notification.PrevEpoch = "dead", 4
	q.mu.Lock()
	q.batches = [][]notify.Message{{announced}}
	q.mu.Unlock()
	handle("the announced start", 3)
	if !c.Announcing(10 * time.Second) {
		t.Fatal("not announcing right after a start naming a previous tenure")
	}
	clk.Advance(10 * time.Second)
	if c.Flowing(10 * time.Second) {
		t.Fatal("still flowing 10 s after the last start notification, within 10 s")
	}
	if c.Announcing(10 * time.Second) {
		t.Fatal("still announcing 10 s after the last announced start, within 10 s")
	}
	// A consumer whose receives fail has not been answered: flowing for
	// the window after its start only.
	down := &Consumer{Queue: &fakeQueue{fail: errors.New("queue down")}, Claimer: newClaimer(100), Log: zerolog.Nop(), Clock: clk}
	stop := runConsumer(t, down)
	testwait.Eventually(t, 5*time.Second, "a receive failed", func() bool { return down.Healthy() != nil })
	stop()
	if !down.Flowing(10 * time.Second) {
		t.Fatal("not flowing right after its start, never answered")
	}
	clk.Advance(10 * time.Second)
	if down.Flowing(10 * time.Second) {
		t.Fatal("flowing 10 s after its start, never answered, within 10 s")
	}
}
