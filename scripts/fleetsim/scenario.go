//go:build fleetsim

package fleetsim

import (
	"fmt"
	"time"
)

// Scenario is one simulated run: a fleet, its sessions and what happens to
// it, in virtual time.
type Scenario struct {
	Name     string
	Workers  int
	Sessions int
	Rate     float64       // messages per second per session
	Duration time.Duration // virtual, from the fleet's start
	// Skew bounds each worker's clock offset (drawn from the seed).
	Skew time.Duration
	// Faults happen at their At (from the fleet's start), in order.
	Faults []Step
}

// Step is one operation of a scenario at a virtual instant.
type Step struct {
	At time.Duration
	Do func(*Fleet) error
}

// KillOne kills the first running worker (a kill -9).
func KillOne(fl *Fleet) error {
	r := fl.Running()
	if len(r) == 0 {
		return fmt.Errorf("fleetsim: kill: no worker running")
	}
	fl.Kill(r[0])
	return nil
}

// KillAZ kills a third of the running workers at once (the loss of one
// availability zone of three).
func KillAZ(fl *Fleet) error {
	r := fl.Running()
	n := len(r) / 3
	if n == 0 {
		return fmt.Errorf("fleetsim: kill an AZ: %d workers running", len(r))
	}
	fl.Kill(r[:n]...)
	return nil
}

// TermOne shuts the first running worker down gracefully (SIGTERM).
func TermOne(fl *Fleet) error {
	r := fl.Running()
	if len(r) == 0 {
		return fmt.Errorf("fleetsim: term: no worker running")
	}
	fl.Term(r[0])
	return nil
}

// Scenarios are the named scenarios at a fleet's size (workers × sessions),
// each lasting d of virtual time (faults at a third of it, the fleet
// settled by then).
func Scenarios(workers, sessions int, d time.Duration) map[string]Scenario {
	base := Scenario{Workers: workers, Sessions: sessions, Rate: 1, Duration: d, Skew: 2 * time.Second}
	with := func(name string, steps ...Step) Scenario {
		s := base
		s.Name, s.Faults = name, steps
		return s
	}
	return map[string]Scenario{
		"steady": with("steady"),
		"crash":  with("crash", Step{At: d / 3, Do: KillOne}),
		"az":     with("az", Step{At: d / 3, Do: KillAZ}),
		"term":   with("term", Step{At: d / 3, Do: TermOne}),
	}
}

// Run plays sc with seed and judges it. Call it inside a testing/synctest
// bubble; it returns once every goroutine of the fleet has ended.
func Run(sc Scenario, seed uint64) (Figures, error) {
	return run(sc, seed, nil)
}

// run is Run with a hook after the fleet started (the mutation check's
// thief).
func run(sc Scenario, seed uint64, after func(*Fleet) error) (fig Figures, err error) {
	fl, err := New(Config{Seed: seed, Rate: sc.Rate, Skew: sc.Skew})
	if err != nil {
		return Figures{}, err
	}
	defer fl.Close()
	if err := fl.StartSessions(sc.Sessions); err != nil {
		return Figures{}, err
	}
	if _, err := fl.AddWorkers(sc.Workers); err != nil {
		return Figures{}, err
	}
	if after != nil {
		if err := after(fl); err != nil {
			return Figures{}, err
		}
	}
	for _, st := range sc.Faults {
		time.Sleep(time.Until(fl.t0.Add(st.At)))
		if err := st.Do(fl); err != nil {
			return Figures{}, fmt.Errorf("fleetsim: %s at %s: %w", sc.Name, st.At, err)
		}
	}
	time.Sleep(time.Until(fl.t0.Add(sc.Duration)))
	return fl.Judge(sc.Name), nil
}
