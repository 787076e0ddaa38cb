// Phase stop: POST stop → the connection closed at the source, when the
// notification reaches the owner, a non-owner or no worker.

package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/wsfleet/wsfleet/testkit/feed"
)

// stopPhase is the phase (phase.go).
var stopPhase = phase{name: PhaseStop, run: (*runner).stop, render: renderStop, goals: stopGoals,
	onModel: func(m *ModelResults, got *Report) { m.Stop = got.Stop }}

// Stop paths (StopResult): whom the stop notification on the work queue
// reaches.
const (
	StopToOwner    = "owner"     // the owner is the queue's only consumer
	StopToNonOwner = "non-owner" // another worker is the only consumer: the owner learns it from its mailbox
	StopNoConsumer = "mailbox"   // no worker consumes the queue: the owner's mailbox alone
)

// StopResult is figure 5: POST /sessions/{id}/stop → the session's
// connection closed at the source.
type StopResult struct {
	Phase
	// Latency by path: from just before the POST (driver clock) to the
	// feed's record of the connection's close (same machine clock).
	Owner    Dist `json:"owner"`
	NonOwner Dist `json:"non_owner"`
	Mailbox  Dist `json:"mailbox_only"`
	// Unclosed are stops whose connection was still open 10 s later;
	// NoOwner stops of sessions the API said nobody owned (not timed).
	Unclosed  int     `json:"unclosed"`
	NoOwner   int     `json:"no_owner"`
	GoalP99Ms float64 `json:"goal_p99_ms"`
}

// stopSample is one timed stop.
type stopSample struct {
	id, path string
	at       time.Time
}

// stop: W1 (no queue consumer) claims its sessions by reconciliation; with
// no consumer anywhere half of them are stopped (mailbox only). Then W2
// starts, consuming the queue: W1's other half is stopped (the
// notification reaches W2, a non-owner), and new sessions, which W2 claims
// from their start notifications, are stopped (the notification reaches
// the owner). Each stop's path is judged from the owner the API's reply
// names.
func (r *runner) stop(ctx context.Context) error {
	n := r.sz.StopSamples
	res := &StopResult{GoalP99Ms: 1500}
	res.Phase = r.begin(PhaseStop, map[string]string{
		"transport": r.leaseTransport(),
		"lease":     defaultTimings,
		"run": fmt.Sprintf("W1 consumes no queue and claims %d sessions by reconciliation; with no consumer anywhere, %d of them are stopped (the owner's mailbox alone); then W2 starts consuming the queue and W1's other %d are stopped (the notification reaches W2, a non-owner; W1 learns it from its mailbox on its next heartbeat); then %d new sessions, which W2 claims from their start notifications, are stopped (the notification reaches the owner). The path of each stop is judged from the owner the stop's reply names",
			2*n, n, n, n),
		"stops": "POST /sessions/{id}/stop through ingest (the STOPPED write, which returns the owner, then the id into the owner's mailbox, then the stop notification), 4 at a time, started 50 to 150 ms apart so that they fall at every phase of the owner's heartbeat",
		"clock": "from just before the POST (driver) to the close of the session's connection as the feed records it (same machine clock)",
		"feed":  fmt.Sprintf("%g msg/s per session", r.sz.LeaseFeedRate),
	})
	r.rep.Stop = res
	defer res.end()
	ls, err := r.startLeaseStack(ctx, "stop", r.sz.LeaseFeedRate)
	if err != nil {
		return err
	}
	defer ls.shutdown()
	w1, err := ls.addWorker(ctx, false, nil)
	if err != nil {
		return err
	}
	names := func(prefix string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("stop-%s-%04d", prefix, i)
		}
		return out
	}
	mbox, non, own := names("m"), names("n"), names("o")
	first := append(append([]string(nil), mbox...), non...)
	if err := ls.startSessions(ctx, first); err != nil {
		return err
	}
	if got, err := ls.col.waitAll(ctx, first, func(o sinkObs) bool { return o.Worker == w1.ID }, 60*time.Second); err != nil || len(got) != len(first) {
		return fmt.Errorf("W1 delivers %d of %d sessions after 60 s (%v)", len(got), len(first), err)
	}
	var samples []stopSample
	consumer := ""
	timed := func(ids []string) error {
		s, err := r.timedStops(ctx, ls, ids, consumer, res)
		samples = append(samples, s...)
		return err
	}
	if err := timed(mbox); err != nil {
		return err
	}
	w2, err := ls.addWorker(ctx, true, nil)
	if err != nil {
		return err
	}
	consumer = w2.ID
	// The long poll is waiting; the stale notifications of the first stops
	// (and starts) are drained.
	if err := sleepCtx(ctx, 3*time.Second); err != nil {
		return err
	}
	if err := timed(non); err != nil {
		return err
	}
	if err := ls.startSessions(ctx, own); err != nil {
		return err
	}
	if got, err := ls.col.waitAll(ctx, own, nil, 60*time.Second); err != nil || len(got) != len(own) {
		return fmt.Errorf("%d of %d new sessions delivering after 60 s (%v)", len(got), len(own), err)
	}
	if err := timed(own); err != nil {
		return err
	}
	// Every connection closes within seconds; the records are read after
	// the slowest could have.
	if err := sleepCtx(ctx, 10*time.Second); err != nil {
		return err
	}
	conns, err := ls.st.FeedRecords(ctx, "")
	if err != nil {
		return err
	}
	byPath := stopLatencies(samples, conns)
	res.Owner, res.NonOwner, res.Mailbox = Summarize(byPath[StopToOwner]), Summarize(byPath[StopToNonOwner]), Summarize(byPath[StopNoConsumer])
	res.Unclosed = len(samples) - res.Owner.N - res.NonOwner.N - res.Mailbox.N
	r.log.Info().Float64("owner_p99_ms", res.Owner.P99).Float64("non_owner_p99_ms", res.NonOwner.P99).Float64("mailbox_p99_ms", res.Mailbox.P99).Int("unclosed", res.Unclosed).Msg("stop latency")
	return nil
}

// timedStops stops ids, 4 at a time, 50-150 ms apart, and returns each
// stop's send time and path (consumer: the worker consuming the queue, ""
// for none).
func (r *runner) timedStops(ctx context.Context, ls *leaseStack, ids []string, consumer string, res *StopResult) ([]stopSample, error) {
	var mu sync.Mutex
	var out []stopSample
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for _, id := range ids {
		if err := sleepCtx(gctx, time.Duration(50+rand.IntN(100))*time.Millisecond); err != nil {
			break
		}
		g.Go(func() error {
			t := time.Now()
			ch, err := ls.st.API.Stop(gctx, id)
			if err != nil {
				return fmt.Errorf("stop %s: %w", id, err)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case ch.Owner == "":
				res.NoOwner++
			case consumer == "":
				out = append(out, stopSample{id: id, path: StopNoConsumer, at: t})
			case ch.Owner == consumer:
				out = append(out, stopSample{id: id, path: StopToOwner, at: t})
			default:
				out = append(out, stopSample{id: id, path: StopToNonOwner, at: t})
			}
			return nil
		})
	}
	return out, g.Wait()
}

// stopLatencies are, by path, the times from each stop to the close of
// the connection that was open when it was sent (stops whose connection
// did not close are left out).
func stopLatencies(samples []stopSample, conns []feed.ConnRecord) map[string][]time.Duration {
	bySession := acceptedBySession(conns)
	out := map[string][]time.Duration{}
	for _, s := range samples {
		for _, c := range bySession[s.id] {
			if c.OpenedAt.Before(s.at) && !c.ClosedAt.IsZero() && !c.ClosedAt.Before(s.at) {
				out[s.path] = append(out[s.path], c.ClosedAt.Sub(s.at.Round(0)))
				break
			}
		}
	}
	return out
}

func renderStop(p printer, r *Report) {
	s := r.Stop
	if !heading(p, s, "4. Stop: POST stop → the connection closed at the source") {
		return
	}
	p(distHeader)
	distRow(p, "the stop notification reaches the owner", s.Owner)
	distRow(p, "it reaches a non-owner (the owner reads its mailbox)", s.NonOwner)
	distRow(p, "no worker consumes it (the owner's mailbox alone)", s.Mailbox)
	p("\n")
	if s.Unclosed+s.NoOwner > 0 {
		p("Stops whose connection was still open 10 s later: %d; stops of sessions nobody owned (not timed): %d.\n\n", s.Unclosed, s.NoOwner)
	}
	p("Ingest's stop write returns the item, which names the owner; ingest then puts the id in the owner's mailbox (one more write) and sends the stop notification. The owner closes at once when the notification reaches it (a consistent read confirms the stop). Otherwise it finds the id in the record its next heartbeat returns, at most one heartbeat interval (%s) later, re-reads the session and closes: the bound is one heartbeat + the heartbeat's and the re-read's round trips + the close handshake, whichever worker the notification reaches, or none. Goal: p99 ≤ %s on every path.\n\n",
		ms(float64(DefaultHeartbeatEvery.Milliseconds())), ms(s.GoalP99Ms))
}

// stopGoals are the stop phase's goals (Goals): stop → closed, p99, by
// where the notification lands.
func stopGoals(r *Report) []Goal {
	var gs []Goal
	if s := r.Stop; s != nil {
		for _, x := range []struct {
			what string
			d    Dist
		}{{"reaching the owner", s.Owner}, {"reaching a non-owner", s.NonOwner}, {"reaching no worker (mailbox only)", s.Mailbox}} {
			if x.d.N == 0 {
				continue
			}
			miss := "+" + ms(x.d.P99-s.GoalP99Ms)
			if s.Unclosed > 0 {
				miss += fmt.Sprintf("; %d stop(s) never closed", s.Unclosed)
			}
			gs = append(gs, judged("POST stop → connection closed at the source, p99, notification "+x.what, ms(x.d.P99), "≤ "+ms(s.GoalP99Ms), x.d.P99 <= s.GoalP99Ms && s.Unclosed == 0, miss))
		}
	}
	return gs
}
