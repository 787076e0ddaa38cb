//go:build fleetsim

package fleetsim

import (
	"fmt"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/simddb"
	"github.com/wsfleet/wsfleet/workers/streamer"
)

// Scenario is one simulated run: a fleet, its sessions and what happens to
// it, in virtual time.
type Scenario struct {
	Name     string
	Workers  int
	Sessions int
	Rate     float64       // messages per second per session
	Duration time.Duration // virtual, from the fleet's start
	// Ramp spreads the sessions' starts over this long from when the
	// workers are up (a batch a second), as ingest writes them in a live
	// fleet; 0: all at once.
	Ramp time.Duration
	// Hosts: Config.Hosts (0: a source host per session).
	Hosts int
	// Table, when set, changes the simulated table's configuration
	// (simddb.AWS() by default).
	Table func(*simddb.Config)
	// Skew bounds each worker's clock offset (drawn from the seed).
	Skew time.Duration
	// Faults happen at their At (from the fleet's start), in order.
	Faults []Step
	// Fleet, when set, changes the fleet's configuration.
	Fleet func(*Config)
	// MaxSessions, when set, is every worker's WSFLEET_MAX_SESSIONS
	// (before Fleet's Worker changes it).
	MaxSessions int
	// Progress, when set, is called once a virtual minute while the
	// scenario runs (progress.go; make sim's progress lines).
	Progress func(Progress)
	// StandbyShare: Config.StandbyShare (standby.go): every source cannot
	// replay, and that share of the sessions has a hot standby.
	StandbyShare float64
}

// Step is one operation of a scenario at a virtual instant.
type Step struct {
	At time.Duration
	Do func(*Fleet) error
}

// KillOne kills the running worker that owns the most sessions (a kill -9).
func KillOne(fl *Fleet) error {
	m := fl.busiest()
	if m == nil {
		return fmt.Errorf("fleetsim: kill: no worker running")
	}
	fl.Kill(m)
	return nil
}

// busiest is the running worker the table says owns the most sessions (the
// first of them by id on a tie); nil when none runs.
func (fl *Fleet) busiest() *Member {
	var best *Member
	n := -1
	for _, m := range fl.Running() {
		if k := len(fl.ownedBy([]*Member{m})); k > n {
			best, n = m, k
		}
	}
	return best
}

// TermOne shuts the running worker that owns the most sessions down
// gracefully (SIGTERM).
func TermOne(fl *Fleet) error {
	m := fl.busiest()
	if m == nil {
		return fmt.Errorf("fleetsim: term: no worker running")
	}
	fl.Term(m)
	return nil
}

// ScaleOut doubles the running fleet (as many workers again, added as
// AddWorkers does): the new ones get their share by rebalancing moves.
func ScaleOut(fl *Fleet) error {
	_, err := fl.AddWorkers(len(fl.Running()))
	return err
}

// Scenarios are the named scenarios at a fleet's size (workers × sessions),
// each lasting d of virtual time (faults at faultAt, the fleet settled by
// then).
func Scenarios(workers, sessions int, d time.Duration) map[string]Scenario {
	base := Scenario{Workers: workers, Sessions: sessions, Rate: 1, Duration: d, Skew: 2 * time.Second, Ramp: rampFor(sessions, d),
		MaxSessions: headroom(workers, sessions)}
	at := faultAt(d, base.Ramp)
	with := func(name string, steps ...Step) Scenario {
		s := base
		s.Name, s.Faults = name, steps
		return s
	}
	oneHost := with("az-onehost", Step{At: at, Do: KillAZ})
	oneHost.Hosts = 1
	// The table's write allowance at a tenth of a unit per session (its
	// warm throughput and quota): the sessions' first checkpoints are
	// throttled while they ramp in, and the busiest worker dies 20 s
	// after the ramp.
	throttled := with("crash-throttled", Step{At: base.Ramp + 20*time.Second, Do: KillOne})
	throttled.Table = func(c *simddb.Config) {
		c.Throughput.WarmWCU = max(10, float64(sessions)/10)
		c.Throughput.QuotaWCU = c.Throughput.WarmWCU
	}
	// A crash of the busiest worker on sources that cannot replay, half
	// the sessions with a hot standby (standby.go, issue 39).
	standbyCrash := with("standby-crash", Step{At: at, Do: KillOne})
	standbyCrash.StandbyShare = 0.5
	all := map[string]Scenario{
		"steady":     with("steady"),
		"crash":      with("crash", Step{At: at, Do: KillOne}),
		"az":         with("az", Step{At: at, Do: KillAZ}),
		"term":       with("term", Step{At: at, Do: TermOne}),
		"az-onehost": oneHost,
		"scale-out":  with("scale-out", Step{At: at, Do: ScaleOut}),
		// ECS (ecs_ops.go): a rolling deploy of every task, and ×10 the
		// tasks at the fault time, back halfway from there to the end.
		"deploy-default": with("deploy-default", Step{At: at, Do: DeployStep(ECSDefaults)}),
		"deploy-infra":   withDeadline(with("deploy-infra", Step{At: at, Do: DeployStep(InfraRolling)}), InfraRolling.ShutdownDeadline),
		"scale-out-in": withDeadline(with("scale-out-in", Step{At: at, Do: func(fl *Fleet) error { return fl.ScaleOut(9 * workers) }},
			Step{At: at + (d-at)/2, Do: func(fl *Fleet) error { return fl.ScaleIn(9*workers, InfraRolling.StopTimeout) }}), InfraRolling.ShutdownDeadline),
		// Not in `make sim`'s all: it shows a loss (docs/SCALE.md).
		"crash-throttled": throttled,
		"standby-crash":   standbyCrash,
	}
	addFaultScenarios(all, base, with)
	return all
}

// headroom is the WSFLEET_MAX_SESSIONS that sizes workers × sessions at
// the infra's scaling target (schema.ScalingTargetPercent: the service
// scales on sessions held at 65 % of capacity, where the workers outside
// one of three AZs hold every session) when the worker's default would run
// it fuller (0: the default). At the default's 1,000, 100 workers ×
// 100,000 sessions are 100 % full: a crash or a lost AZ would have nowhere
// to go until ECS replaced the tasks.
func headroom(workers, sessions int) int {
	w := max(workers, 1) * schema.ScalingTargetPercent
	need := (sessions*100 + w - 1) / w // ⌈sessions ÷ workers ÷ 0.65⌉ in integers
	if need <= streamer.DefaultConfig().MaxSessions {
		return 0
	}
	return need
}

// Run plays sc with seed and judges it. Call it inside a testing/synctest
// bubble; it returns once every goroutine of the fleet has ended.
func Run(sc Scenario, seed uint64) (Figures, error) {
	return run(sc, seed, nil)
}

// run is Run with a hook after the fleet started (the mutation check's
// thief).
func run(sc Scenario, seed uint64, after func(*Fleet) error) (fig Figures, err error) {
	cfg := Config{Seed: seed, Rate: sc.Rate, Skew: sc.Skew, Hosts: sc.Hosts, StandbyShare: sc.StandbyShare}
	if sc.Fleet != nil {
		sc.Fleet(&cfg)
	}
	if n, tweak := sc.MaxSessions, cfg.Worker; n > 0 {
		cfg.Worker = func(w *streamer.Config) {
			w.MaxSessions = n
			if tweak != nil {
				tweak(w)
			}
		}
	}
	if sc.Table != nil {
		tc := simddb.AWS()
		sc.Table(&tc)
		cfg.Table = &tc
	}
	fl, err := New(cfg)
	if err != nil {
		return Figures{}, err
	}
	defer fl.Close()
	if sc.Progress != nil {
		defer fl.progress(sc, sc.Progress)()
	}
	if _, err := fl.AddWorkers(sc.Workers); err != nil {
		return Figures{}, err
	}
	if err := ramp(fl, sc.Sessions, sc.Ramp); err != nil {
		return Figures{}, err
	}
	if after != nil {
		if err := after(fl); err != nil {
			return Figures{}, err
		}
	}
	fl.awaitSteady(sc)
	for i, st := range sc.Faults {
		var pre *steadyMark
		if i == 0 {
			pre = fl.markPreFault(st.At)
			fl.watch.keep()
		}
		time.Sleep(time.Until(fl.t0.Add(st.At)))
		fl.markSteady(false)
		fl.endPreFault(pre)
		if err := st.Do(fl); err != nil {
			return Figures{}, fmt.Errorf("fleetsim: %s at %s: %w", sc.Name, st.At, err)
		}
	}
	time.Sleep(time.Until(fl.t0.Add(sc.Duration)))
	fl.markSteady(false)
	return fl.Judge(sc.Name), nil
}

// withDeadline gives every worker of sc the shutdown deadline d (0: the
// worker's default), after sc's own fleet changes.
func withDeadline(sc Scenario, d time.Duration) Scenario {
	if d <= 0 {
		return sc
	}
	sc.Fleet = withWorker(sc.Fleet, func(w *streamer.Config) { w.ShutdownDeadline = d })
	return sc
}

// withWorker is fleet (nil: the defaults) with set applied to every
// worker's configuration after fleet's own worker changes.
func withWorker(fleet func(*Config), set func(*streamer.Config)) func(*Config) {
	return withFleet(fleet, func(c *Config) {
		tweak := c.Worker
		c.Worker = func(w *streamer.Config) {
			if tweak != nil {
				tweak(w)
			}
			set(w)
		}
	})
}

// withFleet is fleet (a scenario's Fleet, nil: none) followed by set.
func withFleet(fleet func(*Config), set func(*Config)) func(*Config) {
	return func(c *Config) {
		if fleet != nil {
			fleet(c)
		}
		set(c)
	}
}

// startsPerSecond bounds the rate the scenarios start sessions at: a start
// adds the session's entry to one of by_unowned's 16 index key values and
// its claim takes it out, so 16 × 1,000 index write units a second (one
// value's limit) carry 8,000 sessions a second; half of that, the headroom
// the steady-state goal keeps on every key (docs/SCALE.md). Faster, the
// index throttles the starts and the claims with them (a first 1,000 ×
// 1,000,000 run, 1M sessions started in 24 s: no session delivering after
// two virtual minutes).
const startsPerSecond = 4000

// faultAt is when a scenario of d whose sessions start over ramp has its
// first fault: a third of the run, or once the ramp is half over again
// when that is later. A ramp that startsPerSecond stretches past a third of
// the run (250 s for 1,000,000 sessions) would otherwise put the fault
// among the starts; the 1,000 × 1,000,000 steady run had every session
// delivering 20 s after it started (its first message, at 0.05 msg/s) and
// all of them by 6 virtual minutes (docs/scale/1000x1000000-warm-steady),
// and 1.5 × 250 s = 375 s falls after that.
func faultAt(d, ramp time.Duration) time.Duration {
	return max(d/3, ramp*3/2)
}

// rampFor is how long the scenarios take to start n sessions in a run of
// d: a tenth of it, or longer when that would start more than
// startsPerSecond.
func rampFor(n int, d time.Duration) time.Duration {
	return max(d/10, time.Duration(float64(n)/startsPerSecond*float64(time.Second)))
}

// ramp starts n sessions over d, a batch a second (all at once when d is
// under a second).
func ramp(fl *Fleet, n int, d time.Duration) error {
	secs := max(1, int(d/time.Second))
	for i := range secs {
		if err := fl.StartSessions(n*(i+1)/secs - n*i/secs); err != nil {
			return err
		}
		if i < secs-1 {
			time.Sleep(time.Second)
		}
	}
	return nil
}
