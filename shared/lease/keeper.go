package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// Observer hears what the Keeper does (metrics, logs, the worker's reaction).
// Methods must not block.
type Observer interface {
	// Heartbeat is called after every heartbeat attempt.
	Heartbeat(latency time.Duration, err error)
	// Ended is called once when a tenure ends for any reason but Release,
	// Fail or Abandon (the session must close at once).
	Ended(h *Held, err error)
	// Mailbox hands over connection ids found in the worker's mailbox, each
	// once; the worker re-reads each and calls Keeper.Ack when done.
	Mailbox(ids []string)
	// WorkerDied is called when this Keeper declared worker id dead: its
	// sessions may be taken over now.
	WorkerDied(id string)
}

type nopObserver struct{}

func (nopObserver) Heartbeat(time.Duration, error) {}
func (nopObserver) Ended(*Held, error)             {}
func (nopObserver) Mailbox([]string)               {}
func (nopObserver) WorkerDied(string)              {}

// Load is what the worker tells its heartbeats.
type Load struct {
	Sessions    int // sessions held
	Capacity    int
	AdminAddr   string
	Draining    bool
	MovesPerMin int
}

// Report returns the worker's current Load.
type Report func() Load

// errLeft ends the liveness of a worker that left.
var errLeft = errors.New("worker left")

// Keeper keeps one worker alive and holds its sessions: it registers the
// worker record and heartbeats it (one write per HeartbeatEvery, carrying
// the mailbox acks and returning the mailbox), fences every session at once
// when the trust deadline of its last successful heartbeat passes (even
// with the store unreachable), checkpoints each session when its last_seq
// advanced, and watches the workers rendezvous hashing gives it, declaring
// dead those whose heartbeat counter did not move for a TTL.
type Keeper struct {
	store  Store
	clk    clock.Clock
	cfg    Config
	obs    Observer
	report Report

	sem chan struct{}
	wg  sync.WaitGroup

	// trust is what Valid reads on every delivery, published after every
	// change of live (no lock on the hot path).
	trust atomic.Pointer[trustState]

	lmu      sync.Mutex // guards the fields below; a leaf lock
	live     liveness
	epoch    int64
	nextSeq  int64
	record   WorkerRecord
	acks     []string
	pending  map[string]bool // mailbox entries handed over, not yet acked
	hbBusy   bool
	targets  []string
	watching map[string]*watch
	alive    int // alive workers at the last listing
	// deathCheck is the earliest instant a watched worker may be declared
	// dead (zero: none due): Run reads it then, not only every WatchEvery.
	deathCheck time.Time

	mu   sync.Mutex // guards held; taken before any Held's mu, never after
	held map[string]*Held

	gmu       sync.Mutex // guards gone and aliveSeen; a leaf lock
	gone      map[string]bool
	aliveSeen map[string]time.Time
}

// trustState is a published copy of the liveness verdict.
type trustState struct {
	valid bool // registered and not ended
	until time.Time
}

// publishLocked publishes live's verdict; the caller holds lmu.
func (k *Keeper) publishLocked() {
	k.trust.Store(&trustState{valid: k.live.registered && k.live.ended == nil, until: k.live.trustedUntil})
}

// NewKeeper returns a Keeper; obs and report may be nil.
func NewKeeper(store Store, clk clock.Clock, cfg Config, obs Observer, report Report) (*Keeper, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if obs == nil {
		obs = nopObserver{}
	}
	k := &Keeper{
		store: store, clk: clk, cfg: cfg, obs: obs, report: report,
		sem:       make(chan struct{}, cfg.MaxConcurrentWrites),
		held:      map[string]*Held{},
		pending:   map[string]bool{},
		watching:  map[string]*watch{},
		gone:      map[string]bool{},
		aliveSeen: map[string]time.Time{},
	}
	k.live = liveness{ttl: cfg.TTL, margin: cfg.SafetyMargin}
	k.publishLocked()
	return k, nil
}

// Config returns the Keeper's timings.
func (k *Keeper) Config() Config { return k.cfg }

// Store returns the store the Keeper writes to.
func (k *Keeper) Store() Store { return k.store }

func (k *Keeper) reported() Load {
	if k.report == nil {
		return Load{Sessions: k.Count()}
	}
	return k.report()
}

// Register creates the worker record (ALIVE, epoch 1). The worker is trusted
// from the send time of the registration.
func (k *Keeper) Register(ctx context.Context) error {
	l := k.reported()
	sentAt := k.clk.Now()
	rec := WorkerRecord{
		ID: k.cfg.Owner, State: schema.WorkerAlive, Epoch: 1, HeartbeatSeq: 0, HeartbeatAtMs: sentAt.UnixMilli(), TTL: k.cfg.TTL,
		Load: l.Sessions, Capacity: l.Capacity, AdminAddr: l.AdminAddr, List: schema.WorkerListAlive, StartedAtMs: sentAt.UnixMilli(),
	}
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	if err := k.store.Register(ctx, rec); err != nil {
		return fmt.Errorf("register worker %s: %w", k.cfg.Owner, err)
	}
	k.lmu.Lock()
	k.epoch, k.nextSeq, k.record = 1, 1, rec
	k.live.succeeded(sentAt)
	k.publishLocked()
	k.lmu.Unlock()
	return nil
}

// Trusted reports whether the worker may act as owner now.
func (k *Keeper) Trusted() bool { return k.trusted(k.clk.Now()) }

func (k *Keeper) trusted(now time.Time) bool {
	t := k.trust.Load()
	return t.valid && now.Before(t.until)
}

// trustDeadline is the published trust deadline (zero: not trusted at all).
func (k *Keeper) trustDeadline() time.Time {
	t := k.trust.Load()
	if !t.valid {
		return time.Time{}
	}
	return t.until
}

// TrustedUntil is the worker's current monotonic trust deadline.
func (k *Keeper) TrustedUntil() time.Time {
	k.lmu.Lock()
	defer k.lmu.Unlock()
	return k.live.trustedUntil
}

// Ended says why the worker's liveness ended (declared dead, left); nil
// while it lives.
func (k *Keeper) Ended() error {
	k.lmu.Lock()
	defer k.lmu.Unlock()
	return k.live.ended
}

// Record is the worker record as the last heartbeat returned it.
func (k *Keeper) Record() WorkerRecord {
	k.lmu.Lock()
	defer k.lmu.Unlock()
	r := k.record
	r.Mailbox = append([]string(nil), r.Mailbox...)
	return r
}

// AliveWorkers is how many workers were ALIVE at the last listing.
func (k *Keeper) AliveWorkers() int {
	k.lmu.Lock()
	defer k.lmu.Unlock()
	return k.alive
}

// Ack records that mailbox entry id was handled; the next heartbeat removes
// it from the record.
// Acking an entry twice (the mailbox and an audit both re-read it) sends
// it once: a heartbeat naming it twice would be refused (a set with
// duplicates is invalid), and so would every one after it.
func (k *Keeper) Ack(id string) {
	k.lmu.Lock()
	if k.pending[id] && !slices.Contains(k.acks, id) {
		k.acks = append(k.acks, id)
	}
	k.lmu.Unlock()
}

// Run heartbeats, enforces the trust deadline, checkpoints and watches until
// ctx is done (nil) or the worker was declared dead (ErrWorkerDead: every
// session has been ended; the worker must exit), then waits for writes in
// flight. Register must have succeeded first.
func (k *Keeper) Run(ctx context.Context) error {
	defer k.wg.Wait()
	nextHB := k.clk.Now().Add(k.cfg.HeartbeatEvery)
	nextWatch := k.clk.Now().Add(k.cfg.WatchEvery())
	nextRefresh := k.clk.Now()
	nextScan := k.clk.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-k.clk.After(k.cfg.Tick):
		}
		now := k.clk.Now()
		if !now.Before(nextHB) {
			nextHB = now.Add(k.cfg.HeartbeatEvery)
			k.startHeartbeat(ctx)
		}
		if !now.Before(nextWatch) || k.deathDue(now) {
			nextWatch = now.Add(k.cfg.WatchEvery())
			k.wg.Go(func() { k.watchPass(ctx) })
		}
		if !now.Before(nextRefresh) {
			nextRefresh = now.Add(k.cfg.RefreshEvery)
			k.wg.Go(func() { _ = k.refreshWorkers(ctx) }) // a failed listing keeps the last one
		}
		scan := !now.Before(nextScan)
		if scan {
			nextScan = now.Add(checkpointScanEvery)
		}
		if err := k.tick(ctx, scan); err != nil {
			return err
		}
	}
}

// startHeartbeat sends one heartbeat unless one is in flight.
func (k *Keeper) startHeartbeat(ctx context.Context) {
	k.lmu.Lock()
	if k.hbBusy || k.live.ended != nil || !k.live.registered {
		k.lmu.Unlock()
		return
	}
	k.hbBusy = true
	k.lmu.Unlock()
	k.wg.Go(func() { k.heartbeat(ctx) })
}

// heartbeat sends one heartbeat with a new counter value and the acks
// collected so far, and applies the outcome.
func (k *Keeper) heartbeat(ctx context.Context) {
	l := k.reported()
	k.lmu.Lock()
	seq, epoch := k.nextSeq, k.epoch
	k.nextSeq++ // a retry never reuses a counter value (see Store.Heartbeat)
	acks := append([]string(nil), k.acks...)
	k.lmu.Unlock()
	sentAt := k.clk.Now()
	rctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	rec, err := k.store.Heartbeat(rctx, k.cfg.Owner, epoch, Heartbeat{
		Seq: seq, AtMs: sentAt.UnixMilli(), Load: l.Sessions, Capacity: l.Capacity, AdminAddr: l.AdminAddr,
		Draining: l.Draining, MovesPerMin: l.MovesPerMin, Ack: acks,
	})
	cancel()
	k.obs.Heartbeat(k.clk.Now().Sub(sentAt), err)
	var fresh []string
	k.lmu.Lock()
	k.hbBusy = false
	switch {
	case err == nil:
		k.live.succeeded(sentAt)
		k.publishLocked()
		k.record = rec
		// Acks sent are applied; drop them.
		k.acks = k.acks[len(acks):]
		for _, id := range acks {
			delete(k.pending, id)
		}
		for _, id := range rec.Mailbox {
			if !k.pending[id] {
				k.pending[id] = true
				fresh = append(fresh, id)
			}
		}
	case errors.Is(err, ErrWorkerDead) || errors.Is(err, ErrWorkerNotFound):
		k.live.end(fmt.Errorf("heartbeat: %w", err))
		k.publishLocked()
	}
	k.lmu.Unlock()
	if len(fresh) > 0 {
		k.obs.Mailbox(fresh)
	}
}

// checkpointScanEvery is how often the Keeper looks for due checkpoints
// (the shortest checkpoint interval is 1 s); the trust deadline is checked
// every Tick.
const checkpointScanEvery = 250 * time.Millisecond

// tick ends every tenure once the worker is no longer trusted and, when
// scan, starts due checkpoints; it returns the liveness error once the
// worker was declared dead and its tenures ended.
func (k *Keeper) tick(ctx context.Context, scan bool) error {
	now := k.clk.Now()
	k.lmu.Lock()
	valid, ended := k.live.valid(now), k.live.ended
	k.lmu.Unlock()
	if !valid {
		reason := ErrUntrusted
		if ended != nil {
			reason = ended
		}
		k.endAll(reason)
		if ended != nil && !errors.Is(ended, errLeft) {
			return ended
		}
		return nil
	}
	if !scan {
		return nil
	}
	k.mu.Lock()
	var due []*Held
	for _, h := range k.held {
		if h.checkpointMaybeDue(now) {
			due = append(due, h)
		}
	}
	k.mu.Unlock()
	for _, h := range due {
		seq, due := h.checkpointDue(now)
		if !due {
			continue
		}
		k.wg.Go(func() {
			select {
			case k.sem <- struct{}{}:
			case <-ctx.Done():
				h.checkpointDone(seq, ctx.Err(), k.clk.Now())
				return
			}
			defer func() { <-k.sem }()
			err := k.checkpoint(ctx, h, seq)
			next := k.clk.Now().Add(h.every)
			if err != nil && IsTransient(err) {
				next = k.clk.Now().Add(k.cfg.RetryEvery)
			}
			h.checkpointDone(seq, err, next)
			if err != nil && Definitive(err) && h.end(err) {
				k.forget(h)
				k.obs.Ended(h, err)
			}
		})
	}
	return nil
}

// endAll ends every tenure with err (the worker is fenced).
func (k *Keeper) endAll(err error) {
	k.mu.Lock()
	var ended []*Held
	for id, h := range k.held {
		if h.end(err) {
			ended = append(ended, h)
		}
		delete(k.held, id)
	}
	k.mu.Unlock()
	for _, h := range ended {
		k.obs.Ended(h, err)
	}
}

func (k *Keeper) forget(h *Held) {
	k.mu.Lock()
	if k.held[h.ID()] == h {
		delete(k.held, h.ID())
	}
	k.mu.Unlock()
}

// fenced returns ErrUntrusted (or the liveness error) when the worker may
// not write as owner now: a fenced worker writes nothing.
func (k *Keeper) fenced() error {
	now := k.clk.Now()
	k.lmu.Lock()
	defer k.lmu.Unlock()
	if k.live.ended != nil {
		return k.live.ended
	}
	if !k.live.valid(now) {
		return ErrUntrusted
	}
	return nil
}

// Acquire takes session id, from prev when the caller knows its owner is
// not alive (nil: no owner expected). A session held by another worker is
// taken over when that worker is seen not alive (its record DEAD, LEFT or
// gone): the store's conditional write names the exact tenure taken. A
// session a rebalancing move reserved for another worker is taken only when
// that worker is seen not alive or the reservation is older than
// HandoffBound.
func (k *Keeper) Acquire(ctx context.Context, id string, prev *Token) (*Held, error) {
	if err := k.fenced(); err != nil {
		return nil, fmt.Errorf("acquire %s: %w", id, err)
	}
	k.mu.Lock()
	if h, ok := k.held[id]; ok && h.Err() == nil {
		k.mu.Unlock()
		return nil, fmt.Errorf("acquire %s: %w (by this worker)", id, ErrHeld)
	}
	k.mu.Unlock()
	sentAt := k.clk.Now()
	from := From{Prev: prev}
	it, err := k.acquire(ctx, id, from)
	for range 2 { // a takeover, then a reservation (or the other way round)
		var held *HeldError
		var reserved *ReservedError
		switch {
		case errors.As(err, &held) && held.Current.Owner != k.cfg.Owner && from.Prev == nil && k.notAlive(ctx, held.Current.Owner):
			cur := held.Current
			from.Prev = &cur
		case errors.As(err, &reserved) && from.Bypass == "" &&
			(k.clk.Now().UnixMilli()-reserved.AtMs >= k.cfg.HandoffBound.Milliseconds() || k.notTaking(ctx, reserved.To)):
			from.Bypass = reserved.To
		default:
			continue
		}
		sentAt = k.clk.Now()
		it, err = k.acquire(ctx, id, from)
	}
	if err != nil {
		return nil, fmt.Errorf("acquire %s: %w", id, err)
	}
	h := newHeld(it, sentAt, k.cfg.CheckpointEvery, k.trusted, k.trustDeadline, k.clk.Now)
	k.mu.Lock()
	if old, ok := k.held[id]; ok {
		old.end(ErrLeaseLost)
	}
	k.held[id] = h
	k.mu.Unlock()
	return h, nil
}

func (k *Keeper) acquire(ctx context.Context, id string, from From) (Item, error) {
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	return k.store.Acquire(ctx, id, k.cfg.Owner, from)
}

// NotAlive reports whether worker id is not alive, as this Keeper has seen
// it (its record read when not seen alive within the last heartbeat
// period; a worker seen DEAD or LEFT, or missing, stays so): the check a
// takeover of id's tenures needs when another worker reports id dead.
func (k *Keeper) NotAlive(ctx context.Context, id string) bool { return k.notAlive(ctx, id) }

// notAlive reports whether worker id is known not alive, reading its record
// when this Keeper has not seen it alive within the last heartbeat period.
func (k *Keeper) notAlive(ctx context.Context, id string) bool {
	now := k.clk.Now()
	k.gmu.Lock()
	if k.gone[id] {
		k.gmu.Unlock()
		return true
	}
	if at, ok := k.aliveSeen[id]; ok && now.Sub(at) < k.cfg.HeartbeatEvery {
		k.gmu.Unlock()
		return false
	}
	k.gmu.Unlock()
	if _, gone, ok := k.readWorker(ctx, id); gone || !ok {
		return gone
	}
	k.gmu.Lock()
	k.aliveSeen[id] = k.clk.Now()
	k.gmu.Unlock()
	return false
}

// readWorker reads worker id's record: gone when it is missing or not
// ALIVE (remembered: it never comes back), ok false when the read failed.
func (k *Keeper) readWorker(ctx context.Context, id string) (rec WorkerRecord, gone, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	rec, err := k.store.GetWorker(ctx, id)
	switch {
	case errors.Is(err, ErrWorkerNotFound):
		k.markGone(id)
		return rec, true, true
	case err != nil:
		return rec, false, false
	case !rec.Alive():
		k.markGone(id)
		return rec, true, true
	}
	return rec, false, true
}

// notTaking reports whether worker id will not take a session reserved
// for it: not alive, or draining (shutting down: it claims nothing more,
// so waiting out the hand-off bound would only keep the session dark).
// Reservations are a liveness matter only, so a stale read costs at most
// the bound.
func (k *Keeper) notTaking(ctx context.Context, id string) bool {
	k.gmu.Lock()
	gone := k.gone[id]
	k.gmu.Unlock()
	if gone {
		return true
	}
	rec, gone, ok := k.readWorker(ctx, id)
	return gone || (ok && rec.Draining)
}

func (k *Keeper) markGone(id string) {
	k.gmu.Lock()
	k.gone[id] = true
	delete(k.aliveSeen, id)
	k.gmu.Unlock()
}

// checkpoint writes seq for h (fenced on the worker's trust).
func (k *Keeper) checkpoint(ctx context.Context, h *Held, seq int64) error {
	if err := k.fenced(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	return k.store.Checkpoint(ctx, h.token, seq)
}

// Checkpoint writes h's highest observed seq now if it advanced (a stop, a
// new generation).
func (k *Keeper) Checkpoint(ctx context.Context, h *Held) error {
	seq := h.LastSeq()
	if seq <= h.Checkpointed() {
		return nil
	}
	err := k.checkpoint(ctx, h, seq)
	h.checkpointDone(seq, err, k.clk.Now().Add(h.every))
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", h.token, err)
	}
	return nil
}

// Release ends h and writes the final checkpoint and the release, so that
// another worker may take the session at once. The caller has stopped
// using the session first. A fenced worker writes nothing (ErrUntrusted):
// its sessions are taken over once it is declared dead.
func (k *Keeper) Release(ctx context.Context, h *Held) error {
	h.end(ErrReleased)
	k.forget(h)
	if err := k.fenced(); err != nil {
		return fmt.Errorf("release %s: %w", h.token, err)
	}
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	if err := k.store.Release(ctx, h.token, h.LastSeq()); err != nil {
		return fmt.Errorf("release %s: %w", h.token, err)
	}
	return nil
}

// Handoff ends h and releases it reserved for worker to (a rebalancing
// move): the final checkpoint, then the release; to may take it at once,
// anyone else after HandoffBound. Like Release, the caller has stopped
// using the session first.
func (k *Keeper) Handoff(ctx context.Context, h *Held, to string) error {
	h.end(ErrReleased)
	k.forget(h)
	if err := k.fenced(); err != nil {
		return fmt.Errorf("hand off %s: %w", h.token, err)
	}
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	if err := k.store.Handoff(ctx, h.token, h.LastSeq(), to, k.clk.Now().UnixMilli()); err != nil {
		return fmt.Errorf("hand off %s to %s: %w", h.token, to, err)
	}
	return nil
}

// Fleet reads the records of the alive workers (eventually consistent):
// the load and capacity rebalancing works from.
func (k *Keeper) Fleet(ctx context.Context) ([]WorkerRecord, error) {
	ids, err := k.store.ListWorkers(ctx, schema.WorkerListAlive, 0)
	if err != nil {
		return nil, fmt.Errorf("alive workers: %w", err)
	}
	recs, err := k.store.GetWorkers(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("worker records: %w", err)
	}
	return recs, nil
}

// ReleaseToken releases a tenure of this worker that it does not hold in
// memory (found by an audit: an acquire whose reply was lost).
func (k *Keeper) ReleaseToken(ctx context.Context, t Token) error {
	if err := k.fenced(); err != nil {
		return fmt.Errorf("release %s: %w", t, err)
	}
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	if err := k.store.Release(ctx, t, NoSeq); err != nil {
		return fmt.Errorf("release %s: %w", t, err)
	}
	return nil
}

// Fail ends h and records that its source, as configured at generation gen,
// can never be connected (Store.Fail). ErrNewGeneration: the session has a
// newer configuration, never tried; nothing was written and h may still be
// released.
func (k *Keeper) Fail(ctx context.Context, h *Held, gen int64, reason string, at time.Time) error {
	h.end(ErrFailed)
	k.forget(h)
	if err := k.fenced(); err != nil {
		return fmt.Errorf("fail %s: %w", h.token, err)
	}
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	if err := k.store.Fail(ctx, h.token, gen, h.LastSeq(), reason, at.UnixMilli()); err != nil {
		return fmt.Errorf("fail %s: %w", h.token, err)
	}
	return nil
}

// NoteError records reason as h's session's last connection error, seen at
// at, while h holds it. It does not end h.
func (k *Keeper) NoteError(ctx context.Context, h *Held, reason string, at time.Time) error {
	if err := k.fenced(); err != nil {
		return fmt.Errorf("note error %s: %w", h.token, err)
	}
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	if err := k.store.NoteError(ctx, h.token, reason, at.UnixMilli()); err != nil {
		return fmt.Errorf("note error %s: %w", h.token, err)
	}
	return nil
}

// Abandon stops holding h without writing anything (the session is taken
// over once this worker is declared dead, or audited back).
func (k *Keeper) Abandon(h *Held) {
	h.end(ErrReleased)
	k.forget(h)
}

// Leave marks the worker LEFT after it released its sessions (graceful
// exit): nobody waits a TTL; reconcilers take over anything it still owns
// (the GONE list), then mark it DONE.
func (k *Keeper) Leave(ctx context.Context) error {
	k.lmu.Lock()
	epoch, registered := k.epoch, k.live.registered
	k.lmu.Unlock()
	if !registered {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	// Always GONE: a reconciler moves the record to DONE once by_owner
	// shows it owns nothing. The worker's own view is not enough (a release
	// whose write failed, an acquire whose reply was lost, an index that
	// lags), and a DONE record's sessions are never looked for again.
	list := schema.WorkerListGone
	err := k.store.Leave(ctx, k.cfg.Owner, epoch, list, k.clk.Now().UnixMilli())
	k.lmu.Lock()
	k.live.end(errLeft)
	k.publishLocked()
	k.lmu.Unlock()
	k.endAll(errLeft)
	if err != nil {
		return fmt.Errorf("leave %s: %w", k.cfg.Owner, err)
	}
	return nil
}

// Orphans lists sessions this worker may try to acquire, up to limit:
// STARTED sessions without owner, then the sessions of workers that died or
// left (a GONE record). A GONE worker that owns none is moved to DONE.
func (k *Keeper) Orphans(ctx context.Context, limit int) ([]Candidate, error) {
	var out []Candidate
	ids, err := k.store.Unowned(ctx, limit)
	if err != nil {
		return nil, fmt.Errorf("unowned: %w", err)
	}
	for _, id := range ids {
		out = append(out, Candidate{ConnectionID: id})
	}
	gone, err := k.store.ListWorkers(ctx, schema.WorkerListGone, 0)
	if err != nil {
		return out, fmt.Errorf("gone workers: %w", err)
	}
	for _, w := range gone {
		if len(out) >= limit {
			break
		}
		owned, err := k.store.OwnedBy(ctx, w, limit-len(out))
		if err != nil {
			return out, fmt.Errorf("sessions of %s: %w", w, err)
		}
		if len(owned) == 0 {
			if err := k.store.MarkDone(ctx, w); err != nil && !errors.Is(err, ErrWorkerAlive) {
				return out, fmt.Errorf("mark %s done: %w", w, err)
			}
			continue
		}
		k.markGone(w)
		for _, o := range owned {
			if o.DesiredState == schema.StateStarted {
				t := o.Token
				out = append(out, Candidate{ConnectionID: o.ConnectionID, Prev: &t})
			}
		}
	}
	return out, nil
}

// TakeoverOf lists the STARTED sessions of worker id (dead or left), each
// with the tenure to take over.
func (k *Keeper) TakeoverOf(ctx context.Context, id string) ([]Candidate, error) {
	owned, err := k.store.OwnedBy(ctx, id, 0)
	if err != nil {
		return nil, fmt.Errorf("sessions of %s: %w", id, err)
	}
	var out []Candidate
	for _, o := range owned {
		if o.DesiredState == schema.StateStarted {
			t := o.Token
			out = append(out, Candidate{ConnectionID: o.ConnectionID, Prev: &t})
		}
	}
	return out, nil
}

// Audit lists the sessions the table says this worker owns (by_owner): the
// owner's check for stops and new generations whose mailbox entry was lost,
// and for tenures it does not hold (an acquire whose reply was lost).
func (k *Keeper) Audit(ctx context.Context) ([]Owned, error) {
	owned, err := k.store.OwnedBy(ctx, k.cfg.Owner, 0)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return owned, nil
}

// RefreshWorkers lists the alive workers and recomputes the watch targets
// (Run does it every RefreshEvery).
func (k *Keeper) RefreshWorkers(ctx context.Context) error { return k.refreshWorkers(ctx) }

func (k *Keeper) refreshWorkers(ctx context.Context) error {
	alive, err := k.store.ListWorkers(ctx, schema.WorkerListAlive, 0)
	if err != nil {
		return fmt.Errorf("alive workers: %w", err)
	}
	targets := Targets(k.cfg.Owner, alive, k.cfg.Watchers)
	k.lmu.Lock()
	k.alive = len(alive)
	k.targets = targets
	keep := map[string]*watch{}
	for _, t := range targets {
		if w, ok := k.watching[t]; ok {
			keep[t] = w
		} else {
			keep[t] = &watch{}
		}
	}
	k.watching = keep
	k.lmu.Unlock()
	return nil
}

// Targets are the workers this Keeper watches.
func (k *Keeper) Targets() []string {
	k.lmu.Lock()
	defer k.lmu.Unlock()
	return append([]string(nil), k.targets...)
}

// watchPass reads every watched record and declares dead those whose
// counter has not moved for the TTL (DeathAllowedAt).
func (k *Keeper) watchPass(ctx context.Context) {
	for _, t := range k.Targets() {
		rctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
		rec, err := k.store.GetWorker(rctx, t)
		cancel()
		receivedAt := k.clk.Now()
		if errors.Is(err, ErrWorkerNotFound) || (err == nil && !rec.Alive()) {
			k.markGone(t)
			k.unwatch(t)
			continue
		}
		if err != nil {
			// The wait counts only reads that answered: after an outage
			// that also stopped t's heartbeats, the first answer starts a
			// new wait instead of finding t's counter "still" unmoved.
			k.lmu.Lock()
			if w, ok := k.watching[t]; ok {
				*w = watch{}
			}
			k.lmu.Unlock()
			continue
		}
		k.lmu.Lock()
		w, ok := k.watching[t]
		if ok {
			w.observe(rec, receivedAt)
		}
		due := ok && w.deathAllowed(receivedAt, k.cfg.TTL)
		var epoch, seq int64
		if ok {
			epoch, seq = w.epoch, w.seq
		}
		k.scheduleDeathCheckLocked()
		k.lmu.Unlock()
		if !due {
			continue
		}
		rctx, cancel = context.WithTimeout(ctx, k.cfg.RPCTimeout)
		err = k.store.DeclareDead(rctx, t, epoch, seq, k.cfg.Owner, k.clk.Now().UnixMilli())
		cancel()
		if err == nil || errors.Is(err, ErrWorkerDead) {
			k.markGone(t)
			k.unwatch(t)
			if err == nil {
				k.obs.WorkerDied(t)
			}
		}
	}
}

// deathDue reports (once) whether a watched worker's death became allowed
// by now, so that it is declared within a Tick of that instant.
func (k *Keeper) deathDue(now time.Time) bool {
	k.lmu.Lock()
	defer k.lmu.Unlock()
	if k.deathCheck.IsZero() || now.Before(k.deathCheck) {
		return false
	}
	k.deathCheck = time.Time{}
	return true
}

// scheduleDeathCheckLocked sets deathCheck to the earliest death-allowed
// instant among the watches; the caller holds lmu.
func (k *Keeper) scheduleDeathCheckLocked() {
	var next time.Time
	for _, w := range k.watching {
		if w.firstSeen.IsZero() {
			continue
		}
		if at := DeathAllowedAt(w.firstSeen, k.cfg.TTL, w.ttl); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	k.deathCheck = next
}

func (k *Keeper) unwatch(id string) {
	k.lmu.Lock()
	delete(k.watching, id)
	k.lmu.Unlock()
}

// Holds reports whether this worker currently holds id.
func (k *Keeper) Holds(id string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	h, ok := k.held[id]
	return ok && h.Err() == nil
}

// Get returns the tenure of id this worker holds, or nil.
func (k *Keeper) Get(id string) *Held {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.held[id]
}

// Held lists the tenures being held, by connection id.
func (k *Keeper) Held() []*Held {
	k.mu.Lock()
	out := make([]*Held, 0, len(k.held))
	for _, h := range k.held {
		out = append(out, h)
	}
	k.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}

// Count is the number of sessions held.
func (k *Keeper) Count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.held)
}
