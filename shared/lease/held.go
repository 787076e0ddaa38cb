package lease

import (
	"sync"
	"sync/atomic"
	"time"
)

// liveness is the worker's pure liveness state: until when it may act as
// owner of its sessions. Every method takes the current time; none reads a
// clock or does I/O.
type liveness struct {
	ttl, margin  time.Duration
	registered   bool
	lastSentOK   time.Time // send time of the last successful heartbeat (or the registration)
	trustedUntil time.Time // monotonic
	ended        error     // ErrWorkerDead, ErrWorkerNotFound or errLeft: terminal
}

// succeeded extends trust from the send time of a successful write of the
// record (never from its reply time: it may have been applied at any point
// after sending).
func (l *liveness) succeeded(sentAt time.Time) {
	if l.ended != nil {
		return
	}
	if !l.registered || sentAt.After(l.lastSentOK) {
		l.registered = true
		l.lastSentOK = sentAt
		l.trustedUntil = TrustedUntil(sentAt, l.ttl, l.margin)
	}
}

func (l *liveness) end(err error) {
	if l.ended == nil {
		l.ended = err
	}
}

// valid reports whether the worker may act as owner at now.
func (l *liveness) valid(now time.Time) bool {
	return l.registered && l.ended == nil && now.Before(l.trustedUntil)
}

// current reports whether the worker may act as owner at now and its last
// successful heartbeat was sent within one and a half heartbeat intervals
// (every): none is overdue, so the table answered it moments ago.
func (l *liveness) current(now time.Time, every time.Duration) bool {
	return l.valid(now) && now.Sub(l.lastSentOK) <= every+every/2
}

// watch is an observer's pure view of one watched worker: the heartbeat
// counter it last read and when it first received that value.
type watch struct {
	epoch, seq int64
	ttl        time.Duration
	firstSeen  time.Time
}

// observe records a read of rec received at receivedAt; a moved counter or
// epoch restarts the wait.
func (w *watch) observe(rec WorkerRecord, receivedAt time.Time) {
	if w.firstSeen.IsZero() || rec.Epoch != w.epoch || rec.HeartbeatSeq != w.seq {
		*w = watch{epoch: rec.Epoch, seq: rec.HeartbeatSeq, firstSeen: receivedAt}
	}
	w.ttl = rec.TTL
}

// deathAllowed reports whether the watched worker may be declared dead at
// now by an observer whose own TTL is ownTTL.
func (w *watch) deathAllowed(now time.Time, ownTTL time.Duration) bool {
	return !w.firstSeen.IsZero() && !now.Before(DeathAllowedAt(w.firstSeen, ownTTL, w.ttl))
}

// Held is one session this worker owns. Sessions check Valid before every
// side effect and stop when Done is closed.
type Held struct {
	token      Token
	acquiredAt time.Time
	env        *heldEnv      // the Keeper's, shared by its tenures
	every      time.Duration // checkpoint interval
	// promoted: the standby of this worker the acquire promoted (nil:
	// none); set before h is published, never changed.
	promoted *StandbyToken

	mu       sync.Mutex
	ended    error
	item     Item
	lastSeq  int64 // highest delivered
	stored   int64 // highest checkpointed
	nextCkpt time.Time
	ckptBusy bool
	// periodic: the session gets periodic checkpoints (Config.Periodic of
	// the item installed last).
	periodic bool
	// firstThrottled counts the throttled checkpoints in a row of a tenure
	// whose session has no checkpoint (FirstCheckpointRetry); an int32
	// beside the two flags, so that Held fits the 448-byte size class
	// (TestHeldSize).
	firstThrottled int32
	// over is set once the tenure ended (with ended): the per-message
	// check (RemainingAt) reads it without the lock.
	over atomic.Bool
	// qgen numbers this tenure's pushes on the Keeper's checkpoint queue
	// (under the Keeper's mu, not this one): only its latest entry counts.
	qgen uint64
	// done is closed when the tenure ends; made when first waited on
	// (Done: a session's back-off, an anchor waiting for its turn), since
	// most tenures never are (a channel is 112 B of every held session's
	// heap).
	done chan struct{}
	// changed signals a new generation of the item (SetItem) to a waiter
	// (a session's back-off); made when first asked for (Changed), since
	// most tenures never have one (a channel is 112 B of every held
	// session's heap).
	changed chan struct{}
}

// heldEnv is what every tenure of one Keeper asks it: one pointer in each
// Held instead of four functions (TestHeldSize).
type heldEnv struct {
	trusted func(now time.Time) bool
	until   func() time.Time // the worker's trust deadline (zero: none)
	now     func() time.Time
	// periodicFor decides periodic from an item (Config.Periodic; nil:
	// always).
	periodicFor func(Item) bool
}

func (e *heldEnv) periodic(it Item) bool { return e.periodicFor == nil || e.periodicFor(it) }

func newHeld(it Item, sentAt time.Time, every time.Duration, env *heldEnv) *Held {
	if it.CheckpointEvery > 0 {
		every = it.CheckpointEvery
	}
	periodic := env.periodic(it)
	next := sentAt.Add(every) // looked at once an interval while not periodic
	if periodic {
		next = firstCheckpoint(it.LastSeq, sentAt, every)
	}
	return &Held{
		token:      Token{ConnectionID: it.ConnectionID, Owner: it.Owner, Epoch: it.Epoch},
		acquiredAt: sentAt,
		env:        env,
		every:      every,
		item:       it,
		lastSeq:    it.LastSeq,
		stored:     it.LastSeq,
		nextCkpt:   next,
		periodic:   periodic,
	}
}

// firstCheckpoint is when a tenure's first periodic checkpoint is due: at
// once (as soon as a message was delivered) for a session that has no
// checkpoint yet, since a new owner of such a session cannot ask the source
// to resume and would skip what was sent in between (a session that anchors,
// Keeper.Anchor, has one before its first delivery, which moves this to an
// interval after it); one interval after the acquire otherwise (a crash then
// replays at most an interval).
func firstCheckpoint(stored int64, sentAt time.Time, every time.Duration) time.Time {
	if stored == NoSeq {
		return sentAt
	}
	return sentAt.Add(every)
}

// Token is the owner and epoch every write of this tenure is fenced on.
func (h *Held) Token() Token { return h.token }

// ID is the connection id.
func (h *Held) ID() string { return h.token.ConnectionID }

// Epoch is the fencing epoch of this tenure.
func (h *Held) Epoch() int64 { return h.token.Epoch }

// AcquiredAt is when the acquire was sent.
func (h *Held) AcquiredAt() time.Time { return h.acquiredAt }

// CheckpointEvery is this session's checkpoint interval.
func (h *Held) CheckpointEvery() time.Duration { return h.every }

// Periodic reports whether the session gets periodic checkpoints
// (Config.Periodic); without them only the explicit ones and the final one
// of its release, hand-off or fail are written.
func (h *Held) Periodic() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.periodic
}

// Item is the latest copy of the session item (refreshed when the owner
// re-reads it after a mailbox entry or an audit).
func (h *Held) Item() Item {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.item
}

// Valid reports whether this worker may still act as owner now: the tenure
// has not ended and the worker's trust deadline (measured on its monotonic
// clock from its last successful heartbeat's send time) has not passed.
func (h *Held) Valid() bool {
	now := h.env.now()
	h.mu.Lock()
	ended := h.ended
	h.mu.Unlock()
	return ended == nil && h.env.trusted(now)
}

// Remaining is how long this worker may still act as owner from now: until
// its trust deadline (on its monotonic clock), 0 once the tenure ended or
// the deadline passed. Remaining() > 0 exactly when Valid().
func (h *Held) Remaining() time.Duration { return h.RemainingAt(h.env.now()) }

// RemainingAt is Remaining at now, a reading of the tenure's clock (Now)
// the caller already made: a session reads the clock once per message, for
// the arrival time and this check. Lock-free: the tenure's end is its
// end an atomic flag, the trust deadline an atomic load.
func (h *Held) RemainingAt(now time.Time) time.Duration {
	if h.over.Load() {
		return 0
	}
	if !h.env.trusted(now) {
		return 0
	}
	return max(h.env.until().Sub(now), 0)
}

// Now reads the clock the tenure's deadlines are measured on.
func (h *Held) Now() time.Time { return h.env.now() }

// Done is closed when the tenure ends (lost, stopped, untrusted, released).
// The first call makes it; Err says whether it ended without one.
func (h *Held) Done() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done == nil {
		if h.ended != nil {
			return closedDone
		}
		h.done = make(chan struct{})
	}
	return h.done
}

// closedDone is the Done of a tenure that ended before anyone waited on it.
var closedDone = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Err says why the tenure ended; nil while it holds.
func (h *Held) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ended
}

// Changed receives a signal when a re-read brings a new generation of the
// session (new ws_url or headers) after the first call, which makes it; a
// waiter compares Generation once it has it, for what came before.
func (h *Held) Changed() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.changed == nil {
		h.changed = make(chan struct{}, 1)
	}
	return h.changed
}

// Generation is the generation of the item installed last.
func (h *Held) Generation() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.item.Generation
}

// Observe records that seq was delivered; the next checkpoint writes the
// highest observed seq.
func (h *Held) Observe(seq int64) {
	h.mu.Lock()
	if seq > h.lastSeq {
		h.lastSeq = seq
	}
	h.mu.Unlock()
}

// LastSeq is the highest delivered (observed) sequence number.
func (h *Held) LastSeq() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastSeq
}

// Checkpointed is the highest sequence number stored by a checkpoint.
func (h *Held) Checkpointed() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stored
}

// end finishes the tenure with err (first reason wins) and closes Done.
// It reports whether this call ended it.
func (h *Held) end(err error) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.endLocked(err)
}

func (h *Held) endLocked(err error) bool {
	if h.ended != nil {
		return false
	}
	h.ended = err
	h.over.Store(true)
	if h.done != nil {
		close(h.done)
	}
	return true
}

// SetItem installs a fresh read of the session item (the owner re-read it
// after a mailbox entry or an audit), signalling Changed on a new generation
// and asking Config.Periodic again for it.
func (h *Held) SetItem(it Item) {
	now := h.env.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if it.Generation != h.item.Generation {
		// Asked only of a new generation: the answer follows the spec.
		periodic := h.env.periodic(it)
		if periodic && !h.periodic {
			// Due from now on, at the scan's next look at this tenure
			// (within an interval).
			h.nextCkpt = now
		}
		h.periodic = periodic
		if h.changed != nil {
			select {
			case h.changed <- struct{}{}:
			default:
			}
		}
	}
	// The read's checkpoint may lag this tenure's own; keep ours.
	it.LastSeq = h.stored
	h.item = it
}

// checkpointDue reports whether a periodic checkpoint should be sent now,
// and marks it in flight; never while the session gets none.
func (h *Held) checkpointDue(now time.Time) (int64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended != nil || h.ckptBusy || now.Before(h.nextCkpt) {
		return 0, false
	}
	if !h.periodic {
		h.nextCkpt = now.Add(h.every) // looked at again in an interval (SetItem may turn them on)
		return 0, false
	}
	if h.lastSeq <= h.stored {
		return 0, false
	}
	h.ckptBusy = true
	return h.lastSeq, true
}

// checkpointDone records a checkpoint attempt of seq.
func (h *Held) checkpointDone(seq int64, err error, next time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ckptBusy = false
	if err == nil && seq > h.stored {
		h.stored = seq
	}
	h.nextCkpt = next
}

// anchored records the anchor (Keeper.Anchor) seq landed: it is the
// session's checkpoint and the highest the next one may start from, and the
// periodic checkpoints follow it at next.
func (h *Held) anchored(seq int64, next time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stored = max(h.stored, seq)
	h.lastSeq = max(h.lastSeq, seq)
	h.nextCkpt = next
}

// throttledFirst notes a throttled checkpoint and returns how many in a row
// the tenure had while its session has no checkpoint (0: it has one).
func (h *Held) throttledFirst() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stored != NoSeq {
		return 0
	}
	h.firstThrottled++
	return int(h.firstThrottled)
}

// checkpointAt is when the next periodic checkpoint is due.
func (h *Held) checkpointAt() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nextCkpt
}
