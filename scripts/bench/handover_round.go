// The failover and handoff rounds (and the standby run's): one round run
// and timed, and what the workers' logs and the feed's records say (claim
// latencies, hand-off steps, acquires, the gap split at the source, the
// connections open at an instant).

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/wsfleet/wsfleet/testkit/feed"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// roundData is what one round observed.
type roundData struct {
	victim string
	at     time.Time // the signal
	ids    []string
	moved  map[string]sinkObs // first delivery by another worker after the signal
	// deadAtMs is when a watcher declared the killed victim dead (its
	// record's ended_at_ms, wall ms; 0: not read): its sessions became
	// takeable then.
	deadAtMs int64
	// claimMs are the survivors' own ClaimLatencyMs samples (EMF, in their
	// logs): start notification sent → the new connection open.
	claimMs []float64
	// releaseMs, publishMs: the victim's hand-off steps (SIGTERM only).
	releaseMs, publishMs []float64
}

// signalMoved signals victim (at) and waits until another worker delivers
// each of ids after it (moved: those first deliveries; within timeout),
// then for the victim's exit. After a kill, deadAtMs is when a watcher
// declared the victim dead (its record's ended_at_ms; 0: not read).
func (ls *leaseStack) signalMoved(ctx context.Context, victim *bworker, sig syscall.Signal, ids []string, timeout time.Duration) (at time.Time, moved map[string]sinkObs, deadAtMs int64, err error) {
	at = time.Now()
	if err := victim.Proc.Signal(sig); err != nil {
		return at, nil, 0, err
	}
	after := func(o sinkObs) bool { return o.Worker != victim.ID && o.At.After(at) }
	if moved, err = ls.col.waitAll(ctx, ids, after, timeout); err != nil {
		return at, moved, 0, err
	}
	if sig == syscall.SIGKILL {
		// A watcher declared the victim dead before taking its sessions
		// over: its record says when (ended_at_ms).
		if rec, err := ls.store.GetWorker(ctx, victim.ID); err == nil && rec.State == schema.WorkerDead {
			deadAtMs = rec.EndedAtMs
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	return at, moved, deadAtMs, victim.Proc.Wait(wctx)
}

// takeover splits a crash round's gaps at the instant the sessions became
// takeable (the victim declared dead): kill → declared dead once per round,
// declared dead → first message per session moved.
func (rd roundData) takeover() (toTakeable, toFirst []time.Duration) {
	if rd.deadAtMs <= 0 {
		return nil, nil
	}
	takeable := time.UnixMilli(rd.deadAtMs)
	toTakeable = []time.Duration{takeable.Sub(rd.at.Round(0))} // one death per round
	for _, o := range rd.moved {
		toFirst = append(toFirst, o.At.Round(0).Sub(takeable))
	}
	return toTakeable, toFirst
}

func (rd roundData) gaps() []time.Duration {
	out := make([]time.Duration, 0, len(rd.moved))
	for _, o := range rd.moved {
		out = append(out, o.At.Sub(rd.at))
	}
	return out
}

// gapParts splits every moved session's gap with the feed's records: the
// connection open at the signal and when it closed, the first connection
// opened after it; dark is that close → the new owner's first message.
func gapParts(rounds []roundData, conns []feed.ConnRecord) (oldClosed, newOpened, openToFirst, dark Dist) {
	bySession := acceptedBySession(conns)
	var closed, opened, first, darks []time.Duration
	for _, rd := range rounds {
		for id, o := range rd.moved {
			var old, next *feed.ConnRecord
			for i := range bySession[id] {
				c := &bySession[id][i]
				if c.OpenedAt.Before(rd.at) && (c.ClosedAt.IsZero() || !c.ClosedAt.Before(rd.at)) {
					old = c
				}
				if c.OpenedAt.After(rd.at) && (next == nil || c.OpenedAt.Before(next.OpenedAt)) {
					next = c
				}
			}
			if old != nil && !old.ClosedAt.IsZero() {
				closed = append(closed, old.ClosedAt.Sub(rd.at))
				darks = append(darks, o.At.Round(0).Sub(old.ClosedAt))
			}
			if next != nil {
				opened = append(opened, next.OpenedAt.Sub(rd.at))
				first = append(first, o.At.Round(0).Sub(next.OpenedAt))
			}
		}
	}
	return Summarize(closed), Summarize(opened), Summarize(first), WithSamples(darks)
}

func (r *runner) handoverRound(ctx context.Context, ls *leaseStack, kind string, k, n int) (roundData, map[string]time.Time, error) {
	prefix, sig, timeout := "fo", syscall.SIGKILL, killMoveTimeout
	if kind == kindTerm {
		prefix, sig, timeout = "ho", syscall.SIGTERM, 30*time.Second
	}
	rd := roundData{ids: sessionIDs(prefix+"-r"+itoa(k)+"-%04d", n)}
	ids := rd.ids
	// One heartbeat keeps every session of the victim (nothing is renewed
	// per session), so the kill falls at one phase of it per round.
	victim, err := ls.startVictim(ctx, nil, ids, ls.startSessions)
	if err != nil {
		return rd, nil, err
	}
	rd.victim = victim.ID
	survivors, err := ls.addWorkers(ctx, 2, true, nil, nil)
	if err != nil {
		return rd, nil, err
	}
	if err := sleepCtx(ctx, settleBefore(kind)); err != nil {
		return rd, nil, err
	}
	if rd.at, rd.moved, rd.deadAtMs, err = ls.signalMoved(ctx, victim, sig, ids, timeout); err != nil {
		return rd, nil, err
	}
	// A little more streaming after the move, so that a loss or a repeat at
	// the boundary shows in the records.
	if err := sleepCtx(ctx, time.Second); err != nil {
		return rd, nil, err
	}
	stops, err := ls.stopSessions(ctx, ids)
	if err != nil {
		return rd, nil, err
	}
	if err := ls.waitOwnedZero(ctx, survivors, 20*time.Second); err != nil {
		r.log.Warn().Err(err).Msg("sessions still owned after the stops")
	}
	if err := stopWorkers(survivors); err != nil {
		return rd, nil, err
	}
	if kind == kindTerm {
		if rd.releaseMs, rd.publishMs, err = handoffSteps(victim.Proc.LogPath); err != nil {
			return rd, nil, err
		}
	}
	for _, w := range survivors {
		ms, err := claimLatencies(w.Proc.LogPath)
		if err != nil {
			return rd, nil, err
		}
		rd.claimMs = append(rd.claimMs, ms...)
	}
	return rd, stops, nil
}

// killMoveTimeout bounds the wait, after a kill, for every session's first
// delivery by a survivor: the victim declared dead, and the claims.
const killMoveTimeout = DefaultTTL + DefaultHeartbeatEvery + 20*time.Second

// startVictim starts a round's victim worker alone (settings), starts ids
// on it (start) and waits until it delivers every one.
func (ls *leaseStack) startVictim(ctx context.Context, settings map[string]string, ids []string, start func(context.Context, []string) error) (*bworker, error) {
	victim, err := ls.addWorker(ctx, true, settings)
	if err != nil {
		return nil, err
	}
	if err := start(ctx, ids); err != nil {
		return victim, err
	}
	byVictim := func(o sinkObs) bool { return o.Worker == victim.ID }
	got, err := ls.col.waitAll(ctx, ids, byVictim, 60*time.Second)
	if err != nil {
		return victim, err
	}
	if len(got) != len(ids) {
		return victim, fmt.Errorf("the victim delivers %d of %d sessions after 60 s", len(got), len(ids))
	}
	return victim, nil
}

// claimLatencies reads the ClaimLatencyMs samples of the EMF lines in a
// worker's log.
func claimLatencies(path string) ([]float64, error) {
	lines, err := logRecords[struct {
		ClaimLatencyMs json.RawMessage `json:"ClaimLatencyMs"`
	}](path, `"ClaimLatencyMs"`)
	var out []float64
	for _, m := range lines {
		var many []float64
		if json.Unmarshal(m.ClaimLatencyMs, &many) == nil {
			out = append(out, many...)
			continue
		}
		var one float64
		if json.Unmarshal(m.ClaimLatencyMs, &one) == nil {
			out = append(out, one)
		}
	}
	return out, err
}

// handoffSteps reads the release_ms and publish_ms of the hand-offs
// ("lease released" with handed_off) in a worker's log.
func handoffSteps(path string) (releaseMs, publishMs []float64, err error) {
	lines, err := logRecords[struct {
		Message   string   `json:"message"`
		HandedOff bool     `json:"handed_off"`
		ReleaseMs *float64 `json:"release_ms"`
		PublishMs *float64 `json:"publish_ms"`
	}](path, `"handed_off"`)
	for _, m := range lines {
		if m.Message != "lease released" || !m.HandedOff {
			continue
		}
		if m.ReleaseMs != nil {
			releaseMs = append(releaseMs, *m.ReleaseMs)
		}
		if m.PublishMs != nil {
			publishMs = append(publishMs, *m.PublishMs)
		}
	}
	return releaseMs, publishMs, err
}

// acquireLine is a worker's "lease acquired" log line.
type acquireLine struct {
	Session string
	At      time.Time
	Standby bool // the claim took the standby's connection
}

// acquiredAfter reads the "lease acquired" lines of a worker's log and
// returns, per session of ids, the first one after t.
func acquiredAfter(path string, ids map[string]bool, t time.Time) (map[string]acquireLine, error) {
	lines, err := logRecords[struct {
		Message string    `json:"message"`
		ID      string    `json:"connection_id"`
		Standby bool      `json:"standby"`
		Time    time.Time `json:"time"`
	}](path, `"lease acquired"`)
	if err != nil {
		return nil, err
	}
	out := map[string]acquireLine{}
	for _, m := range lines {
		if m.Message != "lease acquired" || !ids[m.ID] || !m.Time.After(t) {
			continue
		}
		if cur, ok := out[m.ID]; !ok || m.Time.Before(cur.At) {
			out[m.ID] = acquireLine{Session: m.ID, At: m.Time, Standby: m.Standby}
		}
	}
	return out, nil
}

// logRecords decodes the lines of a worker's log that hold marker, each
// into a T (lines that are not such JSON are left out).
func logRecords[T any](path, marker string) ([]T, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("worker log: %w", err)
	}
	var out []T
	for _, l := range strings.Split(string(b), "\n") {
		var m T
		if strings.Contains(l, marker) && json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out, nil
}

// settleBefore is how long the round runs with the survivors up before the
// signal: 5 s before a kill (the survivors have listed the alive workers,
// every RefreshEvery = 5 s, so they watch the victim), 2 s before a SIGTERM
// (the survivors' long polls are waiting).
func settleBefore(kind string) time.Duration {
	if kind == kindKill {
		return 5 * time.Second
	}
	return 2 * time.Second
}

// lastBefore is the last observation by worker at or before t.
func lastBefore(obs []sinkObs, worker string, t time.Time) (sinkObs, bool) {
	var last sinkObs
	found := false
	for _, o := range obs {
		if o.Worker == worker && !o.At.After(t) && (!found || o.At.After(last.At)) {
			last, found = o, true
		}
	}
	return last, found
}

// openAt counts session id's connections open at the feed at t (refused
// attempts and bad requests left out).
func openAt(conns []feed.ConnRecord, id string, t time.Time) int {
	n := 0
	for _, c := range conns {
		if c.Session != id || c.Reason == feed.ReasonRefused || c.Reason == feed.ReasonBadReq {
			continue
		}
		if !c.OpenedAt.After(t) && (c.ClosedAt.IsZero() || c.ClosedAt.After(t)) {
			n++
		}
	}
	return n
}
