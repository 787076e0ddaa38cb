//go:build fleetsim

package fleetsim

import (
	"testing"
	"time"
)

// TestStandbyCrashLosesNothing kills the busiest worker of a small fleet
// whose sources cannot replay, half the sessions with a hot standby
// (standby-crash): the standby sessions lose nothing (their standbys were
// promoted, no dial), the control sessions lose what their source sent
// while nobody was connected, no session has two owners delivering at
// once, and the time from the owner's death declaration to the first
// delivery by the new owner is measured for both groups (logged, not
// asserted: a figure of the report, goals.go).
func TestStandbyCrashLosesNothing(t *testing.T) {
	sc := Scenarios(4, 40, 2*time.Minute)["standby-crash"]
	f := runT(t, sc, 1, nil)
	sb := f.Standby
	if sb == nil {
		t.Fatal("standby-crash: no standby figures")
	}
	if sb.Sessions == 0 || sb.Control == 0 {
		t.Fatalf("standby-crash: %d standby and %d control sessions: want both", sb.Sessions, sb.Control)
	}
	if f.DoubleOwners != 0 || f.Fenced != 0 {
		t.Errorf("%d sessions with two owners delivering at once (%d pairs, %d deliveries), %d fenced", f.DoubleOwners, f.DoublePairs, f.Overlapping, f.Fenced)
	}
	if f.Silent != 0 {
		t.Errorf("%d sessions never delivered", f.Silent)
	}
	if sb.Lost != 0 || f.Gaps != 0 {
		t.Errorf("the standby sessions lost %d seqs (Gaps %d): want 0", sb.Lost, f.Gaps)
	}
	if sb.Promotions == 0 {
		t.Error("no standby was promoted")
	}
	if sb.Takeover.N == 0 {
		t.Error("no standby session's takeover was measured (the crash hit none, or its owner was never declared dead)")
	}
	if sb.ControlTakeover.N > 0 && sb.ControlLost == 0 {
		t.Errorf("the control sessions a crash hit lost nothing on a source that cannot replay: the control shows nothing")
	}
	for _, r := range f.Faults {
		if r.Recovered != r.Sessions {
			t.Errorf("%s of %v: %d of %d sessions delivered again (not: %v)", r.Kind, r.Workers, r.Recovered, r.Sessions, r.Unrecovered)
		}
	}
	if sb.Path.Acquire.N != sb.Takeover.N {
		t.Errorf("%d of the %d standby takeovers split at the new owner's acquire: want every one", sb.Path.Acquire.N, sb.Takeover.N)
	}
	t.Logf("standby: %d sessions, %d promotions, %d lost; declared dead → first message %s (notice %s, acquire %s, deliver %s); control: %d sessions, %d lost, %s (notice %s, acquire %s, deliver %s); unanchored %d",
		sb.Sessions, sb.Promotions, sb.Lost, sb.Takeover, sb.Path.Notice, sb.Path.Acquire, sb.Path.Deliver,
		sb.Control, sb.ControlLost, sb.ControlTakeover, sb.ControlPath.Notice, sb.ControlPath.Acquire, sb.ControlPath.Deliver, sb.Unanchored)
}

// The standby goal is met when every standby run's declared dead → first
// message p99 is within 50 ms, missed when one is above, and not measured
// without a standby run whose crash hit a standby session.
func TestGoalStandbyFromTakeoverP99(t *testing.T) {
	run := func(p99 float64) Measured {
		var m Measured
		m.Scenario, m.Workers, m.Sessions = "standby-crash", 10, 1000
		m.Standby = &StandbyFigures{Share: 0.5, Sessions: 500, Control: 500, Promotions: 60,
			Takeover: Dark{N: 50, P50: p99 / 2, P99: p99, Max: p99}, ControlTakeover: Dark{N: 50, P50: 0.9, P99: 0.95, Max: 0.95}}
		return m
	}
	for _, c := range []struct {
		name string
		runs []Measured
		want string
	}{
		{"within", []Measured{run(0.044)}, goalMet},
		{"above", []Measured{run(0.044), run(0.051)}, goalMissed},
		{"none", []Measured{{Figures: Figures{Scenario: "crash"}}}, goalNotMeasured},
	} {
		g := Report{Runs: c.runs}.goalStandby()
		if g.Status != c.want {
			t.Errorf("%s: goal %q, want %q (%s)", c.name, g.Status, c.want, g.Measured)
		}
	}
}
