// Package claim owns how a worker finds sessions to own: the SQS consumer
// (the fast path: a start notification is tried at once) and the reconciler
// (the safety net: sessions without owner whose notification was lost, and
// the sessions of workers that died or left; a pass runs every interval and
// at once when this worker declares another dead). Both call a Claimer,
// which owns admission (capacity and the claims-per-second limit).
package claim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/draw"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/backoff"
)

// Outcome is the result of one claim attempt.
type Outcome int

// Outcomes.
const (
	Acquired      Outcome = iota + 1 // the lease is ours now
	OwnedHere                        // this worker already holds it
	HeldElsewhere                    // a live lease of another worker
	Reserved                         // reserved for another worker (err: *ReservedUntil)
	NotStarted                       // stopped, or no such session
	AtCapacity                       // no free slot
	Draining                         // the worker is shutting down
	Failed                           // a transient error; may be retried
)

var outcomeNames = map[Outcome]string{
	Acquired: "acquired", OwnedHere: "owned_here", HeldElsewhere: "held_elsewhere", NotStarted: "not_started",
	AtCapacity: "at_capacity", Draining: "draining", Failed: "failed", Reserved: "reserved",
}

// ReservedUntil is a Reserved claim's error: the session is reserved for
// another worker for After more (a directed hand-off's reservation, until
// it lapses; Err says for whom).
type ReservedUntil struct {
	After time.Duration
	Err   error
}

func (e *ReservedUntil) Error() string { return fmt.Sprintf("%v (for %s more)", e.Err, e.After) }

func (e *ReservedUntil) Unwrap() error { return e.Err }

// reservedMargin is how long after a reservation's lapse a start
// notification handed back for it becomes visible again.
const reservedMargin = 100 * time.Millisecond

func (o Outcome) String() string { return outcomeNames[o] }

// Claimer claims sessions (the worker implements it).
type Claimer interface {
	// Claim tries to acquire id and start its session, taking it over from
	// prev when the reconciler found it owned by a worker that is not alive,
	// or a start notification named the tenure of a dead or departed owner
	// (its announcer's: the claimer reads that owner not alive itself
	// before it names it); nil otherwise. sentAtMs is the notification's sent_at_ms (0 when
	// reconciling).
	Claim(ctx context.Context, id string, prev *lease.Token, sentAtMs int64) (Outcome, error)
	// Free is the number of sessions the worker may still claim.
	Free() int
	// StopHint handles a stop notification (the table is checked first).
	StopHint(ctx context.Context, id string)
}

// Consumer long-polls the work queue and claims what it is told to.
type Consumer struct {
	Queue   notify.Consumer
	Claimer Claimer
	Log     zerolog.Logger
	// FullWait: when at capacity, poll for one message at most this often
	// (or as soon as a slot frees), so full workers leave start
	// notifications to others. Default 1 s.
	FullWait time.Duration
	// Freed receives a signal when a slot frees (optional).
	Freed <-chan struct{}
	// Stop, when closed, ends Run after the receive in flight has been
	// handled. Cancelling Run's context instead abandons that receive; but
	// a long poll cancelled on the client side may still take a message on
	// the server (which then stays invisible for the visibility timeout):
	// a draining worker would swallow the hand-off notifications it just
	// sent. So a graceful shutdown closes Stop, lets the poll finish (any
	// start it brings is handed back at once), and cancels only at its
	// deadline.
	Stop <-chan struct{}
	// Clock times the waits (nil: the real clock).
	Clock clock.Clock
	// Rand draws the receive retries' back-off (nil: the global source).
	Rand *draw.Stream

	lastOK atomic.Int64 // unix nanos of the last successful receive
	// startedAt: unix nanos of Run's start (Flowing).
	startedAt atomic.Int64
	// lastStart: unix nanos of the last receive that brought a start
	// notification (Flowing).
	lastStart atomic.Int64
	// lastAnnounced: unix nanos of the last receive that brought a start
	// naming the tenure a takeover or a leaver found (Announcing).
	lastAnnounced atomic.Int64
	lastErr       atomic.Pointer[error]
}

// Run consumes until ctx is done.
func (c *Consumer) Run(ctx context.Context) error {
	if c.FullWait <= 0 {
		c.FullWait = time.Second
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	c.startedAt.CompareAndSwap(0, c.Clock.Now().UnixNano())
	retry := backoff.Policy{Base: 200 * time.Millisecond, Max: 10 * time.Second}
	failures := 0
	for ctx.Err() == nil && !c.stopped() {
		free := c.Claimer.Free()
		if free <= 0 {
			t := c.Clock.NewTimer(c.FullWait)
			select {
			case <-ctx.Done():
			case <-c.Stop:
			case <-c.Freed:
			case <-t.C():
			}
			t.Stop()
			if ctx.Err() != nil || c.stopped() {
				return nil
			}
			free = max(c.Claimer.Free(), 1)
		}
		msgs, err := c.Queue.Receive(ctx, min(free, 10))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			c.lastErr.Store(&err)
			d := retry.Next(failures, c.Rand)
			if failures == 0 {
				c.Log.Warn().Err(err).Dur("retry_in", d).Msg("work queue receive")
			}
			failures++
			sleep(ctx, c.Clock, d)
			continue
		}
		if failures > 0 {
			c.Log.Info().Int("failures", failures).Msg("work queue reachable again")
		}
		failures = 0
		c.lastErr.Store(nil)
		c.lastOK.Store(c.Clock.Now().UnixNano())
		c.noteStarts(msgs)
		// Handled concurrently; the handled messages are deleted together
		// (one DeleteMessageBatch per ten) before the next receive.
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			done []notify.Message
		)
		for _, m := range msgs {
			wg.Go(func() {
				if c.handle(ctx, m) {
					mu.Lock()
					done = append(done, m)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		c.deleteHandled(ctx, done)
	}
	return nil
}

// handBack makes m visible again on the work queue after after (0: at
// once), for any consumer to claim; even while the worker drains.
func (c *Consumer) handBack(ctx context.Context, log zerolog.Logger, m notify.Message, after time.Duration) {
	ackCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := c.Queue.Requeue(ackCtx, m, after); err != nil {
		log.Warn().Err(err).Msg("work queue hand-back")
	}
}

// deleteHandled acknowledges the handled messages of one receive.
func (c *Consumer) deleteHandled(ctx context.Context, ms []notify.Message) {
	if len(ms) == 0 {
		return
	}
	// Acknowledgements must happen even while the worker drains.
	ackCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := c.Queue.Delete(ackCtx, ms...); err != nil {
		// Redelivered after the visibility timeout: a start is then owned
		// here or elsewhere (acknowledged again), a stop re-checked.
		c.Log.Warn().Err(err).Int("messages", len(ms)).Msg("work queue acknowledgement")
	}
}

func (c *Consumer) stopped() bool {
	select {
	case <-c.Stop:
		return true
	default:
		return false
	}
}

// Flowing reports whether a receive within the last d brought a start
// notification: the work queue is bringing this worker sessions to claim
// (a takeover's announcements among them). Until its first receive is
// answered (for at most d after Run began) a consumer cannot tell a quiet
// queue from one whose first start is on its way, and says flowing; a
// quiet queue answers the first receive empty within its long poll
// (WSFLEET_QUEUE_WAIT).
//
// What it does not count: the starts of the receive being handled, whose
// claims wait in the worker's claim pace behind a takeover's told parts
// (the next receive waits for them). In the fleet simulator's AZ loss at
// 100 × 100,000, survivors whose last receive was more than 30 s old
// listed the dead workers' sessions and lost 5,235 of 5,884 of those
// claims to the queue's consumers and the receivers; counting the handling
// as flowing removed those claims but slowed the recovery's second half
// (p99 122.4 → 135.6 s, one run each), so it is not done.
func (c *Consumer) Flowing(d time.Duration) bool {
	now := c.clock().Now()
	if at := c.lastStart.Load(); at != 0 && now.Sub(time.Unix(0, at)) < d {
		return true
	}
	if c.lastOK.Load() != 0 {
		return false
	}
	started := c.startedAt.Load()
	return started == 0 || now.Sub(time.Unix(0, started)) < d
}

// ReceivedStart reports whether any receive has brought a start
// notification.
func (c *Consumer) ReceivedStart() bool { return c.lastStart.Load() != 0 }

// Announcing reports whether a receive within the last d brought a start
// that names the tenure a takeover or a leaver found (its prev_owner): the
// announcements of a death or a departure are still being taken.
func (c *Consumer) Announcing(d time.Duration) bool {
	at := c.lastAnnounced.Load()
	return at != 0 && c.clock().Now().Sub(time.Unix(0, at)) < d
}

// noteStarts records when a receive brought a start (Flowing) and an
// announced tenure (Announcing).
func (c *Consumer) noteStarts(msgs []notify.Message) {
	now := c.Clock.Now().UnixNano()
	for _, m := range msgs {
		if m.Err != nil || m.Notification.Type != schema.NotifyStart {
			continue
		}
		c.lastStart.Store(now)
		if m.Notification.PrevOwner != "" {
			c.lastAnnounced.Store(now)
			return
		}
	}
}

func (c *Consumer) clock() clock.Clock {
	if c.Clock == nil {
		return clock.Real{}
	}
	return c.Clock
}

// Healthy reports an error when the last receive failed.
func (c *Consumer) Healthy() error {
	if p := c.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// handle acts on one message and reports whether it is done with (to be
// deleted); a start handed back is requeued here, a failed claim left to
// reappear after the visibility timeout.
func (c *Consumer) handle(ctx context.Context, m notify.Message) (del bool) {
	log := c.Log.With().Str("message_id", m.MessageID).Logger()
	if m.Err != nil {
		log.Warn().Err(m.Err).Int("receive_count", m.ReceiveCount).Msg("malformed notification deleted")
		return true
	}
	n := m.Notification
	log = log.With().Str("connection_id", n.ConnectionID).Str("type", n.Type).Logger()
	switch n.Type {
	case schema.NotifyStop:
		c.Claimer.StopHint(ctx, n.ConnectionID)
		return true
	case schema.NotifyStart:
		var prev *lease.Token
		if n.PrevOwner != "" {
			// The tenure a takeover or a leaver found it in: the claimer
			// names it once it reads that owner not alive.
			prev = &lease.Token{ConnectionID: n.ConnectionID, Owner: n.PrevOwner, Epoch: n.PrevEpoch}
		}
		out, err := c.Claimer.Claim(ctx, n.ConnectionID, prev, n.SentAtMs)
		switch out {
		case Acquired, OwnedHere, HeldElsewhere, NotStarted:
			log.Debug().Stringer("outcome", out).Msg("start notification handled")
			return true
		case Reserved:
			// A directed hand-off reserved it for another worker and
			// published this notification because that worker could not
			// be told (or the notification is older than the hand-off):
			// handed back until the reservation lapses, when any worker
			// may take it. Deleted, it would wait for a reconcile pass
			// after the lapse.
			var ru *ReservedUntil
			if !errors.As(err, &ru) {
				return true
			}
			log.Debug().Stringer("outcome", out).Dur("after", ru.After).Msg("start notification handed back until the reservation lapses")
			c.handBack(ctx, log, m, ru.After+reservedMargin)
		case AtCapacity, Draining:
			log.Debug().Stringer("outcome", out).Msg("start notification handed back")
			// Requeued at once, even while the worker drains.
			c.handBack(ctx, log, m, 0)
		default:
			if timedOut(ctx, out, err) {
				// A store request that outlived its deadline (not a
				// throttle): handed back at once for any consumer to claim,
				// not left for the visibility timeout (30 s). If the
				// acquire did apply, the claim finds the session held (this
				// worker's audit takes it back). In the fleet simulator's
				// AZ loss at 1,000 × 1,000,000, 909 claims from the queue
				// failed, each such session dark 30 s longer.
				log.Warn().Err(err).Int("receive_count", m.ReceiveCount).Msg("claim timed out: handed back")
				c.handBack(ctx, log, m, 0)
				return false
			}
			// Left invisible: the queue redelivers it after its visibility
			// timeout (and dead-letters it after maxReceiveCount), which
			// spaces the claims of a throttled table.
			log.Warn().Err(err).Int("receive_count", m.ReceiveCount).Msg("claim")
		}
	}
	return false
}

func sleep(ctx context.Context, clk clock.Clock, d time.Duration) {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C():
	}
}

// Lister is what the reconciler reads (the lease Keeper implements it).
type Lister interface {
	Orphans(ctx context.Context, limit int) ([]lease.Candidate, error)
	Holds(id string) bool
	// MayClaim says whether this worker tries a candidate of its listing
	// (an unowned session not while lease.Config.UnownedGrace leaves it to
	// the fast path; lease.MayClaimUnowned: on the first sight past it,
	// only the first few workers by rendezvous hashing do).
	MayClaim(c lease.Candidate) bool
}

// FastPathGrace is the lease.Config.UnownedGrace of a worker that consumes
// the work queue and reconciles every every: half an interval. A reconcile
// pass then leaves a session its listing shows unowned for the first time
// to the start notification (normally taken within milliseconds), and the
// next pass (at least 1 - Jitter = 0.8 intervals later) tries it: a lost
// notification costs one pass more, and no pass races a fast path that is
// about to acquire a session just started.
func FastPathGrace(every time.Duration) time.Duration { return every / 2 }

// TakeoverGraceMax is the lease.Config.GoneGraceMax of a worker that
// consumes the work queue: while the queue brings it announced tenures
// (Consumer.Announcing within FlowingWithin), the grace lasts up to 5
// minutes. Measured by the fleet simulator (az at 1,000 × 1,000,000): the
// lost AZ's 334,021 sessions were taken over the recovery's 196 s, past
// TakeoverGrace, and the reconcile passes after it listed the dead workers'
// sessions while the queue's consumers took them (152,633 refused claims,
// 0.46 a session). The cost: a gone worker whose takeover announced
// nothing (its declarer died first) while other deaths' announcements
// flow waits up to this long for a reconcile pass.
const TakeoverGraceMax = 5 * time.Minute

// TakeoverGrace is the lease.Config.GoneGrace of a worker that consumes the
// work queue: for 2 minutes after it first knows a worker gone, while the
// queue brings it start notifications (Consumer.Flowing within
// FlowingWithin), its reconcile passes leave that worker's sessions to the
// takeover, which
// tells receivers their parts and announces the rest on the queue (a
// receiver that cannot take its part announces it too); then any pass
// claims what is left. Measured by the fleet simulator (az at 100 ×
// 100,000, budget 346 claims/s): every pass listing the dead workers'
// sessions while the queue's consumers and the receivers took them lost
// three of four of its claims, a third of the fleet's claim budget in the
// recovery's second half; leaving them to the takeover while the queue
// flows, the lost AZ's sessions delivered again p50 / p99 / max 60.2 /
// 123.9 / 136.2 s instead of 57.1 / 138.6 / 144.1 s (59.3 / 111.3 / 119.5 s
// with the grace whatever the queue did, which left a death nobody
// announced to the grace's end). The cost: while the queue brings other starts,
// a session whose takeover was lost (its declarer died before announcing
// it) waits up to this long for a reconcile pass instead of one pass.
const TakeoverGrace = 2 * time.Minute

// FlowingWithin is how recently the work queue must have brought a start
// notification for TakeoverGrace to apply (lease.Config.Flowing): a pass's
// span of claims (ListSpan) and two reconcile intervals, since the
// consumer's claims wait in the same claim pace as a pass's. A quiet queue
// is announcing nobody's sessions, and a pass then lists a gone worker's
// at once.
func FlowingWithin(every time.Duration) time.Duration { return ListSpan + 2*every }

// Reconciler claims orphans (sessions without owner, and the sessions of
// workers that died or left) every Every (±Jitter), and at once after Kick.
type Reconciler struct {
	Lister  Lister
	Claimer Claimer
	Log     zerolog.Logger
	Every   time.Duration
	Jitter  float64 // fraction, default 0.2
	// Concurrency bounds claims in flight (default 8); the Claimer's rate
	// limit applies on top.
	Concurrency int
	// FastPathDown, when set and true, says the work queue's fast path is
	// not bringing start notifications (its last receive failed): a pass
	// then tries the sessions its listing shows unowned for the first time
	// at once instead of leaving them to the notification for
	// lease.Config.UnownedGrace (Candidate.Fresh).
	FastPathDown func() bool
	// ClaimRate, when set, is the claims per second this worker may send
	// now (its share of the fleet's claim budget, lower while the store
	// throttles): a pass lists at most what that rate claims in
	// ListSpan, so that it does not work through a listing older than
	// that (see listLimit).
	ClaimRate func() float64
	// OnOrphans is told how many candidates a pass found.
	OnOrphans func(n int)
	// OnPass runs at the start of every pass (the worker's audit of the
	// sessions the table says it owns).
	OnPass func(ctx context.Context)
	// Clock times the passes (nil: the real clock).
	Clock clock.Clock
	// Rand draws the passes' jitter and the candidates' order (nil: the
	// global source).
	Rand *draw.Stream

	kick   chan struct{}
	once   sync.Once
	passes atomic.Int64
}

// Passes is the number of passes run (tests).
func (r *Reconciler) Passes() int64 { return r.passes.Load() }

func (r *Reconciler) kicks() chan struct{} {
	r.once.Do(func() { r.kick = make(chan struct{}, 1) })
	return r.kick
}

// Kick runs a pass as soon as the one in progress (if any) ends: a worker
// was declared dead and its sessions are free to take.
func (r *Reconciler) Kick() {
	select {
	case r.kicks() <- struct{}{}:
	default:
	}
}

// Run reconciles until ctx is done; the first pass runs at once.
func (r *Reconciler) Run(ctx context.Context) error {
	if r.Jitter <= 0 {
		r.Jitter = 0.2
	}
	if r.Concurrency <= 0 {
		r.Concurrency = 8
	}
	if r.Clock == nil {
		r.Clock = clock.Real{}
	}
	kick := r.kicks()
	t := r.Clock.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		case <-kick:
			t.Stop() // drains C too (Go 1.23 timers, and the Fake's)
		}
		r.pass(ctx)
		t.Reset(time.Duration(float64(r.Every) * (1 + r.Jitter*(2*r.Rand.Float64()-1))))
	}
}

func (r *Reconciler) pass(ctx context.Context) {
	r.passes.Add(1)
	if r.OnPass != nil {
		r.OnPass(ctx)
	}
	free := r.Claimer.Free()
	if free <= 0 {
		return
	}
	start := r.clock().Now()
	cands, err := r.Lister.Orphans(ctx, r.listLimit(free))
	if err != nil && ctx.Err() == nil {
		r.Log.Warn().Err(err).Msg("reconcile: list orphans")
	}
	if r.OnOrphans != nil {
		r.OnOrphans(len(cands))
	}
	listed := len(cands)
	down := r.FastPathDown != nil && r.FastPathDown()
	if down {
		// No start notification is on its way: nothing to leave the
		// fresh sessions to, and no grace to wait out before any worker
		// tries one: its first sighting is for the workers it ranks
		// first (MayClaimUnowned), the next for any. Counted from the
		// end of the grace, a session started during an SQS outage that
		// its ranked workers did not take (full, restarting, a listing
		// that missed it) waited three passes more: make chaos found one
		// acquired 4.0 s after its acknowledgement (bound 3.4 s).
		for i := range cands {
			cands[i].Fresh = false
			cands[i].Relisted = cands[i].Relisted || cands[i].Seen
		}
	}
	cands = slices.DeleteFunc(cands, func(c lease.Candidate) bool { return !r.Lister.MayClaim(c) })
	r.Rand.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	acquired, _ := r.ClaimAll(ctx, r.Claimer, cands)
	if len(cands) > 0 {
		// Only a pass that found work logs: none does while every
		// session has its owner.
		r.Log.Info().Int("listed", listed).Int("tried", len(cands)).Int("acquired", acquired).
			Bool("fast_path_down", down).Dur("took", r.clock().Now().Sub(start)).Msg("reconcile pass")
	}
}

// ListSpan is the longest a reconcile pass should take to claim what it
// listed, at the worker's claim rate (Reconciler.ClaimRate): the 1,000 a
// listing holds at most at the default 50 claims/s.
const ListSpan = 20 * time.Second

// listLimit is how many candidates a pass lists with free slots: twice the
// free slots (some are taken by others meanwhile), at least 10, at most
// 1,000, and at most what the claim rate claims in ListSpan. A candidate
// waits in the pass for its turn at the claim pace, and one whose turn
// comes long after the listing was most likely claimed by another worker
// meanwhile: its acquire is refused (a conditional write billed, and a
// read to classify it) and it took a claim slot. A worker with a share of
// a fleet budget (3.46 claims/s for each of 100 workers sharing 346/s)
// needs 289 s for a listing of 1,000. Measured by the fleet simulator
// (az at 100 × 100,000 with that budget, 17 virtual minutes): without
// this bound the ramp took 230 sessions a second of the 346 budgeted,
// with 2.95 acquires per session started (1.33 refused because another
// worker held the session), and the lost AZ's sessions delivered again
// p50 / p99 98.5 / 193.5 s; with it 346 a second, 2.37 (0.73), and
// 56.3 / 143.7 s.
//
// A rate of 0 (a worker that does not know its share yet: its first pass
// runs at its start, before its first listing of the alive workers) lists
// SpanLimit's least, not 1,000: the fleet simulator's AZ loss at 100 ×
// 100,000 (budget 346/s) found each of the 34 replacements listing ~1,000
// of the dead workers' sessions in its first pass and trying them at its
// share, 3.46 a second, for 230 s after every session was delivering
// again: 117 refused claims a second, a third of the fleet's budget, from
// the middle of the recovery on.
func (r *Reconciler) listLimit(free int) int {
	limit := min(max(2*free, 10), 1000)
	if r.ClaimRate != nil {
		limit = min(limit, SpanLimit(r.ClaimRate()))
	}
	return limit
}

// SpanLimit is how many candidates a worker claiming at rate (claims per
// second) should line up at once: what it claims in ListSpan, at least 10
// (also for a rate of 0 or less: not known yet).
func SpanLimit(rate float64) int {
	return max(10, int(math.Ceil(max(rate, 0)*ListSpan.Seconds())))
}

// claimRetryAfter is how long after a claim whose store request timed out
// the reconciler tries it again, once, in the same pass.
const claimRetryAfter = 200 * time.Millisecond

// timedOut reports whether a claim failed because a store request outlived
// its deadline while the pass (or the consumer) goes on (not a throttle:
// the claim pacer spaces those).
func timedOut(ctx context.Context, out Outcome, err error) bool {
	return out == Failed && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, lease.ErrThrottled)
}

func (r *Reconciler) clock() clock.Clock {
	if r.Clock == nil {
		return clock.Real{}
	}
	return r.Clock
}

// ClaimAll claims cands through by (up to its free capacity), Concurrency
// at a time, and returns how many it acquired and how many it left
// unplaced: claims that failed (a throttled or unreachable table) and
// candidates it did not try (full, or ctx done). A pass claims through
// r.Claimer; a caller with claims of its own (a takeover's own part)
// passes the Claimer that names them.
func (r *Reconciler) ClaimAll(ctx context.Context, by Claimer, cands []lease.Candidate) (acquiredN, unplaced int) {
	if r.Concurrency <= 0 {
		r.Concurrency = 8
	}
	var (
		g        errgroup.Group
		acquired atomic.Int64
		failed   atomic.Int64
	)
	g.SetLimit(r.Concurrency)
	for i, c := range cands {
		if ctx.Err() != nil || by.Free() <= 0 {
			failed.Add(int64(len(cands) - i))
			break
		}
		if r.Lister.Holds(c.ConnectionID) {
			continue
		}
		g.Go(func() error {
			out, err := by.Claim(ctx, c.ConnectionID, c.Prev, 0)
			if timedOut(ctx, out, err) {
				// A store request that outlived its deadline (a latency
				// spike; it may even have applied: the acquire is
				// conditional, and one that landed is this worker's own
				// to take again): tried once more in this pass rather
				// than the next, which is a takeover's dark time.
				sleep(ctx, r.clock(), claimRetryAfter)
				if ctx.Err() == nil {
					out, err = by.Claim(ctx, c.ConnectionID, c.Prev, 0)
				}
			}
			if out == Acquired {
				acquired.Add(1)
			}
			if out == Failed {
				failed.Add(1)
			}
			if out == Failed && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
				r.Log.Warn().Err(err).Str("connection_id", c.ConnectionID).Msg("reconcile: claim")
			} else {
				r.Log.Debug().Str("connection_id", c.ConnectionID).Stringer("outcome", out).Msg("reconcile: claim")
			}
			return nil
		})
	}
	_ = g.Wait()
	return int(acquired.Load()), int(failed.Load())
}
