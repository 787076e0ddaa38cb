package streamer

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// afterGet runs hook once, after the first Get of id returned: a write that
// lands between the worker's re-read of a session and what it does next.
type afterGet struct {
	lease.Store
	id    string
	armed atomic.Bool
	once  sync.Once
	hook  func()
}

func (a *afterGet) Get(ctx context.Context, id string) (lease.Item, error) {
	it, err := a.Store.Get(ctx, id)
	if id == a.id && err == nil && a.armed.Load() {
		a.once.Do(a.hook)
	}
	return it, err
}

// mailIngest is ingest's desired-state write for a session the worker owns:
// the item, then the owner's mailbox entry for it (a set add).
func mailIngest(st *memstore.Store, id string, gen int64, state string) {
	var owner string
	st.Update(id, func(it *lease.Item) { it.Generation, it.DesiredState, owner = gen, state, it.Owner })
	st.UpdateWorker(owner, func(r *lease.WorkerRecord) {
		if e := schema.MailboxEntry(id, gen, state); r.Alive() && !slices.Contains(r.Mailbox, e) {
			r.Mailbox = append(r.Mailbox, e)
		}
	})
}

// A stop written between the owner's re-read of a mailbox entry (a new
// generation) and its ack is not swallowed by the ack: it is another entry,
// and the heartbeat that carries the ack brings it, so the session stops
// within a heartbeat or two, long before the audit (a minute away here).
// With one entry per session (the bare id) the stop's set add changed
// nothing and the ack removed it: the stop waited for the audit.
func TestAStopBetweenTheReReadAndTheAckStopsTheSession(t *testing.T) {
	st := memstore.New()
	const id = "mem-000000"
	var wrapped *afterGet
	var stopAt atomic.Int64
	wrap := func(s lease.Store) lease.Store {
		wrapped = &afterGet{Store: s, id: id, hook: func() {
			mailIngest(st, id, 2, schema.StateStopped)
			stopAt.Store(time.Now().UnixNano())
		}}
		return wrapped
	}
	const heartbeat = 200 * time.Millisecond
	m := startMemThrough(t, st, wrap, 1, func(c *Config) {
		c.HeartbeatEvery, c.ReconcileEvery = heartbeat, time.Minute
	}, nil)
	testwait.Eventually(t, 5*time.Second, "messages", func() bool { return m.sink.count(id) > 3 })
	wrapped.armed.Store(true)
	// A new generation, mailed: the worker re-reads (generation 2,
	// STARTED), and the stop lands right after that read.
	mailIngest(st, id, 2, schema.StateStarted)
	testwait.Eventually(t, 5*time.Second, "the stop written after the re-read", func() bool {
		it, _ := st.Get(context.Background(), id)
		return it.DesiredState == schema.StateStopped
	})
	testwait.Eventually(t, 10*heartbeat+2*time.Second, "the session closed by the stop's own mailbox entry", func() bool {
		return m.feed.Session(id).Open == 0 && m.Status().Owned == 0
	})
	t.Logf("closed %v after the stop", time.Since(time.Unix(0, stopAt.Load())).Round(time.Millisecond))
	testwait.Eventually(t, 5*heartbeat+time.Second, "every entry acked", func() bool {
		rec, _ := st.GetWorker(context.Background(), m.ID())
		return len(rec.Mailbox) == 0
	})
}

// auditCounter counts the reconciler's passes (each lists the unowned
// sessions) and the audits (a by_owner query of the worker's own id).
type auditCounter struct {
	lease.Store
	self           string
	passes, audits atomic.Int64
}

func (a *auditCounter) Unowned(ctx context.Context, limit int) ([]string, error) {
	a.passes.Add(1)
	return a.Store.Unowned(ctx, limit)
}

func (a *auditCounter) OwnedBy(ctx context.Context, owner string, limit int) ([]lease.Owned, error) {
	if owner == a.self {
		a.audits.Add(1)
	}
	return a.Store.OwnedBy(ctx, owner, limit)
}

// The audit runs on every reconcile pass by default, and with
// WSFLEET_AUDIT_EVERY only on the first pass at least that long after the
// last: a fast reconcile does not bring a by_owner listing every pass.
func TestAuditEverySpacesTheAudit(t *testing.T) {
	for _, tc := range []struct {
		every time.Duration
		want  func(passes, audits int64) bool
	}{
		{0, func(p, a int64) bool { return a >= p-1 }}, // a pass counted before its audit ran
		{time.Hour, func(_, a int64) bool { return a == 1 }},
	} {
		c := &auditCounter{self: "mem-worker"}
		m := startMemThrough(t, memstore.New(), func(s lease.Store) lease.Store { c.Store = s; return c }, 1, func(cfg *Config) {
			cfg.ReconcileEvery, cfg.AuditEvery = 50*time.Millisecond, tc.every
		}, nil)
		testwait.Eventually(t, 10*time.Second, "10 reconcile passes", func() bool { return c.passes.Load() >= 10 })
		m.cancel()
		<-m.done
		m.done <- nil // for startMem's cleanup
		if p, a := c.passes.Load(), c.audits.Load(); !tc.want(p, a) {
			t.Errorf("audit every %v: %d audits in %d passes", tc.every, a, p)
		}
	}
}

// holdAcquire holds the reply of id's acquire, once applied, until release
// is closed (or the call's deadline): a claim whose acquire applied and
// whose reply is not back. It counts the heartbeats sent from then on.
type holdAcquire struct {
	lease.Store
	id         string
	held       chan struct{} // closed when the acquire applied and its reply is held
	release    chan struct{}
	once       sync.Once
	heartbeats atomic.Int64
}

func (a *holdAcquire) Acquire(ctx context.Context, id, owner string, from lease.From) (lease.Item, error) {
	it, err := a.Store.Acquire(ctx, id, owner, from)
	if id == a.id && err == nil {
		a.once.Do(func() {
			close(a.held)
			select {
			case <-a.release:
			case <-ctx.Done():
			}
		})
	}
	return it, err
}

func (a *holdAcquire) Heartbeat(ctx context.Context, owner string, epoch int64, hb lease.Heartbeat) (lease.WorkerRecord, error) {
	rec, err := a.Store.Heartbeat(ctx, owner, epoch, hb)
	a.heartbeats.Add(1)
	return rec, err
}

// A STOP mailed while the session's claim is under way (the acquire
// applied, its reply not back) stops the session as soon as the claim
// returns: the entry is kept for the claim, not acked against no session.
// Acked and dropped, the stop waited for the audit (an hour away here).
func TestAStopDuringTheClaimStopsTheSessionWhenTheClaimReturns(t *testing.T) {
	st := memstore.New()
	const id = "mem-000000"
	hold := &holdAcquire{id: id, held: make(chan struct{}), release: make(chan struct{})}
	m := startMemThrough(t, st, func(s lease.Store) lease.Store { hold.Store = s; return hold }, 1, func(c *Config) {
		c.ReconcileEvery, c.AuditEvery = time.Hour, time.Hour // the first pass claims; no audit after it
	}, nil)
	select {
	case <-hold.held:
	case <-time.After(5 * time.Second):
		t.Fatal("the first reconcile pass did not claim")
	}
	mailIngest(st, id, 2, schema.StateStopped)
	// The heartbeat after the stop's write brings its entry: wait for two,
	// the entry then handed over while the claim is still under way.
	from := hold.heartbeats.Load()
	testwait.Eventually(t, 5*testHeartbeat+testRPC, "two heartbeats after the stop", func() bool { return hold.heartbeats.Load() >= from+2 })
	if m.Status().Owned != 0 {
		t.Fatal("the session started before its acquire's reply")
	}
	if rec, _ := st.GetWorker(context.Background(), m.ID()); !slices.Contains(rec.Mailbox, schema.MailboxEntry(id, 2, schema.StateStopped)) {
		t.Fatalf("mailbox %q: the stop's entry was acked while its session was being claimed", rec.Mailbox)
	}
	close(hold.release)
	released := time.Now()
	// Stopped: its lease released (it was ours: the acquire applied), no
	// session left, no connection open.
	testwait.Eventually(t, 1500*time.Millisecond, "the session stopped once its claim returned", func() bool {
		it, _ := st.Get(context.Background(), id)
		return it.Owner == "" && m.Status().Owned == 0 && m.feed.Session(id).Open == 0
	})
	t.Logf("stopped %v after the claim returned", time.Since(released).Round(time.Millisecond))
	testwait.Eventually(t, 5*testHeartbeat+time.Second, "every entry acked", func() bool {
		rec, _ := st.GetWorker(context.Background(), m.ID())
		return len(rec.Mailbox) == 0
	})
}
