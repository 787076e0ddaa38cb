//go:build fleetsim

package fleetsim

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/workers/streamer"
)

// The fault scenarios of issue 36 item 3 beyond crashes and drains: the
// table unreachable (ddb-down), a burst of starts (burst-start), a source
// limiting connections per IP (source-limit), the crash of a worker holding
// every session (crash-big), and a death while by_owner lags beyond the
// bound (lag-sweep).

// Latency summarizes durations (seconds).
type Latency struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

func latency(xs []float64) Latency {
	slices.Sort(xs)
	return Latency{N: len(xs), P50: rank(xs, 0.50), P99: rank(xs, 0.99), Max: rank(xs, 1)}
}

// Fault kinds of this file.
const (
	kindDDBDown  = "ddb-down"  // the table unreachable for every worker; At is its end
	kindLagSweep = "lag-sweep" // the session a dead worker acquired last, hidden by by_owner's lag
)

// judged are the fault kinds whose sessions must deliver again.
func judged(kind string) bool {
	switch kind {
	case "kill", "term", kindDDBDown, kindLagSweep:
		return true
	}
	return false
}

// firstDelivery is every delivering session's time from its start write to
// its first delivery. Under r.mu.
func (fl *Fleet) firstDelivery(r *Record) Latency {
	fl.mu.Lock()
	ids, starts := slices.Clone(fl.sessions), slices.Clone(fl.starts)
	fl.mu.Unlock()
	var took []float64
	for i, id := range ids {
		if s := r.by[id]; s != nil && s.n > 0 {
			took = append(took, s.firstAt.Sub(starts[i]).Seconds())
		}
	}
	return latency(took)
}

// workerAddr is the address worker id dials its sources from: one IP per
// worker, as each Fargate task has its own network interface (awsvpc).
func workerAddr(id string) net.Addr {
	var n int
	_, _ = fmt.Sscanf(id, "w-%d", &n)
	return &net.TCPAddr{IP: net.IPv4(10, 0, byte(n/250), byte(1+n%250)), Port: 40000}
}

// DDBDown makes the table unreachable for every running worker for d, then
// reachable again, and records the fault at the outage's end: every STARTED
// session must deliver again (Sessions: all of them), and none may deliver
// from the TTL after the outage began until its end (Quiet): a worker
// trusts its leases for at most TTL − SafetyMargin after its last
// heartbeat was sent, so by then every one has stopped on its own.
func DDBDown(d time.Duration) func(*Fleet) error { return ddbDown(d, 0) }

// ddbDown is DDBDown sparing the first spare running workers (the mutation
// check of the quiet span only: a worker that can still reach the table
// keeps delivering, as one that did not self-fence would).
func ddbDown(d time.Duration, spare int) func(*Fleet) error {
	return func(fl *Fleet) error {
		start := time.Now()
		end := start.Add(d)
		rs := fl.Running()
		if len(rs) <= spare {
			return fmt.Errorf("fleetsim: ddb-down: %d workers running", len(rs))
		}
		rs = rs[spare:]
		quiet := start.Add(streamer.DefaultConfig().LeaseTTL)
		fl.Record.quietSpan(quiet, end)
		for _, m := range rs {
			m.store.SetDown(end)
		}
		time.Sleep(d)
		for _, m := range rs {
			m.store.SetDown(time.Time{})
		}
		fl.Record.fault(Fault{Kind: kindDDBDown, At: end, Sessions: fl.Sessions(), Quiet: quiet})
		return nil
	}
}

// AddMore starts n more workers.
func AddMore(n int) func(*Fleet) error {
	return func(fl *Fleet) error {
		_, err := fl.AddWorkers(n)
		return err
	}
}

// lagSweepLag is how far by_owner lags behind in lag-sweep: twice
// IndexLagBound, so the dead worker's record moves to DONE before the index
// shows the session it acquired last.
var lagSweepLag = 2 * lease.DefaultConfig("").IndexLagBound

// lagSweepBound is the README's bound for such a session ("dark for up to
// the lag plus 5 min": the lag, then a DoneSweepEvery), plus the 5 s of
// recoveryBound for its claim and dial.
func lagSweepBound() time.Duration {
	return lagSweepLag + lease.DefaultConfig("").DoneSweepEvery() + 5*time.Second
}

// LagSweep holds by_owner lagSweepLag behind (by_worker_list is not), starts
// one session, and kills the worker that acquires it as soon as it has:
// the dead worker's by_owner does not show the session until after its
// record may move to DONE, so only the sweep of DONE records finds it. Its
// other sessions are a "kill" fault (the usual bound); the last one a
// "lag-sweep" fault bounded by lagSweepBound.
func LagSweep(fl *Fleet) error {
	if err := fl.Table.LagEpisode(schema.IndexByOwner, lagSweepLag, time.Minute); err != nil {
		return err
	}
	before := len(fl.Sessions())
	// Its start notification is lost: a worker that had received it and
	// found the session held would keep it in its mailbox and take the
	// session over once its owner is seen dead (a faster path than the
	// sweep); the scenario plays the sweep's case, a session nobody was
	// told of, found by reconciliation.
	if err := fl.startSessions(1, false); err != nil {
		return err
	}
	id := fl.Sessions()[before]
	var owner *Member
	for deadline := time.Now().Add(time.Minute); owner == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("fleetsim: lag-sweep: nobody acquired %s within a minute", id)
		}
		it, err := fl.Table.Mem().Get(context.Background(), id)
		if err != nil || it.Owner == "" {
			continue
		}
		for _, m := range fl.Running() {
			if m.ID == it.Owner {
				owner = m
			}
		}
	}
	// The episode ends with the acquire: the takeover's writes reach
	// by_owner as usual (else the dead worker's by_owner would keep
	// showing its old sessions, and its record would not move to DONE
	// before the index caught up).
	if err := fl.Table.LagEpisode(schema.IndexByOwner, 0, 0); err != nil {
		return err
	}
	now := time.Now()
	rest := slices.DeleteFunc(fl.ownedBy([]*Member{owner}), func(s string) bool { return s == id })
	fl.Record.fault(Fault{Kind: "kill", Workers: []string{owner.ID}, At: now, Sessions: rest})
	fl.Record.fault(Fault{Kind: kindLagSweep, Workers: []string{owner.ID}, At: now, Sessions: []string{id}, Bound: lagSweepBound()})
	fl.crash(owner)
	return nil
}

// dialLimited configures the workers with the source's connection-rate
// limit for every simulated source host (fleet.go's h<N>.src.test).
func dialLimited(l feed.ConnLimit) func(*streamer.Config) {
	return func(w *streamer.Config) {
		w.DialLimits = []streamer.DialLimit{{Pattern: "*.src.test", Max: l.Max, Per: l.Per}}
	}
}

// faultNames are this file's scenarios in `make sim`'s all: source-limit
// is run by name, like crash-throttled, for it shows sessions never
// delivering once a worker has more sessions on the host than the limit
// (docs/worker.md).
var faultNames = []string{"ddb-down", "burst-start", "crash-big", "lag-sweep"}

// addFaultScenarios adds this file's scenarios to all (base: the fleet's
// size and length d; with names a copy of base with its steps).
func addFaultScenarios(all map[string]Scenario, base Scenario, with func(string, ...Step) Scenario) {
	d := base.Duration
	at := faultAt(d, base.Ramp)
	all["ddb-down"] = with("ddb-down", Step{At: at, Do: DDBDown(time.Minute)})
	burst := with("burst-start")
	burst.Ramp = time.Minute
	all["burst-start"] = burst
	// Every session on one host that refuses a worker's address beyond
	// Binance's documented rate (feed.BinanceConnLimit).
	limit := with("source-limit", Step{At: at, Do: KillOne})
	limit.Hosts = 1
	limit.Fleet = func(c *Config) { c.ConnLimit = feed.BinanceConnLimit }
	all["source-limit"] = limit
	// The same, with every worker told the source's limit
	// (WSFLEET_DIAL_LIMITS): it never dials over it, the sessions over a
	// window wait their turn.
	paced := limit
	paced.Name = "source-limit-paced"
	paced.Fleet = func(c *Config) { c.ConnLimit = feed.BinanceConnLimit; c.Worker = dialLimited(feed.BinanceConnLimit) }
	all["source-limit-paced"] = paced
	// One worker takes every session (WSFLEET_MAX_SESSIONS raised to the
	// sessions: the capacity bench's process held 19,000); the others
	// start once it holds them and it keeps them (rebalancing off: the
	// scenario plays a fleet where a worker holds that many, not a fleet
	// moving them off), and it is killed at the fault time.
	// It claims at WSFLEET_CLAIMS_PER_SECOND: the others start 30 s after
	// it could have claimed them all, and it dies at the fault time, or 30 s
	// after they started (the run then lasts 5 min more at least).
	claimAll := time.Duration(float64(base.Sessions) / streamer.DefaultConfig().ClaimsPerSecond * float64(time.Second))
	addAt := base.Ramp + claimAll + 30*time.Second
	killAt := max(at, addAt+30*time.Second)
	big := with("crash-big", Step{At: addAt, Do: AddMore(base.Workers - 1)}, Step{At: killAt, Do: KillOne})
	big.Workers = 1
	big.Duration = max(d, killAt+5*time.Minute)
	big.Fleet = func(c *Config) {
		c.Worker = func(w *streamer.Config) { w.MaxSessions, w.RebalanceEvery = max(w.MaxSessions, base.Sessions), 0 }
	}
	all["crash-big"] = big
	lag := with("lag-sweep", Step{At: at, Do: LagSweep})
	lag.Duration = max(d, at+lagSweepBound()+time.Minute)
	all["lag-sweep"] = lag
}
