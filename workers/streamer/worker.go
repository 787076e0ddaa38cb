// Package streamer is the wsfleet worker as a library: it registers a
// worker record and heartbeats it, claims WebSocket sessions from the table
// (via start notifications and reconciliation), owns each with exactly one
// owner (fenced by the worker's liveness and the session's epoch), streams
// its messages to a sink.Handler in sequence order, checkpoints the last
// delivered sequence number, watches other workers and takes over the
// sessions of dead ones, and hands every session off on shutdown.
//
// The cmd/streamer binary wires it to DynamoDB, SQS and the stdout or SQS
// sink; run your own handler with:
//
//	w, err := streamer.New(cfg, streamer.Deps{Store: store, Queue: queue, Handler: myHandler})
//	...
//	err = w.Run(ctx) // until ctx is cancelled, then a graceful shutdown
package streamer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/metrics"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/claim"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/session"
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
	// Logger defaults to JSON lines on stderr at Config.LogLevel.
	Logger *zerolog.Logger
	// Metrics receives the EMF lines; default stderr.
	Metrics io.Writer
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Ready is an extra /readyz check (optional).
	Ready func(ctx context.Context) error
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
	// handoffs publishes the start notifications of a drain (the queue,
	// behind a Coalescer when it sends batches).
	handoffs notify.Publisher
	reg      *metrics.Registry
	counters session.Counters
	env      *session.Env
	limiter  *rate.Limiter
	consumer *claim.Consumer
	recon    *claim.Reconciler
	started  time.Time

	mu       sync.Mutex
	sessions map[string]*session.Session
	claiming map[string]bool
	state    state
	freed    chan struct{}
	idle     chan struct{} // signalled when a session or a claim ends

	sessWG     sync.WaitGroup
	hardCtx    context.Context
	hardCancel context.CancelFunc
	// abandoned: the shutdown deadline passed; every session still open is
	// left for the takeover instead of released.
	abandoned atomic.Bool
	// hbFailing: the last heartbeat failed (logged once per run of
	// failures, not once per second).
	hbFailing    atomic.Bool
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
}

// New validates cfg and builds a worker.
func New(cfg Config, deps Deps) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.Resolved()
	if deps.Store == nil || deps.Handler == nil {
		return nil, errors.New("streamer: Deps.Store and Deps.Handler are required")
	}
	if deps.Clock == nil {
		deps.Clock = clock.Real{}
	}
	if deps.Metrics == nil {
		deps.Metrics = os.Stderr
	}
	w := &Worker{
		cfg: cfg, deps: deps,
		sessions:     map[string]*session.Session{},
		claiming:     map[string]bool{},
		freed:        make(chan struct{}, 1),
		idle:         make(chan struct{}, 1),
		consumerStop: make(chan struct{}),
		limiter:      rate.NewLimiter(rate.Limit(cfg.ClaimsPerSecond), max(1, int(math.Ceil(cfg.ClaimsPerSecond)))),
		reg: metrics.NewRegistry(cfg.MetricsNamespace, map[string]string{
			schema.DimEnvironment: cfg.Environment, schema.DimService: schema.ServiceStreamer,
		}),
	}
	if deps.Logger != nil {
		w.log = *deps.Logger
	} else {
		w.log = NewLogger(os.Stderr, cfg.LogLevel)
	}
	w.log = w.log.With().Str("worker_id", cfg.WorkerID).Logger()
	w.store = healthStore{Store: deps.Store, health: &w.table, now: deps.Clock.Now}
	k, err := lease.NewKeeper(w.store, deps.Clock, cfg.LeaseConfig(), observer{w}, w.report)
	if err != nil {
		return nil, fmt.Errorf("streamer: %w", err)
	}
	w.keeper = k
	w.hardCtx, w.hardCancel = context.WithCancel(context.Background())
	w.rebal.client = &http.Client{Timeout: time.Second}
	w.env = &session.Env{
		Config:   cfg.sessionConfig(),
		Handler:  deps.Handler,
		Client:   session.NewClient(cfg.DialTimeout, cfg.AllowPrivateIPs, cfg.AllowedHosts),
		Log:      w.log,
		Counters: &w.counters,
		Dials:    session.NewDialGate(cfg.DialsPerHost),
		Opened:   w.opened,
		NoteError: func(ctx context.Context, h *lease.Held, reason string, at time.Time) error {
			return w.keeper.NoteError(ctx, h, reason, at)
		},
	}
	if deps.Queue != nil {
		w.consumer = &claim.Consumer{Queue: deps.Queue, Claimer: w, Log: w.log, Freed: w.freed, Stop: w.consumerStop}
		w.handoffs = deps.Queue
		if bp, ok := deps.Queue.(notify.BatchPublisher); ok {
			// A drain announces every session's hand-off at once: batched,
			// tens of requests instead of one per session.
			w.handoffs = notify.NewCoalescer(bp, notify.MaxBatch, handoffSenders)
		}
	}
	w.recon = &claim.Reconciler{
		Lister: k, Claimer: w, Log: w.log, Every: cfg.ReconcileEvery,
		OnOrphans: func(n int) {
			if n > 0 {
				w.reg.Add(schema.MetricOrphansSeen, float64(n))
			}
		},
		OnPass: w.audit,
	}
	return w, nil
}

// NewLogger returns the worker's JSON logger on out at level.
func NewLogger(out io.Writer, level string) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(strings.ToLower(level))
	if err != nil || lvl == zerolog.NoLevel {
		lvl = zerolog.InfoLevel
	}
	return zerolog.New(out).Level(lvl).With().Timestamp().Str("service", schema.ServiceStreamer).Logger()
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
	defer w.hardCancel()
	w.started = time.Now()
	// The admin address is known before the record is written: other
	// workers read it there to hand sessions to this one.
	var admin *http.Server
	if w.cfg.AdminAddr != "" {
		ln, err := net.Listen("tcp", w.cfg.AdminAddr)
		if err != nil {
			return fmt.Errorf("admin listen %s: %w", w.cfg.AdminAddr, err)
		}
		addr := ln.Addr().String()
		w.adminAddr.Store(&addr)
		adv := advertised(addr, w.cfg.AdvertiseAddr)
		w.advertiseAddr.Store(&adv)
		admin = &http.Server{Handler: w.AdminHandler(), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = admin.Serve(ln) }() // ends with admin.Shutdown below
	}
	if err := w.register(ctx); err != nil {
		if admin != nil {
			_ = admin.Close()
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
	bgCtx, bgCancel := context.WithCancel(context.WithoutCancel(ctx))
	var bg sync.WaitGroup
	bg.Go(func() {
		if err := w.keeper.Run(bgCtx); err != nil {
			w.log.Error().Err(err).Msg("worker declared dead: shutting down without releasing")
			w.abandoned.Store(true)
			die(err)
		}
	})
	bg.Go(func() { w.controlLoop(bgCtx) })
	bg.Go(func() { w.metricsLoop(bgCtx) })

	// The reconciler stops with ctx; the consumer stops gracefully (see
	// claim.Consumer.Stop) and is cancelled only at the deadline.
	reconCtx, reconCancel := context.WithCancel(ctx)
	consumerCtx, consumerCancel := context.WithCancel(context.WithoutCancel(ctx))
	var recon, consumer sync.WaitGroup
	if w.consumer != nil {
		consumer.Go(func() { _ = w.consumer.Run(consumerCtx) })
	}
	recon.Go(func() { _ = w.recon.Run(reconCtx) })
	recon.Go(func() { w.rebalanceLoop(reconCtx) })
	w.setState(stateRunning)
	w.log.Info().Int("max_sessions", w.cfg.MaxSessions).Dur("lease_ttl", w.cfg.LeaseTTL).
		Bool("work_queue", w.consumer != nil).Str("admin_addr", w.AdminAddr()).Msg("worker started")

	<-ctx.Done()
	// Everything from here on ends by hardStop: the deadline is a bound on
	// the whole shutdown, whatever the engines or a sink do.
	hardStop := time.Now().Add(w.cfg.ShutdownDeadline)
	err := w.drain(reconCancel, consumerCancel, &recon, &consumer)
	reconCancel()
	consumerCancel()
	sessionsDone := waitUntil(&w.sessWG, hardStop)
	if !sessionsDone {
		w.hardCancel()
		if sessionsDone = waitUntil(&w.sessWG, time.Now().Add(shutdownCleanup)); !sessionsDone {
			err = errors.Join(err, errors.New("sessions still running after the shutdown deadline (a sink call that ignores its context?)"))
		}
	}
	// LEFT lets anyone take what is still ours at once: only when no
	// session can act any more (all ended, none abandoned mid-call) and no
	// sink request of theirs is still in flight (a session abandoned after
	// its flush timed out may have one, bounded by its trust deadline).
	if sessionsDone && !w.abandoned.Load() && w.sinkQuiet(hardStop) {
		lctx, cancel := context.WithDeadline(context.Background(), later(hardStop, time.Now().Add(shutdownCleanup)))
		if lerr := w.keeper.Leave(lctx); lerr != nil {
			w.log.Warn().Err(lerr).Msg("mark the worker LEFT (it will be declared dead after the TTL instead)")
		}
		cancel()
	}
	bgCancel()
	bg.Wait()
	w.setState(stateStopped)
	w.flushMetrics()
	if admin != nil {
		sctx, cancel := context.WithDeadline(context.Background(), later(hardStop, time.Now().Add(shutdownCleanup)))
		if admin.Shutdown(sctx) != nil {
			_ = admin.Close() // a request still in flight at the deadline is cut
		}
		cancel()
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

// waitUntil waits for wg until deadline; false when the deadline came first.
func waitUntil(wg *sync.WaitGroup, deadline time.Time) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// drain is the graceful shutdown: stop claiming, close and release every
// session (each one announcing its hand-off), all within the deadline.
func (w *Worker) drain(reconCancel, consumerCancel context.CancelFunc, recon, consumer *sync.WaitGroup) error {
	deadline := time.NewTimer(w.cfg.ShutdownDeadline)
	defer deadline.Stop()
	w.setState(stateDraining) // claims from now on are refused (a start is handed back)
	reconCancel()
	close(w.consumerStop)
	ss := w.snapshot()
	moves, ferr := w.directMoves(w.cfg.WorkerID, len(ss))
	if ferr != nil {
		w.log.Warn().Err(ferr).Msg("shutdown: sessions released for anyone instead of handed to a receiver")
	}
	reasons := make([]error, len(ss))
	directed := 0
	for _, m := range moves {
		for k := 0; k < m.Count && directed < len(ss); k++ {
			reasons[directed] = session.MoveTo{To: m.To, Shutdown: true}
			directed++
		}
	}
	for i := directed; i < len(ss); i++ {
		reasons[i] = session.ErrShutdown
	}
	w.log.Info().Int("sessions", len(ss)).Int("directed", directed).Int("receivers", len(moves)).
		Int("in_flight", w.cfg.ShutdownInFlight).Dur("deadline", w.cfg.ShutdownDeadline).Msg("shutting down: handing sessions off")
	var paced sync.WaitGroup
	paced.Go(func() { w.paceHandoffs(ss, reasons, time.Now().Add(w.cfg.ShutdownDeadline/2)) })
	defer paced.Wait() // it ends once every session was interrupted
	recon.Wait()
	var err error
	// Sessions started by claims already in flight see stateDraining and
	// are handed off too; wait until no session and no claim is left.
	if !w.waitIdle(deadline.C) {
		left := w.snapshot()
		err = fmt.Errorf("shutdown deadline %s passed with %d sessions not released", w.cfg.ShutdownDeadline, len(left))
		w.log.Error().Int("sessions", len(left)).Msg("shutdown deadline passed: abandoning the remaining sessions")
		w.abandoned.Store(true)
		for _, s := range left {
			s.Interrupt(session.ErrCrashed)
		}
		w.hardCancel()
		consumerCancel()
	}
	// The consumer ends after its poll in flight (bounded by QueueWait).
	done := make(chan struct{})
	go func() { consumer.Wait(); close(done) }()
	select {
	case <-done:
	case <-deadline.C:
		consumerCancel()
		<-done
	}
	return err
}

// paceHandoffs ends the sessions ss, each with its reason, a few at a time:
// the others keep streaming until their turn, so each session is dark only
// for its own hand-off (close, flush, release, the receiver's claim)
// instead of for the queue of all of them at the table. How many at once
// is shutdownWidth: at least ShutdownInFlight, more when the hand-offs seen
// so far say the rest would not be done by a third of the deadline. At
// rushAt (half the deadline) whatever is left is ended at once.
func (w *Worker) paceHandoffs(ss []*session.Session, reasons []error, rushAt time.Time) {
	rush := time.NewTimer(time.Until(rushAt))
	defer rush.Stop()
	target := time.Now().Add(w.cfg.ShutdownDeadline / 3)
	done := make(chan time.Duration, len(ss)) // each hand-off's duration; never blocks
	var inFlight sync.WaitGroup
	defer inFlight.Wait()
	running := 0
	var avg time.Duration // moving average of the hand-offs' durations
	for i := 0; i < len(ss); {
		if running < shutdownWidth(len(ss)-i, avg, time.Until(target), w.cfg.ShutdownInFlight) {
			s, reason := ss[i], reasons[i]
			i++
			running++
			start := time.Now()
			s.Interrupt(reason)
			inFlight.Go(func() {
				select {
				case <-s.Finished():
				case <-w.hardCtx.Done():
				}
				done <- time.Since(start)
			})
			continue
		}
		select {
		case d := <-done:
			running--
			if avg == 0 {
				avg = d
			} else {
				avg = (3*avg + d) / 4
			}
		case <-rush.C:
			for j := i; j < len(ss); j++ {
				ss[j].Interrupt(reasons[j])
			}
			return
		}
	}
}

// shutdownWidth is how many hand-offs a shutdown keeps in flight with
// remaining sessions still to start, each taking about avg (0: none seen
// yet), and left until it should be done: enough to finish in time, never
// fewer than floor, everything once the time is up.
func shutdownWidth(remaining int, avg, left time.Duration, floor int) int {
	switch {
	case left <= 0:
		return remaining
	case avg <= 0:
		return max(1, floor)
	}
	need := int(math.Ceil(float64(remaining) * float64(avg) / float64(left)))
	return min(max(need, floor, 1), max(remaining, 1))
}

// waitIdle waits until the worker has no session and no claim in flight,
// or until deadline fires (false).
func (w *Worker) waitIdle(deadline <-chan time.Time) bool {
	for {
		w.mu.Lock()
		idle := len(w.sessions) == 0 && len(w.claiming) == 0
		w.mu.Unlock()
		if idle {
			return true
		}
		select {
		case <-w.idle:
		case <-deadline:
			return false
		}
	}
}

func (w *Worker) setState(s state) {
	w.mu.Lock()
	w.state = s
	w.mu.Unlock()
}

func (w *Worker) snapshot() []*session.Session {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*session.Session, 0, len(w.sessions))
	for _, s := range w.sessions {
		out = append(out, s)
	}
	return out
}

// Free implements claim.Claimer.
func (w *Worker) Free() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != stateRunning {
		return 0
	}
	return w.cfg.MaxSessions - len(w.sessions) - len(w.claiming)
}

// Claim implements claim.Claimer: admission (state, capacity, the claims
// per second limit), then the lease acquire, then the session.
func (w *Worker) Claim(ctx context.Context, id string, prev *lease.Token, sentAtMs int64) (claim.Outcome, error) {
	return w.claim(ctx, id, prev, sentAtMs, true)
}

// claim is Claim; paced false skips the claims-per-second limit, for a
// directed hand-off whose sender already paces its moves (a few in flight):
// the limit is there for the bursts nobody paces (a mass start, a takeover).
func (w *Worker) claim(ctx context.Context, id string, prev *lease.Token, sentAtMs int64, paced bool) (claim.Outcome, error) {
	w.mu.Lock()
	switch {
	case w.state != stateRunning:
		w.mu.Unlock()
		return claim.Draining, nil
	case w.sessions[id] != nil || w.claiming[id]:
		w.mu.Unlock()
		return claim.OwnedHere, nil
	case len(w.sessions)+len(w.claiming) >= w.cfg.MaxSessions:
		w.mu.Unlock()
		return claim.AtCapacity, nil
	}
	w.claiming[id] = true
	w.mu.Unlock()
	started := false
	defer func() {
		if !started {
			w.mu.Lock()
			delete(w.claiming, id)
			w.mu.Unlock()
			w.signalFreed()
		}
	}()
	if paced {
		if err := w.limiter.Wait(ctx); err != nil {
			return claim.Draining, fmt.Errorf("claim %s: admission: %w", id, err)
		}
	}
	h, err := w.keeper.Acquire(ctx, id, prev)
	switch {
	case err == nil:
	case errors.Is(err, lease.ErrHeld), errors.Is(err, lease.ErrLeaseLost):
		return claim.HeldElsewhere, nil
	case errors.Is(err, lease.ErrStopped), errors.Is(err, lease.ErrNotFound), errors.Is(err, lease.ErrFailed):
		return claim.NotStarted, nil
	case errors.Is(err, lease.ErrUntrusted), errors.Is(err, lease.ErrWorkerDead):
		return claim.Draining, nil
	default:
		return claim.Failed, err
	}
	w.reg.Add(schema.MetricAcquired, 1)
	started = true
	w.start(h, sentAtMs)
	return claim.Acquired, nil
}

func (w *Worker) signalFreed() {
	for _, ch := range []chan struct{}{w.freed, w.idle} {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (w *Worker) start(h *lease.Held, sentAtMs int64) {
	s := session.New(w.env, h, sentAtMs)
	w.mu.Lock()
	delete(w.claiming, h.ID())
	w.sessions[h.ID()] = s
	st := w.state
	w.sessWG.Add(1)
	w.mu.Unlock()
	switch {
	case w.abandoned.Load():
		s.Interrupt(session.ErrCrashed)
	case st != stateRunning:
		s.Interrupt(session.ErrShutdown)
	}
	s.Logger().Info().Int64("last_seq", s.LastSeq()).Msg("lease acquired")
	go w.runSession(s)
}

func (w *Worker) runSession(s *session.Session) {
	defer w.sessWG.Done()
	reason := s.Run(w.hardCtx)
	w.finish(s, reason)
	s.MarkFinished()
	w.mu.Lock()
	if w.sessions[s.ID()] == s {
		delete(w.sessions, s.ID())
	}
	w.mu.Unlock()
	w.signalFreed()
}

// finish ends a tenure after its session closed: release (with the final
// checkpoint) unless the lease is no longer ours or the worker abandoned it, and
// announce the hand-off after a graceful shutdown. A session whose source
// cannot be connected is not released but failed: the table records why,
// and no worker takes it until a new start.
func (w *Worker) finish(s *session.Session, reason error) {
	h := s.Held()
	log := s.Logger()
	switch {
	case w.abandoned.Load() || errors.Is(reason, session.ErrCrashed):
		w.keeper.Abandon(h)
		log.Warn().Int64("last_seq", s.LastSeq()).Msg("session abandoned (left for the takeover)")
		return
	case errors.Is(reason, lease.ErrLeaseLost), errors.Is(reason, lease.ErrNotFound), errors.Is(reason, lease.ErrReleased),
		errors.Is(reason, lease.ErrWorkerDead):
		log.Warn().Err(reason).Int64("last_seq", s.LastSeq()).Msg("lease lost: session closed")
		return
	case !w.keeper.Trusted():
		// Fenced: no write as owner. The session is taken over once this
		// worker is declared dead, or audited back if its heartbeat recovers.
		w.keeper.Abandon(h)
		log.Warn().Err(reason).Int64("last_seq", s.LastSeq()).Msg("session closed while fenced: left for the takeover")
		return
	}
	ctx, cancel := context.WithTimeout(w.hardCtx, w.cfg.StoreTimeout*2)
	defer cancel()
	t0 := time.Now()
	if err := sink.FlushSession(ctx, w.deps.Handler, h.ID()); err != nil {
		w.keeper.Abandon(h)
		log.Error().Err(err).Msg("sink flush: session left for the takeover instead of released")
		return
	}
	t1 := time.Now()
	if errors.Is(reason, session.ErrSourceFailed) || errors.Is(reason, session.ErrSinkRefused) {
		w.fail(ctx, s, reason)
		return
	}
	var move session.MoveTo
	if errors.As(reason, &move) {
		told, err := w.handOff(ctx, s, move)
		if err != nil {
			log.Warn().Err(err).Str("to", move.To).Int64("last_seq", s.LastSeq()).Bool("shutdown", move.Shutdown).Msg("directed hand-off")
			return
		}
		ev := log.Info().Str("to", move.To).Int64("last_seq", s.LastSeq()).Dur("flush_ms", t1.Sub(t0)).Dur("release_ms", told.released.Sub(t1)).
			Dur("publish_ms", told.at.Sub(told.released))
		if move.Shutdown {
			ev.Bool("handed_off", true).Msg("lease released")
		} else {
			ev.Msg("session handed off to rebalance")
		}
		return
	}
	if err := w.keeper.Release(ctx, h); err != nil {
		log.Warn().Err(err).Int64("last_seq", s.LastSeq()).Str("cause", reason.Error()).Msg("release")
		return
	}
	t2 := time.Now()
	w.reg.Add(schema.MetricReleased, 1)
	ev := log.Info().Int64("last_seq", s.LastSeq()).Str("cause", reason.Error()).
		Dur("flush_ms", t1.Sub(t0)).Dur("release_ms", t2.Sub(t1))
	if errors.Is(reason, session.ErrShutdown) && w.deps.Queue != nil {
		n := notify.Notification{Type: schema.NotifyStart, ConnectionID: h.ID(), Generation: h.Item().Generation, SentAtMs: t2.UnixMilli()}
		if err := w.handoffs.Publish(ctx, n); err != nil {
			log.Warn().Err(err).Msg("hand-off notification (reconciliation will find the released lease)")
		}
		ev = ev.Bool("handed_off", true).Dur("publish_ms", time.Since(t2))
	}
	ev.Msg("lease released")
}

// fail records that s's source cannot be connected, or that its sink
// refused one of its messages for good (Keeper.Fail, with the acknowledged
// prefix as last_seq), so the session leaves this worker and stops counting
// toward anyone's capacity. When the session got a new generation since the
// failing dial, that configuration was never tried: the lease is released
// instead, for the next claim to dial it.
func (w *Worker) fail(ctx context.Context, s *session.Session, reason error) {
	f := s.LastError()
	if f.Text == "" || errors.Is(reason, session.ErrSinkRefused) {
		f = session.DialFailure{Text: reason.Error(), At: time.Now(), Generation: s.Held().Item().Generation}
	}
	log := s.Logger()
	err := w.keeper.Fail(ctx, s.Held(), f.Generation, f.Text, f.At)
	switch {
	case errors.Is(err, lease.ErrNewGeneration):
		if rerr := w.keeper.Release(ctx, s.Held()); rerr != nil {
			log.Warn().Err(rerr).Msg("release after a failure of an older generation")
			return
		}
		w.reg.Add(schema.MetricReleased, 1)
		log.Info().Str("cause", reason.Error()).Msg("source failed at an older generation: lease released for the new one")
		return
	case err != nil:
		log.Warn().Err(err).Str("cause", reason.Error()).Msg("record the failed session (the lease expires instead)")
		return
	}
	w.reg.Add(schema.MetricSessionsFailed, 1)
	w.stats.failed.Add(1)
	msg := "session failed: source cannot be connected, waiting for a new start"
	if errors.Is(reason, session.ErrSinkRefused) {
		msg = "session failed: the sink refused a message for good, waiting for a new start"
	}
	log.Warn().Int64("last_seq", s.Held().LastSeq()).Str("cause", reason.Error()).Msg(msg)
}

// StopHint implements claim.Claimer: a stop notification for a session this
// worker holds closes it at once (status 1000) when the table confirms it.
func (w *Worker) StopHint(ctx context.Context, id string) {
	s, it, ok := w.readHeld(ctx, id, "stop notification: read session (the mailbox or the audit will bring it)")
	if ok && it.DesiredState == schema.StateStopped {
		s.Interrupt(session.ErrStopRequested)
	}
}

// readHeld reads the item of a session this worker holds (consistently);
// ok is false when it holds none or the read failed (logged with failMsg).
func (w *Worker) readHeld(ctx context.Context, id, failMsg string) (*session.Session, lease.Item, bool) {
	w.mu.Lock()
	s := w.sessions[id]
	w.mu.Unlock()
	if s == nil {
		return nil, lease.Item{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.StoreTimeout)
	defer cancel()
	it, err := w.store.Get(ctx, id)
	if err != nil {
		s.Logger().Warn().Err(err).Msg(failMsg)
		return nil, lease.Item{}, false
	}
	return s, it, true
}

// opened is the sessions' open hook: the claim latency of notified claims.
func (w *Worker) opened(s *session.Session, first bool) {
	if first && s.ClaimedAtMs() > 0 {
		w.reg.Observe(schema.MetricClaimLatencyMs, float64(time.Now().UnixMilli()-s.ClaimedAtMs()), metrics.Milliseconds)
	}
}

// controlTick is how often the control loop runs every session's duties
// (new generation, ping due, lease ended).
const controlTick = 250 * time.Millisecond

func (w *Worker) controlLoop(ctx context.Context) {
	t := time.NewTicker(controlTick)
	defer t.Stop()
	var ss []*session.Session
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			ss = ss[:0]
			w.mu.Lock()
			for _, s := range w.sessions {
				ss = append(ss, s)
			}
			w.mu.Unlock()
			for _, s := range ss {
				s.Tick(now)
			}
			clear(ss)
		}
	}
}

func (w *Worker) metricsLoop(ctx context.Context) {
	t := time.NewTicker(w.cfg.MetricsEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.flushMetrics()
		}
	}
}

func (w *Worker) flushMetrics() {
	w.stats.mu.Lock()
	for name, c := range w.flushedCounters() {
		v := c.Swap(0)
		w.stats.flushedLocked(name, v)
		w.reg.Add(name, float64(v))
	}
	w.stats.mu.Unlock()
	owned := w.owned()
	w.reg.Set(schema.MetricOwnedSessions, float64(owned))
	w.reg.Set(schema.MetricFreeCapacity, float64(w.cfg.MaxSessions-owned))
	w.reg.Set(schema.MetricCapacityUtilization, 100*float64(owned)/float64(w.cfg.MaxSessions))
	w.reg.Set(schema.MetricAliveWorkers, float64(w.keeper.AliveWorkers()))
	if _, err := w.reg.Flush(w.deps.Metrics, time.Now()); err != nil {
		w.log.Warn().Err(err).Msg("metrics flush")
	}
}

func (w *Worker) owned() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.sessions)
}

// observer hears the keeper: heartbeat latencies, tenures that end (whose
// session must close at once), the mailbox, and the workers it declared dead.
type observer struct{ w *Worker }

func (o observer) Heartbeat(latency time.Duration, err error) {
	o.w.stats.heartbeat(latency, err)
	if err == nil {
		o.w.reg.ObserveDuration(schema.MetricHeartbeatLatencyMs, latency)
		if o.w.hbFailing.CompareAndSwap(true, false) {
			o.w.log.Info().Msg("heartbeat succeeded again")
		}
		return
	}
	if o.w.hbFailing.CompareAndSwap(false, true) {
		o.w.log.Warn().Err(err).Msg("heartbeat failing (sessions are fenced at the trust deadline unless one succeeds)")
	}
}

func (o observer) Ended(h *lease.Held, err error) {
	if !errors.Is(err, lease.ErrStopped) {
		o.w.reg.Add(schema.MetricLeaseLost, 1)
		o.w.stats.leaseLost.Add(1)
	}
	o.w.mu.Lock()
	s := o.w.sessions[h.ID()]
	o.w.mu.Unlock()
	if s != nil && s.Held() == h {
		if err == nil {
			err = lease.ErrReleased
		}
		s.Interrupt(err)
	}
}

func (o observer) Mailbox(ids []string) {
	for _, id := range ids {
		go o.w.reread(o.w.hardCtx, id)
	}
}

func (o observer) WorkerDied(id string) {
	o.w.reg.Add(schema.MetricWorkersDeclaredDead, 1)
	o.w.log.Warn().Str("dead_worker_id", id).Msg("worker declared dead: taking its sessions over")
	go o.w.takeover(o.w.hardCtx, id)
}

// register creates the worker record, retrying while the table is
// unreachable, until ctx ends.
func (w *Worker) register(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		err := w.keeper.Register(ctx)
		if err == nil {
			return nil
		}
		if errors.Is(err, lease.ErrWorkerExists) || ctx.Err() != nil {
			return err
		}
		if attempt == 0 {
			w.log.Warn().Err(err).Msg("register the worker record (retrying)")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("register: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// report is what each heartbeat carries: load, capacity, admin address,
// whether the worker drains, its rebalancing moves over the last minute.
func (w *Worker) report() lease.Load {
	w.mu.Lock()
	draining := w.state != stateRunning
	w.mu.Unlock()
	adv := ""
	if p := w.advertiseAddr.Load(); p != nil {
		adv = *p
	}
	return lease.Load{Sessions: w.owned(), Capacity: w.cfg.MaxSessions, AdminAddr: adv, Draining: draining,
		MovesPerMin: w.rebal.movesPerMin(time.Now())}
}

// reread acts on a mailbox entry (ingest wrote it on a stop or a new
// generation of a session this worker owns): re-read the session and stop
// it or move it to its new configuration, then ack the entry.
func (w *Worker) reread(ctx context.Context, id string) {
	defer w.keeper.Ack(id)
	if s, it, ok := w.readHeld(ctx, id, "mailbox: read session (the next audit re-reads it)"); ok {
		w.apply(ctx, s, it)
	}
}

// apply moves session s to what the table says: a STOP closes it (status
// 1000), a new generation reconnects it with the new configuration; both
// checkpoint first.
func (w *Worker) apply(ctx context.Context, s *session.Session, it lease.Item) {
	h := s.Held()
	switch {
	case it.DesiredState == schema.StateStopped:
		s.Interrupt(session.ErrStopRequested)
	case it.Generation != h.Item().Generation:
		if err := w.keeper.Checkpoint(ctx, h); err != nil {
			s.Logger().Warn().Err(err).Msg("checkpoint before the new generation")
		}
		h.SetItem(it)
	}
}

// audit compares what the table says this worker owns (by_owner) with what
// it holds: a stop or a new generation whose mailbox entry was lost is
// applied; a tenure it does not hold (an acquire whose reply was lost, a
// session left while fenced) is claimed back or released.
func (w *Worker) audit(ctx context.Context) {
	owned, err := w.keeper.Audit(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn().Err(err).Msg("audit")
		}
		return
	}
	for _, o := range owned {
		w.mu.Lock()
		s, claiming := w.sessions[o.ConnectionID], w.claiming[o.ConnectionID]
		w.mu.Unlock()
		switch {
		case claiming:
		case s != nil && s.Held().Epoch() == o.Epoch:
			if o.DesiredState == schema.StateStopped || o.Generation != s.Held().Item().Generation {
				w.reread(ctx, o.ConnectionID)
			}
		case s != nil:
			// Held at another epoch of ours: the newer tenure wins.
		case o.DesiredState == schema.StateStarted && w.Free() > 0:
			if out, err := w.Claim(ctx, o.ConnectionID, nil, 0); err != nil {
				w.log.Warn().Err(err).Str("connection_id", o.ConnectionID).Stringer("outcome", out).Msg("audit: claim back")
			}
		default:
			if err := w.keeper.ReleaseToken(ctx, o.Token); err != nil && !errors.Is(err, lease.ErrLeaseLost) {
				w.log.Warn().Err(err).Str("connection_id", o.ConnectionID).Int64("lease_epoch", o.Epoch).Msg("audit: release")
			}
		}
	}
}

// takeover moves the sessions of a worker this one declared dead the way a
// graceful shutdown does (directMoves): each alive worker with room below
// its fair share is told its part at once (POST /handoff with the dead
// tenure, which it checks) and this worker claims its own, so the fleet does
// not race for the same sessions (each lost race is a failed conditional
// write and a read, queued at the table with the winners' writes) and no
// worker claims more than its share. The sessions nobody could be told of
// are announced on the work queue, and this worker claims them too, from
// the other end of the list than the queue hands them out.
func (w *Worker) takeover(ctx context.Context, dead string) {
	log := w.log.With().Str("dead_worker_id", dead).Logger()
	cands, err := w.keeper.TakeoverOf(ctx, dead)
	if err != nil {
		log.Warn().Err(err).Msg("takeover: list sessions (reconciliation will)")
		w.recon.Kick()
		return
	}
	moves, err := w.directMoves(dead, len(cands))
	if err != nil {
		log.Warn().Err(err).Msg("takeover: sessions announced on the work queue instead of handed to receivers")
	}
	var mine []lease.Candidate
	parts := map[string][]lease.Candidate{}
	next := 0
	for _, m := range moves {
		part := cands[next : next+m.Count]
		next += m.Count
		if m.To == w.cfg.WorkerID {
			mine = append(mine, part...)
		} else {
			parts[m.To] = append(parts[m.To], part...)
		}
	}
	log.Info().Int("sessions", len(cands)).Int("own", len(mine)).Int("receivers", len(parts)).Int("unplaced", len(cands)-next).
		Msg("taking over: handing sessions to receivers")
	// Its own part is claimed while the others are told theirs.
	var own sync.WaitGroup
	own.Go(func() { w.recon.ClaimAll(ctx, mine) })
	var (
		mu       sync.Mutex
		announce = slices.Clone(cands[next:])
		told     errgroup.Group
	)
	told.SetLimit(16)
	for to, part := range parts {
		for _, c := range part {
			told.Go(func() error {
				if err := w.tellReceiver(ctx, to, c.ConnectionID, c.Prev); err != nil {
					log.Warn().Err(err).Str("connection_id", c.ConnectionID).Str("to", to).Msg("takeover: tell the receiver (a start notification instead)")
					mu.Lock()
					announce = append(announce, c)
					mu.Unlock()
				}
				return nil
			})
		}
	}
	_ = told.Wait()
	own.Wait()
	if len(announce) == 0 {
		return
	}
	if w.handoffs != nil {
		now := time.Now().UnixMilli()
		for _, c := range announce {
			n := notify.Notification{Type: schema.NotifyStart, ConnectionID: c.ConnectionID, SentAtMs: now}
			if err := w.handoffs.Publish(ctx, n); err != nil {
				log.Warn().Err(err).Str("connection_id", c.ConnectionID).Msg("takeover notification")
			}
		}
	}
	slices.Reverse(announce)
	w.recon.ClaimAll(ctx, announce)
}

// Status is the /status document.
type Status struct {
	WorkerID    string    `json:"worker_id"`
	State       string    `json:"state"`
	Since       time.Time `json:"since"`
	MaxSessions int       `json:"max_sessions"`
	Owned       int       `json:"owned"`
	// Record is the worker record as the last heartbeat returned it;
	// TrustedFor is how long the worker may still act as owner without
	// another successful heartbeat (0: fenced).
	Record       WorkerRecord     `json:"record"`
	TrustedForMs int64            `json:"trusted_for_ms"`
	AliveWorkers int              `json:"alive_workers"`
	Rebalance    RebalanceStatus  `json:"rebalance"`
	Watching     []string         `json:"watching"`
	Sessions     []session.Status `json:"sessions"`
}

// WorkerRecord is the /status view of a lease.WorkerRecord.
type WorkerRecord struct {
	State         string   `json:"state"`
	Epoch         int64    `json:"epoch"`
	HeartbeatSeq  int64    `json:"heartbeat_seq"`
	HeartbeatAtMs int64    `json:"heartbeat_at_ms"`
	TTLMs         int64    `json:"ttl_ms"`
	Load          int      `json:"load"`
	Capacity      int      `json:"capacity"`
	Mailbox       []string `json:"mailbox,omitempty"`
	StartedAtMs   int64    `json:"started_at_ms"`
}

// Status returns the worker's state and its sessions.
func (w *Worker) Status() Status {
	w.mu.Lock()
	st := Status{WorkerID: w.cfg.WorkerID, State: w.state.String(), Since: w.started, MaxSessions: w.cfg.MaxSessions, Owned: len(w.sessions)}
	ss := make([]*session.Session, 0, len(w.sessions))
	for _, s := range w.sessions {
		ss = append(ss, s)
	}
	w.mu.Unlock()
	rec := w.keeper.Record()
	st.Record = WorkerRecord{State: rec.State, Epoch: rec.Epoch, HeartbeatSeq: rec.HeartbeatSeq, HeartbeatAtMs: rec.HeartbeatAtMs,
		TTLMs: rec.TTL.Milliseconds(), Load: rec.Load, Capacity: rec.Capacity, Mailbox: rec.Mailbox, StartedAtMs: rec.StartedAtMs}
	st.TrustedForMs = max(w.keeper.TrustedUntil().Sub(w.deps.Clock.Now()).Milliseconds(), 0)
	if !w.keeper.Trusted() {
		st.TrustedForMs = 0
	}
	st.AliveWorkers = w.keeper.AliveWorkers()
	st.Rebalance = w.rebalanceStatus()
	st.Watching = w.keeper.Targets()
	st.Sessions = make([]session.Status, 0, len(ss))
	for _, s := range ss {
		st.Sessions = append(st.Sessions, s.Status())
	}
	sort.Slice(st.Sessions, func(i, j int) bool { return st.Sessions[i].ConnectionID < st.Sessions[j].ConnectionID })
	return st
}

// advertised is the admin address to put in the worker record: the
// configured one, else the listener's, with an unspecified host (0.0.0.0,
// ::) replaced by this host's first private non-loopback address (a
// Fargate task's ENI address), so that other workers can reach it.
func advertised(listen, configured string) string {
	if configured != "" {
		return configured
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
		return listen
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return listen
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && n.IP.IsPrivate() {
			return net.JoinHostPort(n.IP.String(), port)
		}
	}
	return listen
}

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
	ctx, cancel := context.WithDeadline(context.Background(), later(hardStop, time.Now().Add(w.cfg.Batch.RequestTimeout+shutdownCleanup)))
	defer cancel()
	if err := q.Quiesce(ctx); err != nil {
		w.log.Warn().Err(err).Msg("sink requests still in flight: not marking the worker LEFT (its sessions expire after the TTL instead)")
		return false
	}
	return true
}
