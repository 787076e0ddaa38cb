package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/wsfleet/wsfleet/scripts/chaos"
	"github.com/wsfleet/wsfleet/testkit/feed"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// Handover kinds (HandoverResult.Kind).
const (
	kindKill = chaos.KindKill // "kill-9"
	kindTerm = "sigterm"
)

// HandoverResult is figure 2 (kill -9) or 3 (SIGTERM): the owner of every
// session of a round is signalled; each session is one sample of
// signal → first message delivered by another worker.
type HandoverResult struct {
	Phase
	Kind             string `json:"kind"` // kill-9 | sigterm
	Rounds           int    `json:"rounds"`
	SessionsPerRound int    `json:"sessions_per_round"`
	Survivors        int    `json:"survivors"`
	// Gap: signal → first message at the sink from another worker (driver clock).
	Gap Dist `json:"gap"`
	// PerRound are the rounds' own distributions.
	PerRound []Dist `json:"per_round"`
	// The gap's parts, from the feed's connection records (same machine
	// clock): signal → the old connection closed at the source; signal →
	// the new owner's connection opened; that open → first message at the
	// sink.
	OldClosed   Dist `json:"old_closed"`
	NewOpened   Dist `json:"new_opened"`
	OpenToFirst Dist `json:"open_to_first"`
	// Dark: per session, the old connection's close at the source → the
	// first message by another worker at the sink: the session's own
	// outage. A graceful shutdown hands its sessions off a few at a time
	// (WSFLEET_SHUTDOWN_IN_FLIGHT), the others streaming until their turn,
	// so Gap (from the signal) also holds the wait for the turn, Dark not.
	Dark Dist `json:"dark"`
	// After a crash, from the victim's worker record (ended_at_ms, written
	// by the watcher that declared it dead): kill → declared dead (its
	// sessions takeable from then on), and that instant → first message by
	// the new owner (the takeover path).
	KillToDead  Dist `json:"kill_to_declared_dead"`
	DeadToFirst Dist `json:"declared_dead_to_first"`
	// NotifyToOpen: the survivors' ClaimLatencyMs metric (start
	// notification sent → the new connection open), for the sessions they
	// claimed from a notification.
	NotifyToOpen Dist `json:"notify_to_open"`
	// After a SIGTERM, from the victim's "lease released" log lines: how
	// long each session's release write (with the final checkpoint) and its
	// hand-off notification took.
	VictimRelease Dist `json:"victim_release"`
	VictimPublish Dist `json:"victim_publish"`
	Unrecovered   int  `json:"unrecovered"`
	// From the feed's and the sinks' records, by the chaos harness's checks
	// (package chaos): Duplicated are the raw repeats across the ownership
	// changes the signals caused, DuplicatedMax the most in one (one
	// session, one round), ReplayBound what one crash may repeat.
	Lost int64 `json:"lost"`
	// Gaps are seqs inside the delivered range the source never sent: the
	// new owner resumed past them (the chaos no-loss check).
	Gaps           int64    `json:"gaps"`
	Duplicated     int64    `json:"duplicated"` // repeats caused by the ownership change
	DuplicatedMax  int64    `json:"duplicated_max_per_session"`
	ReplayBound    int64    `json:"replay_bound"`
	Stale          int64    `json:"stale_epoch_deliveries"`
	MaxConcurrent  int      `json:"max_concurrent_connections"`
	Violations     []string `json:"violations,omitempty"`
	FeedRate       float64  `json:"feed_rate"`
	TTLPlusWatchMs float64  `json:"ttl_plus_watch_ms"` // TTL + one watch interval (500 ms)
	TTLPlusRecMs   float64  `json:"ttl_plus_reconcile_ms"`
	GoalP99Ms      float64  `json:"goal_p99_ms"`
	ClaimRateLimit int      `json:"claims_per_second_per_worker"`
}

func (r *runner) failover(ctx context.Context) error {
	res := &HandoverResult{Kind: kindKill, Rounds: r.sz.FailoverRounds, SessionsPerRound: r.sz.FailoverSessions}
	r.rep.Failover = res
	return r.handover(ctx, PhaseFailover, res)
}

func (r *runner) handoff(ctx context.Context) error {
	res := &HandoverResult{Kind: kindTerm, Rounds: r.sz.HandoffRounds, SessionsPerRound: r.sz.HandoffSessions}
	r.rep.Handoff = res
	if err := r.handover(ctx, PhaseHandoff, res); err != nil {
		return err
	}
	if r.sz.HandoffSmallRounds == 0 {
		return nil
	}
	small := &HandoverResult{Kind: kindTerm, Rounds: r.sz.HandoffSmallRounds, SessionsPerRound: r.sz.HandoffSmallSessions}
	r.rep.HandoffSmall = small
	return r.handover(ctx, PhaseHandoff, small)
}

// handover runs the rounds: a victim worker alone claims the round's
// sessions (through SQS), two survivors start, the victim is signalled, and
// every session's first delivery by a survivor is timed. Then the sessions
// are stopped and the survivors leave, so the next round starts clean.
func (r *runner) handover(ctx context.Context, name string, res *HandoverResult) error {
	res.Survivors, res.FeedRate = 2, r.sz.LeaseFeedRate
	if res.Kind == kindTerm {
		res.FeedRate = r.sz.HandoffFeedRate
	}
	res.TTLPlusWatchMs = float64((DefaultTTL + DefaultHeartbeatEvery/2).Milliseconds())
	res.TTLPlusRecMs = float64((DefaultTTL + DefaultReconcile).Milliseconds())
	res.ClaimRateLimit = DefaultClaimRate
	signal := "SIGKILL (kill -9)"
	res.GoalP99Ms = float64((DefaultTTL + time.Second).Milliseconds())
	if res.Kind == kindTerm {
		signal = "SIGTERM (graceful: directed hand-offs to the survivors, at least 4 at a time: close 1001, flush, release with the final checkpoint reserved for the receiver, POST /handoff)"
		res.GoalP99Ms = 250
	}
	res.Phase = r.begin(name, map[string]string{
		"lease":   defaultTimings,
		"round":   fmt.Sprintf("a victim worker alone claims %d new sessions via SQS; 2 survivors start (both consume the queue); %s later the victim gets %s", res.SessionsPerRound, settleBefore(res.Kind), signal),
		"rounds":  fmt.Sprintf("%d (fresh victim and survivors each round; %d samples in all)", res.Rounds, res.Rounds*res.SessionsPerRound),
		"feed":    fmt.Sprintf("%g msg/s per session, resume by ?from=last_seq+1 (the new owner gets the backlog at once)", res.FeedRate),
		"clock":   "driver-side monotonic clock: from just before the signal to the driver reading the new owner's first sink line",
		"judging": "lost and duplicated messages from the feed's connection records and the sink records (the chaos harness's checks, scripts/chaos)",
	})
	defer res.end()
	ls, err := r.startLeaseStack(ctx, fmt.Sprintf("%s-%d", name, res.SessionsPerRound), res.FeedRate)
	if err != nil {
		return err
	}
	defer ls.shutdown()

	var all []time.Duration
	var rounds []roundData
	stopped := map[string]time.Time{}
	for k := 1; k <= res.Rounds; k++ {
		rd, stops, err := r.handoverRound(ctx, ls, res.Kind, k, res.SessionsPerRound)
		if err != nil {
			return fmt.Errorf("round %d: %w", k, err)
		}
		rounds = append(rounds, rd)
		gaps := rd.gaps()
		all = append(all, gaps...)
		res.Unrecovered += len(rd.ids) - len(rd.moved)
		d := Summarize(gaps)
		res.PerRound = append(res.PerRound, d)
		for id, at := range stops {
			stopped[id] = at
		}
		r.log.Info().Str("phase", name).Int("round", k).Int("n", d.N).Float64("p50_ms", d.P50).Float64("p99_ms", d.P99).Msg("round done")
	}
	res.Gap = Summarize(all)
	var toTakeable, toFirst []time.Duration
	for _, rd := range rounds {
		a, b := rd.takeover()
		toTakeable, toFirst = append(toTakeable, a...), append(toFirst, b...)
	}
	res.KillToDead, res.DeadToFirst = Summarize(toTakeable), Summarize(toFirst)
	var claimMs, releaseMs, publishMs []float64
	for _, rd := range rounds {
		claimMs = append(claimMs, rd.claimMs...)
		releaseMs = append(releaseMs, rd.releaseMs...)
		publishMs = append(publishMs, rd.publishMs...)
	}
	res.NotifyToOpen = SummarizeMs(claimMs)
	res.VictimRelease, res.VictimPublish = SummarizeMs(releaseMs), SummarizeMs(publishMs)

	conns, err := ls.st.FeedRecords(ctx, "")
	if err != nil {
		return err
	}
	res.OldClosed, res.NewOpened, res.OpenToFirst, res.Dark = gapParts(rounds, conns)
	judgeHandover(res, chaos.Evidence{Start: res.Phase.Started, End: time.Now(), Deliveries: ls.col.deliveries(), Conns: conns}, rounds, stopped)
	return nil
}

// judgeHandover holds the rounds to the chaos harness's checks: every
// signal is a fault on its victim (a SIGTERM is the harness's graceful
// handoff), every stop an API stop; the bench's lease timings give the
// bounds.
func judgeHandover(res *HandoverResult, ev chaos.Evidence, rounds []roundData, stopped map[string]time.Time) {
	kind := chaos.KindKill
	if res.Kind == kindTerm {
		kind = chaos.KindRolling
	}
	for i, rd := range rounds {
		ev.Faults = append(ev.Faults, chaos.Fault{N: i + 1, Kind: kind, Start: rd.at, End: rd.at, Worker: rd.victim})
	}
	for id, at := range stopped {
		ev.Actions = append(ev.Actions, chaos.Action{Op: "stop", Session: id, At: at, Acked: at, Epoch: -1})
	}
	cfg := chaos.DefaultConfig()
	w := &cfg.Stack.Worker
	cfg.Stack.FeedRate = res.FeedRate
	w.LeaseTTL, w.HeartbeatEvery, w.CheckpointEvery, w.ReconcileEvery = DefaultTTL, DefaultHeartbeatEvery, DefaultCheckpointEvery, DefaultReconcile
	j := chaos.Analyze(ev, cfg.Settings(), chaos.Plan{})
	res.Lost, res.Gaps, res.Stale, res.ReplayBound = j.Totals.Lost, j.Totals.Gaps, j.Totals.Stale, j.Settings.Bounds.ReplayCrash
	res.MaxConcurrent = min(1, j.Totals.Connections)
	for _, o := range j.Overlaps {
		res.MaxConcurrent = max(res.MaxConcurrent, o.Max)
	}
	for _, k := range j.Kinds {
		if k.Kind == kind {
			res.Duplicated = k.Repeats
		}
	}
	for _, t := range j.Transitions {
		if t.Cause == "crash" && kind == chaos.KindKill {
			res.DuplicatedMax = t.MaxOne
		}
	}
	for _, v := range j.Violations {
		res.Violations = append(res.Violations, fmt.Sprintf("[%s] %s at %.1f s: %s", v.Check, v.Session, v.T, v.Detail))
	}
}

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
	bySession := map[string][]feed.ConnRecord{}
	for _, c := range conns {
		if c.Reason == feed.ReasonRefused || c.Reason == feed.ReasonBadReq {
			continue
		}
		bySession[c.Session] = append(bySession[c.Session], c)
	}
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
	return Summarize(closed), Summarize(opened), Summarize(first), Summarize(darks)
}

func (r *runner) handoverRound(ctx context.Context, ls *leaseStack, kind string, k, n int) (roundData, map[string]time.Time, error) {
	var rd roundData
	victim, err := ls.addWorker(ctx, true, nil)
	if err != nil {
		return rd, nil, err
	}
	prefix := "fo"
	if kind == kindTerm {
		prefix = "ho"
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-r%d-%04d", prefix, k, i)
	}
	rd.victim, rd.ids = victim.ID, ids
	// One heartbeat keeps every session of the victim (nothing is renewed
	// per session), so the kill falls at one phase of it per round.
	if err := ls.startSessions(ctx, ids); err != nil {
		return rd, nil, err
	}
	byVictim := func(o sinkObs) bool { return o.Worker == victim.ID }
	got, err := ls.col.waitAll(ctx, ids, byVictim, 60*time.Second)
	if err != nil {
		return rd, nil, err
	}
	if len(got) != n {
		return rd, nil, fmt.Errorf("the victim delivers %d of %d sessions after 60 s", len(got), n)
	}
	var survivors []*bworker
	for range 2 {
		w, err := ls.addWorker(ctx, true, nil)
		if err != nil {
			return rd, nil, err
		}
		survivors = append(survivors, w)
	}
	if err := sleepCtx(ctx, settleBefore(kind)); err != nil {
		return rd, nil, err
	}
	sig := syscall.SIGKILL
	if kind == kindTerm {
		sig = syscall.SIGTERM
	}
	t := time.Now()
	if err := victim.Proc.Signal(sig); err != nil {
		return rd, nil, err
	}
	rd.at = t
	after := func(o sinkObs) bool { return o.Worker != victim.ID && o.At.After(t) }
	timeout := 30 * time.Second
	if kind == kindKill {
		timeout = DefaultTTL + DefaultHeartbeatEvery + 20*time.Second
	}
	if rd.moved, err = ls.col.waitAll(ctx, ids, after, timeout); err != nil {
		return rd, nil, err
	}
	if kind == kindKill {
		// A watcher declared the victim dead before taking its sessions
		// over: its record says when (ended_at_ms).
		if rec, err := ls.store.GetWorker(ctx, victim.ID); err == nil && rec.State == schema.WorkerDead {
			rd.deadAtMs = rec.EndedAtMs
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	err = victim.Proc.Wait(wctx)
	cancel()
	if err != nil {
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

// claimLatencies reads the ClaimLatencyMs samples of the EMF lines in a
// worker's log.
func claimLatencies(path string) ([]float64, error) {
	lines, err := logLines(path)
	if err != nil {
		return nil, err
	}
	var out []float64
	for _, l := range lines {
		if !strings.Contains(l, `"ClaimLatencyMs"`) {
			continue
		}
		var m struct {
			ClaimLatencyMs json.RawMessage `json:"ClaimLatencyMs"`
		}
		if json.Unmarshal([]byte(l), &m) != nil || len(m.ClaimLatencyMs) == 0 {
			continue
		}
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
	return out, nil
}

// handoffSteps reads the release_ms and publish_ms of the hand-offs
// ("lease released" with handed_off) in a worker's log.
func handoffSteps(path string) (releaseMs, publishMs []float64, err error) {
	lines, err := logLines(path)
	if err != nil {
		return nil, nil, err
	}
	for _, l := range lines {
		if !strings.Contains(l, `"handed_off"`) {
			continue
		}
		var m struct {
			Message   string   `json:"message"`
			HandedOff bool     `json:"handed_off"`
			ReleaseMs *float64 `json:"release_ms"`
			PublishMs *float64 `json:"publish_ms"`
		}
		if json.Unmarshal([]byte(l), &m) != nil || m.Message != "lease released" || !m.HandedOff {
			continue
		}
		if m.ReleaseMs != nil {
			releaseMs = append(releaseMs, *m.ReleaseMs)
		}
		if m.PublishMs != nil {
			publishMs = append(publishMs, *m.PublishMs)
		}
	}
	return releaseMs, publishMs, nil
}

// logLines is a worker log's lines.
func logLines(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("worker log: %w", err)
	}
	return strings.Split(string(b), "\n"), nil
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
