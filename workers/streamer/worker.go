// Package streamer is the wsfleet worker as a library: it registers a
// worker record and heartbeats it, claims WebSocket sessions from the table
// (via start notifications and reconciliation), owns each with exactly one
// owner (fenced by the worker's liveness and the session's epoch), streams
// its messages to a sink.Handler in sequence order, checkpoints the last
// delivered sequence number, watches other workers and takes over the
// sessions of dead ones, and hands every session off on shutdown.
//
// The cmd/streamer binary wires it to DynamoDB, SQS and the sink the
// environment names (package envconfig reads the settings, sink/registry
// builds the sink); run your own handler with:
//
//	w, err := streamer.New(cfg, streamer.Deps{Store: store, Queue: queue, Handler: myHandler})
//	...
//	err = w.Run(ctx) // until ctx is cancelled, then a graceful shutdown
package streamer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/draw"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/metrics"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/claim"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/session"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/waitfor"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// handoffSenders bounds the hand-off notification batches in flight.
const handoffSenders = 4

// WorkQueue is the work queue: start/stop notifications in, hand-off start
// notifications out (sqsnotify.Queue implements it).
type WorkQueue interface {
	notify.Consumer
	notify.Publisher
}

// Deps are the worker's collaborators.
type Deps struct {
	// Store is the lease table (dynamostore.New, or memstore for tests and
	// benchmarks). Required.
	Store lease.Store
	// Queue is the work queue. Optional: without it the worker claims by
	// reconciliation only and cannot announce a hand-off (the next owner
	// then finds the released lease at its next reconcile pass).
	Queue WorkQueue
	// Handler receives the messages. Required.
	Handler sink.Handler
	// Logger defaults to JSON lines on stderr at Config.LogLevel
	// (shared/logging, service streamer).
	Logger *zerolog.Logger
	// Metrics receives the EMF lines; default stderr.
	Metrics io.Writer
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Ready is an extra /readyz check (optional).
	Ready func(ctx context.Context) error
	// Secrets resolves the {{secret:NAME}} references of a session's
	// headers and open messages at every dial, first connect and
	// reconnects alike. cmd/streamer gives the Secrets Manager resolver
	// (cached for Config.SecretCacheTTL); a program embedding the worker
	// may supply any SecretProvider instead (a vault, a file, a token
	// minted per connection: it is asked at each dial, and owns its
	// caching). An error wrapping ErrSecretPermanent fails the session at
	// once, any other is a failed connect, retried. nil: a session with a
	// reference fails at its dial ("no secret provider configured").
	Secrets SecretProvider
	// Rand is the worker's randomness (jitters, the reconciler's shuffle,
	// back-off delays): each component draws from its own stream of it
	// (shared/draw), so that a seed replays the draws (the fleet
	// simulator). nil: math/rand/v2's global source, random in every
	// process (cmd/streamer).
	Rand *draw.Source
}

type state int32

const (
	stateNew state = iota
	stateRunning
	stateDraining
	stateStopped
)

func (s state) String() string {
	return [...]string{"new", "running", "draining", "stopped"}[s]
}

// Worker owns sessions. Create it with New and call Run once.
type Worker struct {
	cfg    Config
	deps   Deps
	log    zerolog.Logger
	keeper *lease.Keeper
	// fleetReads counts the rebalancing rounds that read every alive
	// worker's record because no fleet summary head was there.
	fleetReads atomic.Int64
	// handoffs publishes the start notifications of a drain (the queue,
	// behind a Coalescer when it sends batches).
	handoffs  notify.Publisher
	reg       *metrics.Registry
	counters  session.Counters
	env       *session.Env
	pacer     *claimPacer
	handoffIn handoffGate // bounds POST /handoff
	// partToldAt: unix nanos (the worker's clock) of the last takeover's
	// part a declarer told this worker (partsFlowing).
	partToldAt atomic.Int64
	// handoffRnd jitters a directed hand-off's retries (Deps.Rand's
	// "handoff").
	handoffRnd *draw.Stream
	consumer   *claim.Consumer
	recon      *claim.Reconciler
	started    time.Time

	mu       sync.Mutex
	sessions map[string]*session.Session
	// sessionsGen counts the changes of sessions (the control loop's list).
	sessionsGen uint64
	claiming    map[string]bool
	state       state
	freed       chan struct{}
	idle        chan struct{} // signalled when a session or a claim ends
	// claimMail are the mailbox entries that came for an id while it was
	// being claimed (keptForClaim), re-read once its claim returns.
	claimMail map[string][]string

	// ph are the shutdown's phases (routines.go): every goroutine of the
	// Worker runs in one of their groups. hardCtx is the deadline's context
	// (made in New, for calls before Run too): the sessions and tasks
	// phases run on it, and it is cancelled at the shutdown deadline.
	ph         phases
	hardCtx    context.Context
	hardCancel context.CancelFunc
	// abandoned: the shutdown deadline passed; every session still open is
	// left for the takeover instead of released.
	abandoned atomic.Bool
	// hbFailing: the last heartbeat failed (logged once per run of
	// failures, not once per second).
	hbFailing atomic.Bool
	// leftFenced: a session was closed while the worker was fenced and left
	// in the table under this worker's name; the first heartbeat that
	// succeeds after it runs an audit at once, which claims it back,
	// instead of leaving it dark until the next reconcile pass.
	leftFenced   atomic.Bool
	consumerStop chan struct{}
	adminAddr    atomic.Pointer[string]
	// advertiseAddr is the admin address other workers reach this one at
	// (a rebalancing move's receiver), in its record.
	advertiseAddr atomic.Pointer[string]
	ran           atomic.Bool
	stats         runStats // cumulative counts for /stats
	rebal         rebalancer
	table         tableHealth
	store         lease.Store // deps.Store, recording every outcome in table
	// adminLn, when set (the fleet simulator's seam, fleetsim.go), is the
	// admin server's listener instead of one on Config.AdminAddr.
	adminLn net.Listener
	// Hot standby (standby.go, standbyowner.go). standbys are the ones this
	// worker holds for other owners' sessions (under mu; each takes one of
	// MaxSessions' slots); alignFP the fingerprint a directed hand-off's
	// sender named for a session (its last delivered message: where the
	// standby's window goes on), kept until its claim (under mu).
	standbys   map[string]*standbyHeld
	alignFP    map[string]uint64
	standbyRnd *draw.Stream
	// ownStandbys are the standbys of the sessions this worker owns, as it
	// placed or found them (under sbMu).
	sbMu        sync.Mutex
	ownStandbys map[string]*ownerStandby
	// placeNow wakes standbyOwnerLoop before its next pass: a session
	// acquired without a standby (a promotion consumed it) gets one at once.
	placeNow chan struct{}
	// standbyPasses counts standbyOwnerLoop's passes.
	standbyPasses atomic.Int64
}

// ID is the worker id (the lease owner).
func (w *Worker) ID() string { return w.cfg.WorkerID }

// AdminAddr is the admin server's address once Run has bound it ("" before,
// or when disabled).
func (w *Worker) AdminAddr() string {
	if p := w.adminAddr.Load(); p != nil {
		return *p
	}
	return ""
}

// Run starts claiming and runs until ctx is cancelled, then shuts down
// gracefully within Config.ShutdownDeadline: it stops claiming, closes every
// session with status 1001, flushes the sink, releases each lease with its
// final checkpoint and publishes a start notification per released session
// so that another worker claims it at once. It returns nil after a clean
// shutdown.
func (w *Worker) Run(ctx context.Context) error {
	if !w.ran.CompareAndSwap(false, true) {
		return errors.New("streamer: Run called twice")
	}
	ph := &w.ph
	ph.sessions = phase{name: "sessions", ctx: w.hardCtx, cancel: w.hardCancel}
	ph.tasks = phase{name: "tasks", ctx: w.hardCtx, cancel: w.hardCancel}
	ph.sink.begin("sink", context.Background())
	ph.admin.begin("admin", context.Background())
	// The last phases end when Run returns, whichever way: the sink stops,
	// every call still in flight is cancelled, then Run waits for the sink,
	// the admin server and the tasks.
	defer func() {
		ph.sink.cancel()
		ph.tasks.cancel()
		ph.admin.cancel()
		ph.sink.Close()
		ph.end(&ph.sink)
		ph.tasks.Close()
		ph.end(&ph.tasks)
	}()
	w.started = w.deps.Clock.Now()
	// A sink that runs in the background (the batcher) is the Worker's: it
	// runs from before the first claim until the sessions have flushed,
	// released and their requests ended, then stops with Run.
	if r, ok := w.deps.Handler.(runner); ok {
		ph.sink.Go(func() { r.Run(ph.sink.ctx) })
	}
	// The admin address is known before the record is written: other
	// workers read it there to hand sessions to this one.
	var admin *http.Server
	if ln := w.adminLn; ln != nil || w.cfg.AdminAddr != "" {
		if ln == nil {
			var err error
			if ln, err = net.Listen("tcp", w.cfg.AdminAddr); err != nil {
				return fmt.Errorf("admin listen %s: %w", w.cfg.AdminAddr, err)
			}
		}
		addr := ln.Addr().String()
		w.adminAddr.Store(&addr)
		adv := advertised(addr, w.cfg.AdvertiseAddr)
		w.advertiseAddr.Store(&adv)
		admin = &http.Server{Handler: w.AdminHandler(), ReadHeaderTimeout: 5 * time.Second,
			BaseContext: func(net.Listener) context.Context { return ph.admin.ctx }}
		ph.admin.Go(func() { _ = admin.Serve(ln) }) // ends with admin.Shutdown below
	}
	if err := w.register(ctx); err != nil {
		if admin != nil {
			_ = admin.Close()
			ph.admin.Close()
			ph.end(&ph.admin)
		}
		if ctx.Err() != nil { // cancelled before it registered: nothing to hand off
			w.setState(stateStopped)
			w.log.Info().Msg("worker stopped")
			return nil
		}
		return err
	}

	// A worker declared dead shuts down at once (its sessions are already
	// fenced and taken over elsewhere); Run then returns why.
	ctx, die := context.WithCancelCause(ctx)
	defer die(nil)
	// The keeper and the control loop outlive ctx: they keep heartbeating
	// and supervising while sessions close and release.
	ph.background.begin("background", context.WithoutCancel(ctx))
	ph.background.Go(func() {
		if err := w.keeper.Run(ph.background.ctx); err != nil {
			w.log.Error().Err(err).Msg("worker declared dead: shutting down without releasing")
			w.abandoned.Store(true)
			die(err)
		}
	})
	ph.background.Go(func() { w.controlLoop(ph.background.ctx) })
	ph.background.Go(func() { w.metricsLoop(ph.background.ctx) })
	ph.background.Go(func() { w.standbyCheckLoop(ph.background.ctx) })

	// The claim loops stop with ctx; the consumer stops gracefully (see
	// claim.Consumer.Stop) and is cancelled only at the deadline.
	ph.claim.begin("claim", ctx)
	ph.consume.begin("consume", context.WithoutCancel(ctx))
	// Running before the claim loops start: the reconciler's first pass
	// runs at once, and a worker not yet running has no free capacity
	// (Free), so that pass would claim nothing and the sessions it found
	// would wait a whole WSFLEET_RECONCILE_EVERY.
	w.setState(stateRunning)
	if w.consumer != nil {
		ph.consume.Go(func() { _ = w.consumer.Run(ph.consume.ctx) })
	}
	ph.claim.Go(func() { _ = w.recon.Run(ph.claim.ctx) })
	ph.claim.Go(func() { w.rebalanceLoop(ph.claim.ctx) })
	ph.claim.Go(func() { w.standbyOwnerLoop(ph.claim.ctx) })
	w.log.Info().Int("max_sessions", w.cfg.MaxSessions).Dur("lease_ttl", w.cfg.LeaseTTL).
		Bool("work_queue", w.consumer != nil).Str("admin_addr", w.AdminAddr()).Msg("worker started")

	<-ctx.Done()
	// Everything from here on ends by hardStop: the deadline is a bound on
	// the whole shutdown, whatever the engines or a sink do. It is an
	// instant on the worker's clock: a context bound by it takes the time
	// left on that clock (WithTimeout), not the instant (WithDeadline reads
	// the system clock, which an offset clock is not).
	hardStop := w.deps.Clock.Now().Add(w.cfg.ShutdownDeadline)
	// The claim, consume and handoff phases end in the drain.
	err := w.drain()
	ph.claim.cancel()
	ph.consume.cancel()
	ph.handoff.cancel()
	sessionsDone := waitUntil(w.deps.Clock, &ph.sessions.group, hardStop)
	if !sessionsDone {
		w.hardCancel()
		if sessionsDone = waitUntil(w.deps.Clock, &ph.sessions.group, w.deps.Clock.Now().Add(shutdownCleanup)); !sessionsDone {
			err = errors.Join(err, errors.New("sessions still running after the shutdown deadline (a sink call that ignores its context?)"))
		}
	}
	ph.end(&ph.sessions)
	// LEFT lets anyone take what is still ours at once: only when no
	// session can act any more (all ended, none abandoned mid-call) and no
	// sink request of theirs is still in flight (a session abandoned after
	// its flush timed out may have one, bounded by its trust deadline).
	if sessionsDone && !w.abandoned.Load() && w.sinkQuiet(hardStop) {
		lctx, cancel := context.WithTimeout(context.Background(), clock.Until(w.deps.Clock, later(hardStop, w.deps.Clock.Now().Add(shutdownCleanup))))
		if lerr := w.keeper.Leave(lctx); lerr != nil {
			w.log.Warn().Err(lerr).Msg("mark the worker LEFT (it will be declared dead after the TTL instead)")
		} else {
			w.announceLeftovers(lctx)
		}
		cancel()
	}
	ph.background.cancel()
	ph.background.Close()
	ph.end(&ph.background)
	w.setState(stateStopped)
	w.flushMetrics()
	if admin != nil {
		sctx, cancel := context.WithTimeout(context.Background(), clock.Until(w.deps.Clock, later(hardStop, w.deps.Clock.Now().Add(shutdownCleanup))))
		if admin.Shutdown(sctx) != nil {
			_ = admin.Close() // a request still in flight at the deadline is cut
		}
		cancel()
		ph.admin.Close()
		ph.end(&ph.admin)
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		err = errors.Join(err, cause)
	}
	switch {
	case err != nil:
		return err // the caller logs it (once)
	case w.abandoned.Load():
		w.log.Warn().Msg("worker stopped: sessions left for the takeover")
	default:
		w.log.Info().Msg("worker stopped")
	}
	return nil
}

// shutdownCleanup is how long the steps after the deadline (abandoned
// sessions unwinding, the admin server closing) may take at most.
const shutdownCleanup = 250 * time.Millisecond

// waitUntil waits for g until deadline on clk; false when the deadline
// came first.
func waitUntil(clk clock.Clock, g *group, deadline time.Time) bool {
	t := clk.NewTimer(clock.Until(clk, deadline))
	defer t.Stop()
	_, ok := waitfor.Until(g.Wait, t.C())
	return ok
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (w *Worker) setState(s state) {
	w.mu.Lock()
	w.state = s
	w.mu.Unlock()
}

// snapshot is the sessions by id: the order a drain hands them off in (and
// rebalancing's ties) follows from the sessions, not from a map's
// iteration, so that a seed replays it (the fleet simulator).
func (w *Worker) snapshot() []*session.Session {
	w.mu.Lock()
	out := make([]*session.Session, 0, len(w.sessions))
	for _, s := range w.sessions {
		out = append(out, s)
	}
	w.mu.Unlock()
	slices.SortFunc(out, func(a, b *session.Session) int { return cmp.Compare(a.ID(), b.ID()) })
	return out
}

// controlTick is how often the control loop runs every session's duties
// (new generation, ping due, lease ended).
const controlTick = 250 * time.Millisecond

// quiescer is a sink that can wait for its requests in flight (sink/batch).
type quiescer interface {
	Quiesce(ctx context.Context) error
}

// sinkQuiet waits, at most until hardStop or one sink request timeout
// (whichever is later), until the sink has no request in flight that a
// session of this worker could still have sent; false: leave the sessions
// to expire instead of marking the worker LEFT.
func (w *Worker) sinkQuiet(hardStop time.Time) bool {
	q, ok := w.deps.Handler.(quiescer)
	if !ok {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), clock.Until(w.deps.Clock, later(hardStop, w.deps.Clock.Now().Add(w.cfg.SinkRequestTimeout+shutdownCleanup))))
	defer cancel()
	if err := q.Quiesce(ctx); err != nil {
		w.log.Warn().Err(err).Msg("sink requests still in flight: not marking the worker LEFT (its sessions expire after the TTL instead)")
		return false
	}
	return true
}
