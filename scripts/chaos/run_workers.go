// Worker process control: incarnations born and ended, graceful SIGTERM
// (with or without a restart), the wait for a worker declared dead to exit,
// restarts of a slot.

package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wsfleet/wsfleet/scripts/devstack"
)

func (r *runner) born(w *devstack.Worker) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	inc := &Incarnation{ID: w.ID(), Slot: w.Index, Pid: w.Proc.Pid(), Started: time.Now(), OffsetMs: ms(r.offsets[w.Index])}
	r.incs = append(r.incs, inc)
	r.incByID[inc.ID] = inc
	return inc.ID
}

func (r *runner) died(id, how string, exit error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	inc := r.incByID[id]
	if inc == nil || !inc.Ended.IsZero() {
		return
	}
	inc.Ended, inc.End, inc.Exit = time.Now(), how, "0"
	if exit != nil {
		inc.Exit = exit.Error()
	}
}

func (r *runner) slot(n int) *devstack.Worker {
	ws := r.st.Workers()
	return ws[(n-1)%len(ws)]
}

// graceful SIGTERMs w (an ECS deploy's stop), waits for it to exit and for
// its sessions to be delivered by others, then starts the slot again.
func (r *runner) graceful(ctx context.Context, w *devstack.Worker, kind string, handoff time.Duration) (*Fault, error) {
	f, err := r.terminate(ctx, w, kind, handoff)
	if err != nil {
		return nil, err
	}
	nid, err := r.restart(ctx, w)
	f = &r.faults[f.N-1]
	f.NewWorker = nid
	return f, err
}

// terminate SIGTERMs w, waits for it to exit and for its sessions to be
// delivered by others; the slot stays down.
func (r *runner) terminate(ctx context.Context, w *devstack.Worker, kind string, handoff time.Duration) (*Fault, error) {
	id := w.ID()
	mine := r.ownedBy(id)
	at := time.Now()
	if err := w.Term(); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, r.cfg.Stack.Worker.ShutdownDeadline+5*time.Second)
	err := w.Wait(wctx)
	cancel()
	exit := w.Proc.ExitErr()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		_ = w.Kill(ctx)
		exit = fmt.Errorf("did not exit within the shutdown deadline + 5 s: killed")
	}
	exited := time.Since(at)
	r.died(id, "sigterm", exit)
	f := r.fault(Fault{Kind: kind, Start: at, Worker: id})
	ok, err := r.waitMoved(ctx, mine, at, id, handoff+2*time.Second)
	if err != nil {
		return nil, err
	}
	r.say("#%d SIGTERM %s (%s): exited after %v; its %d session(s) delivered by others: %s after %v", f.N, id, kind, exited.Round(time.Millisecond), len(mine), okText(ok), time.Since(at).Round(time.Millisecond))
	return f, nil
}

// afterDeath waits for worker id (slot w), woken or reconnected after its
// watchers declared it dead, to learn it at its next heartbeat and exit on
// its own (non-zero; the judge checks), then starts the slot again (a new
// worker id, as the supervisor would). A worker still running after the
// wait is killed and recorded as such (a violation).
func (r *runner) afterDeath(ctx context.Context, w *devstack.Worker, id string) (string, error) {
	hb := r.cfg.Stack.Worker.HeartbeatEvery
	wctx, cancel := context.WithTimeout(ctx, 2*hb+r.cfg.Stack.Worker.ShutdownDeadline+5*time.Second)
	err := w.Wait(wctx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		_ = w.Kill(ctx)
		r.died(id, "alive", errors.New("still running after it was declared dead: killed"))
		r.say("    %s did NOT exit after it was declared dead: killed", id)
	} else {
		r.died(id, "dead", w.Proc.ExitErr())
		r.say("    %s exited on its own (%v)", id, w.Proc.ExitErr())
	}
	return r.restart(ctx, w)
}

// restart starts a new incarnation of slot w and waits until it is ready.
func (r *runner) restart(ctx context.Context, w *devstack.Worker) (string, error) {
	if err := w.Start(ctx); err != nil {
		return "", fmt.Errorf("restart %s: %w", w.Proc.Name, err)
	}
	id := r.born(w)
	if err := w.Ready(ctx, 20*time.Second); err != nil {
		return id, fmt.Errorf("restart %s: %w", id, err)
	}
	return id, nil
}

// ensureSlots restarts a worker that ended without being asked to (the
// checks report it).
func (r *runner) ensureSlots(ctx context.Context) error {
	for _, w := range r.st.Workers() {
		if w.Proc.Running() {
			continue
		}
		id := w.ID()
		r.died(id, "exited", w.Proc.ExitErr())
		r.say("%s EXITED on its own (%v): starting it again", id, w.Proc.ExitErr())
		if _, err := r.restart(ctx, w); err != nil {
			return err
		}
	}
	return nil
}
