package streamer

// The shutdown's phases: every goroutine the Worker starts belongs to one.

import (
	"context"
	"sync"
	"sync/atomic"
)

// The phases, in the order Run ends them (after hashicorp/raft's goFunc on
// one tracked group, one group per phase). Each owns the goroutines it
// names (its group) and the context they run on:
//
//   - claim: the reconciler, rebalancing and standby placement loops, on
//     Run's context: cancelled when the shutdown begins, ended before the
//     drain waits for the sessions.
//   - consume: the work queue's consumer, on a context of its own: it stops
//     after its poll in flight (claim.Consumer.Stop), and is cancelled only
//     at the shutdown deadline.
//   - handoff: the drain's pacer, handing the sessions off a few at a time
//     (drain.go), on the deadline's context.
//   - sessions: each session's Run, on the deadline's context (hardCtx):
//     waited for until the deadline, then cancelled, and waited for a
//     moment more (a sink call that ignores its context may never return).
//   - background: the Keeper, the control loop, metrics and the standby
//     check, which outlive Run's context: they keep heartbeating and
//     supervising while the sessions close and release; cancelled after the
//     worker left.
//   - admin: the admin server (its requests' base context), shut down once
//     the worker stopped.
//   - sink: a sink that runs in the background (runner), from before the
//     first claim until every session released and its requests ended.
//   - tasks: everything started on an event (a mailbox re-read, a /handoff
//     claim, an audit, a takeover, a standby), on the deadline's context
//     (hardCtx): cancelled with the sessions at the deadline, else when Run
//     returns, and waited for last.
//
// A fan-out that one goroutine starts and joins before it returns (a
// rebalancing round's moves, a takeover's receivers told, standby
// placements, the drain's waits for each hand-off) belongs to the phase of
// the goroutine that joins it; so does a wait with a deadline
// (internal/waitfor), whose goroutine ends with the call it waits for.
// TestShippedCodeStartsGoroutinesInPhases holds the package to this.
var shutdownOrder = []string{"claim", "consume", "handoff", "sessions", "background", "admin", "sink", "tasks"}

// phase is one step of the Worker's shutdown: its name, the context its
// goroutines run on, and its one tracked group.
type phase struct {
	name   string
	ctx    context.Context
	cancel context.CancelFunc
	group
}

// begin names p and gives it a context of its own under parent; a phase
// that shares the deadline's context is set with its fields instead.
func (p *phase) begin(name string, parent context.Context) {
	p.name = name
	p.ctx, p.cancel = context.WithCancel(parent)
}

// group is a phase's tracked goroutines: Go counts each one it starts.
type group struct {
	mu      sync.Mutex
	closed  bool
	wg      sync.WaitGroup
	started atomic.Int64
	running atomic.Int64
}

// Go runs f in a tracked goroutine; false (f not run) once Close began:
// the phase is over and nothing new starts in it.
func (g *group) Go(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.started.Add(1)
	g.running.Add(1)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer g.running.Add(-1)
		f()
	}()
	return true
}

// Wait waits for the running goroutines (new ones may still start).
func (g *group) Wait() { g.wg.Wait() }

// Close refuses new goroutines and waits for the running ones.
func (g *group) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}

// phaseRecord is what a phase did in one Run (Worker.phasesEnded).
type phaseRecord struct {
	name             string
	started, running int64
}

// phases are the Worker's shutdown phases (shutdownOrder) and the order
// they ended in.
type phases struct {
	claim, consume, handoff, sessions, background, admin, sink, tasks phase

	mu    sync.Mutex
	ended []string
}

// end records that p ended (its goroutines waited for, or given up on at
// the deadline).
func (ps *phases) end(p *phase) {
	ps.mu.Lock()
	ps.ended = append(ps.ended, p.name)
	ps.mu.Unlock()
}

// phasesEnded is the debug view of the shutdown: the phases in the order
// they ended, each with the goroutines it started and those still running.
func (w *Worker) phasesEnded() []phaseRecord {
	all := map[string]*phase{}
	for _, p := range []*phase{&w.ph.claim, &w.ph.consume, &w.ph.handoff, &w.ph.sessions, &w.ph.background, &w.ph.admin, &w.ph.sink, &w.ph.tasks} {
		all[p.name] = p
	}
	w.ph.mu.Lock()
	defer w.ph.mu.Unlock()
	out := make([]phaseRecord, 0, len(w.ph.ended))
	for _, name := range w.ph.ended {
		p := all[name]
		out = append(out, phaseRecord{name: name, started: p.started.Load(), running: p.running.Load()})
	}
	return out
}

// runner is a sink that runs in the background (sink/batch's Batcher): the
// Worker owns it, starting it before the first claim and stopping it once
// its sessions have released and their requests ended.
type runner interface {
	Run(ctx context.Context)
}
