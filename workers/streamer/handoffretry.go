// The retries of a directed hand-off: the sender telling its receiver, and
// the receiver claiming what it was told to. A session released reserved
// for a receiver is taken by nobody else until the reservation lapses
// (lease.Config.HandoffBound), so a transient failure on either side, left
// unretried, keeps the session dark for that long.

package streamer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"syscall"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/backoff"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/claim"
)

// Telling a receiver: at most tellAttempts requests, tellBackoff apart (25
// to 200 ms), all within half the reservation bound (each request's own
// timeout is 1 s, cut to what is left of that), so that the start
// notification that follows a failure still comes well before the
// reservation lapses.
const tellAttempts = 4

var tellBackoff = backoff.Policy{Base: 50 * time.Millisecond, Max: 400 * time.Millisecond}

// Claiming a hand-off: a transient failure is retried from 100 ms apart,
// doubling up to 1 s (equal jitter), until the next attempt would come
// after the reservation lapses.
var handoffClaimBackoff = backoff.Policy{Base: 100 * time.Millisecond, Max: time.Second}

// tellStatusError: the receiver answered POST /handoff with something else
// than 202.
type tellStatusError struct {
	to, status string
	code       int
}

func (e *tellStatusError) Error() string { return fmt.Sprintf("%s answered %s", e.to, e.status) }

// tellTransient reports whether telling a receiver failed in a way a retry
// may mend: a 429 (its hand-off gate's rate or slots), a 5xx other than 503,
// a request that timed out or whose connection broke. A 503 (the receiver
// is full or draining), any other answer, a refused connection (nobody
// listens there), a missing address, and the caller's own end are final.
func tellTransient(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var st *tellStatusError
	if errors.As(err, &st) {
		return st.code == http.StatusTooManyRequests || (st.code >= 500 && st.code != http.StatusServiceUnavailable)
	}
	var ue *url.Error
	return errors.As(err, &ue) && ue.Op != "parse" && !errors.Is(err, syscall.ECONNREFUSED)
}

// receiverWontTake reports whether a receiver's answer to a hand-off says
// it will not take the session now: a 503 (full or draining), a refused
// connection (nobody listens there), no admin address. A retry would get the
// same answer, and a reservation for it would turn the others away.
func receiverWontTake(err error) bool {
	var st *tellStatusError
	if errors.As(err, &st) {
		return st.code == http.StatusServiceUnavailable
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, errNoAdminAddr)
}

// tellReceiverRetrying is tellReceiver for a directed hand-off, retrying a
// transient failure (tellTransient) within tellAttempts and half the
// reservation bound on the worker's clock. It returns how many requests it
// sent and the last one's error.
func (w *Worker) tellReceiverRetrying(ctx context.Context, to, id string, fp uint64) (int, error) {
	clk := w.deps.Clock
	ctx, cancel := context.WithTimeout(ctx, w.keeper.Config().HandoffBound/2)
	defer cancel()
	for attempt := 1; ; attempt++ {
		err := w.tellReceiver(ctx, to, id, nil, fp)
		if err == nil || attempt == tellAttempts || !tellTransient(ctx, err) {
			return attempt, err
		}
		if clock.Sleep(ctx, clk, tellBackoff.Next(attempt-1, w.handoffRnd)) != nil {
			return attempt, err
		}
	}
}

// claimHandedOff claims id, which this worker was told at told to claim (a
// directed hand-off's receiver): a transient failure is retried with
// backoff until the reservation would lapse (told + HandoffBound on this
// worker's clock), since until then nobody else may take the session. A
// transient failure is claim.Failed (a store timeout, a throttle), or
// claim.Draining while the worker still runs: its trust lapsed (a late
// heartbeat), and a heartbeat may restore it before the reservation lapses.
// given, when set, is the tenure its owner gave this worker, whose first
// acquire failed transiently: each attempt names it (it also takes the
// session once the giver released it reserved for this worker). It returns
// the last claim's outcome.
//
// A takeover's part (prev: the dead tenure) is reserved for nobody, and
// its first attempt may come long after told (it waits for the claim pace
// behind the rest of the part): its retries have HandoffBound from that
// attempt, and they are not paced again (the attempt spent its slot; a
// throttled table still paces them). Retried only until told +
// HandoffBound, a part whose first acquire timed out 42 s after it was
// told was announced instead, and waited 57 s at the back of the work
// queue (the fleet simulator's AZ loss at 100 × 100,000, `WATCH=`).
func (w *Worker) claimHandedOff(id string, prev *lease.Token, given *lease.Given, told time.Time, paced bool) claim.Outcome {
	clk := w.deps.Clock
	bound := w.keeper.Config().HandoffBound
	lapse := told.Add(bound)
	takeover := prev != nil && given == nil
	for attempt := 1; ; attempt++ {
		out, err := w.claim(w.hardCtx, handedOffPath(prev, given), id, prev, given, told.UnixMilli(), paced && (attempt == 1 || !takeover))
		if takeover && attempt == 1 {
			lapse = later(lapse, clk.Now().Add(bound))
		}
		if !transientClaim(out, w.running()) || w.hardCtx.Err() != nil {
			if err != nil && out != claim.Reserved {
				w.log.Warn().Err(err).Str("connection_id", id).Stringer("outcome", out).Int("attempts", attempt).Msg("hand-off claim")
			} else if attempt > 1 {
				w.log.Info().Str("connection_id", id).Stringer("outcome", out).Int("attempts", attempt).Msg("hand-off claim after retries")
			}
			return out
		}
		d := handoffClaimBackoff.Next(attempt-1, w.handoffRnd)
		if !clk.Now().Add(d).Before(lapse) {
			w.log.Warn().Err(err).Str("connection_id", id).Int("attempts", attempt).Msg("hand-off claim: given up at the reservation bound")
			return out
		}
		w.log.Debug().Err(err).Str("connection_id", id).Int("attempt", attempt).Dur("retry_in", d).Msg("hand-off claim failed: retrying")
		if clock.Sleep(w.hardCtx, clk, d) != nil {
			return out
		}
	}
}

// untaken reports whether a takeover's part whose claim ended with out is
// still the dead worker's for anyone to take: this worker filled up or
// began to stop while the part waited for its claim pace, or its claims
// failed. Other workers' reconcile passes leave it to the takeover for
// lease.Config.GoneGrace, so the receiver announces it (a start
// notification) instead of dropping it.
func untaken(out claim.Outcome) bool {
	return out == claim.AtCapacity || out == claim.Draining || out == claim.Failed
}

// transientClaim reports whether a hand-off's claim that ended with out may
// succeed if tried again: a store timeout or a throttle (claim.Failed), or
// the worker's trust lapsed while it still runs.
func transientClaim(out claim.Outcome, running bool) bool {
	return out == claim.Failed || out == claim.Draining && running
}

// running reports whether the worker is running (neither starting nor
// draining).
func (w *Worker) running() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state == stateRunning
}
