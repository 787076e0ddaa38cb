// The fault schedule: drawn from the seed (NewPlan), or the demo plan.

package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Step is one planned fault. Everything random about it is drawn from the
// seed when the plan is made; Pick seeds the choice of sessions at run time
// (among the sessions that exist then).
type Step struct {
	N     int           `json:"n"`
	Round int           `json:"round"`
	Kind  string        `json:"kind"`
	Gap   time.Duration `json:"gap_ns"` // quiet time before it
	// Slot is the worker slot restarted with a clock offset (1-based). The
	// victim of a kill-9 or a zombie is drawn at run time with Pick among
	// the busiest half of the workers.
	Slot int `json:"slot,omitempty"`
	// Hold is how long the fault lasts (zombie pause, engine outage,
	// partition, refusal).
	Hold time.Duration `json:"hold_ns,omitempty"`
	// Count is how many sessions a source fault or the churn touches.
	Count int `json:"count,omitempty"`
	// Abort: the source drops without a close frame (TCP closed).
	Abort bool `json:"abort,omitempty"`
	// Offset is the clock offset (clock-offset).
	Offset time.Duration `json:"offset_ns,omitempty"`
	// MaxAge is the source's max connection age (source-schedule; its
	// shutdown notice comes scheduleNotice before).
	MaxAge time.Duration `json:"max_age_ns,omitempty"`
	Pick   uint64        `json:"pick"`
}

// Plan is the whole schedule of a seed: more steps than a run of Duration
// needs (the runner stops starting new ones once Duration has passed, the
// first round always whole), so that a run lasts what was asked whatever
// the machine's speed.
type Plan struct {
	Name  string `json:"name,omitempty"` // PlanDemo, or the seeded schedule
	Seed  int64  `json:"seed"`
	Steps []Step `json:"steps"`
	// NoSink: the workers sink to stdout, the sink faults are not planned.
	NoSink bool `json:"no_sink,omitempty"`
	// Model: the stack runs on the DynamoDB model, whose faults are
	// planned (false: dynalite alone, and evidence from before the model).
	Model bool `json:"model,omitempty"`
	// PolicyAfter: with no Duration (one round), the feed switches to
	// refuse-newer after step PolicyAfter (0: never); with a Duration it
	// switches at the first step boundary after half of it.
	PolicyAfter int `json:"policy_after"`
}

// estimate is a step's expected length with its gap (to fill a duration).
func estimate(s Step, c Config) time.Duration {
	w := c.Stack.Worker
	switch s.Kind {
	case KindKill:
		return s.Gap + w.LeaseTTL + w.HeartbeatEvery/2 + time.Second
	case KindZombie, KindPartition:
		return s.Gap + s.Hold + w.HeartbeatEvery + 2*time.Second // woken / thawed, it exits; its slot starts again
	case KindRolling:
		return s.Gap + time.Duration(c.Stack.Workers)*3*time.Second
	case KindDynamoDown:
		return s.Gap + s.Hold + w.ReconcileEvery + 2*time.Second + w.CheckpointEvery // + checkpointsCatchUp
	case KindSQSDown:
		return s.Gap + s.Hold + 2*time.Second
	case KindRefuse:
		return s.Gap + s.Hold + c.ReconnectMax + time.Second
	case KindSchedule:
		return s.Gap + s.Hold + s.MaxAge + c.ReconnectMax + 2*time.Second
	case KindChurn:
		return s.Gap + 2*w.HeartbeatEvery + 3*time.Second
	case KindScaleOut:
		return s.Gap + w.MinHold/2 + 3*w.RebalanceEvery + 2*time.Second
	case KindScaleIn:
		return s.Gap + 3*time.Second
	case KindSinkLatency, KindSinkRefuse, KindSinkFreeze, KindSourcePoison:
		return s.Gap + s.Hold + 3*time.Second + w.CheckpointEvery
	case KindSinkFreezeDynamo:
		return s.Gap + s.Hold + w.HeartbeatEvery + 2*time.Second
	case KindSinkRefuseDynamo:
		return s.Gap + s.Hold + w.LeaseTTL + 3*time.Second + w.CheckpointEvery
	case KindIndexLag:
		return s.Gap + max(s.Hold, w.LeaseTTL+modelLag) + 2*time.Second
	case KindThrottle, KindAmbiguous:
		return s.Gap + s.Hold + w.ReconcileEvery + 2*time.Second
	default:
		return s.Gap + 2*time.Second
	}
}

// demoKinds are the demo plan's fault kinds, in its order.
var demoKinds = []string{KindKill, KindRolling, KindChurn}

// demoSteps are the demo plan (`make demo`): kill -9 of one of the busiest
// workers, a SIGTERM rolling restart of every worker (a deploy), then
// start / stop / re-start churn of a fifth of the sessions. Nothing in it
// is drawn from the seed.
func demoSteps(c Config) []Step {
	var out []Step
	for i, k := range demoKinds {
		s := Step{Round: 1, Kind: k, Gap: c.GapMax, Pick: uint64(i + 1)}
		if k == KindChurn {
			s.Count = max(1, c.Sessions/5)
		}
		out = append(out, s)
	}
	return out
}

// NewPlan makes the schedule of c. The demo plan is demoSteps. Otherwise it
// draws from c.Seed: round 1 gives one worker a clock offset first (so that
// it lives through every later fault), then every other fault kind in a
// random order; later rounds shuffle them again, for about twice c.Duration
// by the steps' estimated lengths (none when c.Duration is 0). A one-round
// run of every kind (the test's short run) runs the demo plan's steps right
// after the clock offset, in place of its kinds: one stack covers both.
func NewPlan(c Config) Plan {
	rng := rand.New(rand.NewPCG(uint64(c.Seed), 0x9e3779b97f4a7c15))
	w := c.Stack.Worker
	p := Plan{Name: c.Plan, Seed: c.Seed, NoSink: !c.awsSink(), Model: c.Stack.DynamoModel != ""}
	var planned time.Duration
	add := func(s Step) {
		s.N = len(p.Steps) + 1
		p.Steps = append(p.Steps, s)
		planned += estimate(s, c)
	}
	if c.Plan == PlanDemo {
		for _, s := range demoSteps(c) {
			add(s)
		}
		return p
	}
	between := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
	}
	workers := c.Stack.Workers
	for round := 1; ; round++ {
		kinds := []string{KindKill, KindZombie, KindRolling, KindDynamoDown, KindPartition, KindSQSDown, KindSourceDrop, KindRefuse, KindSchedule, KindChurn, KindScaleOut, KindScaleIn}
		if c.awsSink() {
			kinds = append(kinds, SinkKinds...)
		}
		if c.Stack.DynamoModel != "" {
			kinds = append(kinds, ModelKinds...)
		}
		rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
		demo := round == 1 && c.Duration == 0 && len(c.Kinds) == 0
		if demo {
			kinds = slices.DeleteFunc(kinds, func(k string) bool { return slices.Contains(demoKinds, k) })
		}
		if round == 1 {
			kinds = append([]string{KindClockOffset}, kinds...)
		}
		if len(c.Kinds) > 0 {
			kinds = slices.DeleteFunc(kinds, func(k string) bool { return !slices.Contains(c.Kinds, k) })
		}
		for i, k := range kinds {
			s := Step{Round: round, Kind: k, Gap: between(c.GapMin, c.GapMax), Pick: rng.Uint64()}
			sess := max(1, c.Sessions/8)
			switch k {
			case KindZombie, KindPartition:
				// Woken (thawed) after its watchers had to declare it dead
				// and take its sessions over: past the crash bound.
				s.Hold = w.LeaseTTL + w.HeartbeatEvery/2 + between(1500*time.Millisecond, 3*time.Second)
			case KindDynamoDown:
				s.Hold = 2 * w.LeaseTTL
			case KindSQSDown:
				s.Hold = between(3*w.ReconcileEvery, 5*w.ReconcileEvery)
				s.Count = 1 + rng.IntN(sess)
			case KindSourceDrop:
				s.Count = sess + rng.IntN(sess+1)
				s.Abort = rng.IntN(2) == 0
			case KindRefuse:
				s.Count = 1 + rng.IntN(sess)
				s.Hold = between(time.Second, 3*time.Second)
			case KindSchedule:
				// Every connection opened for 2–3 max ages ends at its
				// max age, 2.5–3.5 s, its notice 1 s before: the planned
				// sessions switch on the notice (before their own max
				// age), the others are closed at the age and reconnect;
				// Count of those are dropped at the start, onto the
				// schedule (it applies to the connections opened after it
				// is set).
				s.MaxAge = between(2500*time.Millisecond, 3500*time.Millisecond).Round(100 * time.Millisecond)
				s.Hold = between(2*s.MaxAge, 3*s.MaxAge)
				if c.Duration == 0 {
					s.Hold = between(2*s.MaxAge, 2*s.MaxAge+time.Second) // the short run: one round, kept short
				}
				s.Count = sess + rng.IntN(sess+1)
			case KindChurn:
				s.Count = 1 + rng.IntN(sess)
			case KindSinkLatency, KindSinkRefuse:
				s.Hold = between(4*time.Second, 8*time.Second)
				if c.Duration == 0 {
					s.Hold = between(2*time.Second, 3*time.Second) // the short run: one round, kept short
				}
			case KindSinkFreeze:
				s.Hold = 2 * w.LeaseTTL
			case KindSourcePoison:
				// At least two sessions: one per poison kind.
				s.Count = 2 + rng.IntN(sess)
				s.Hold = between(3*time.Second, 5*time.Second)
				if c.Duration == 0 {
					s.Hold = between(2*time.Second, 3*time.Second) // the short run: one round, kept short
				}
			case KindSinkFreezeDynamo:
				// Past the crash bound, as a partition: declared dead.
				s.Hold = w.LeaseTTL + w.HeartbeatEvery/2 + between(1500*time.Millisecond, 3*time.Second)
			case KindSinkRefuseDynamo:
				// Longer than TTL − margin (every trust deadline passes:
				// the last heartbeat was sent before the freeze), shorter
				// than the TTL (a watcher needs the counter unchanged for
				// a TTL on its own clock): trust lapses, then heartbeats
				// succeed again; a worker may still be declared dead
				// (the counter is read late), both are judged.
				s.Hold = w.LeaseTTL - w.SafetyMargin + between(200*time.Millisecond, 500*time.Millisecond)
			case KindIndexLag:
				// Long enough for the watchers to declare the killed worker
				// dead and look for its sessions while the index still lags.
				s.Hold = w.LeaseTTL + modelLag + between(time.Second, 3*time.Second)
			case KindThrottle, KindAmbiguous:
				s.Hold = between(w.LeaseTTL, 2*w.LeaseTTL)
			case KindClockOffset:
				s.Slot = 1 + rng.IntN(workers)
				mag := time.Duration(float64(c.ClockOffsetMax) * (0.6 + 0.4*rng.Float64()))
				mag = mag.Round(time.Millisecond)
				if rng.IntN(2) == 0 {
					mag = -mag
				}
				s.Offset = mag
			}
			add(s)
			if demo && i == 0 {
				for _, d := range demoSteps(c) {
					add(d)
				}
			}
		}
		if planned >= 2*c.Duration || len(kinds) == 0 {
			break
		}
	}
	if c.SwitchPolicy && c.Duration == 0 && len(p.Steps) > 1 {
		p.PolicyAfter = len(p.Steps) / 2
	}
	return p
}

// kinds are the fault kinds the plan is meant to inject.
func (p Plan) kinds() []string {
	if p.Name == PlanDemo {
		return demoKinds
	}
	return slices.DeleteFunc(slices.Clone(AllKinds), func(k string) bool {
		return (p.NoSink && isSinkKind(k)) || (!p.Model && isModelKind(k))
	})
}

// title names the plan in the outputs; replay is the command that runs it
// again.
func (p Plan) title() string {
	if p.Name == PlanDemo {
		return "the demo plan"
	}
	return fmt.Sprintf("seed %d", p.Seed)
}

func (p Plan) replay(s Settings) string {
	if p.Name == PlanDemo {
		return "make demo"
	}
	return fmt.Sprintf("make chaos SEED=%d DURATION=%s", p.Seed, time.Duration(s.DurationMs)*time.Millisecond)
}

// String is the plan, one step a line (the first round, then a count).
func (p Plan) String() string {
	var b strings.Builder
	for i, s := range p.Steps {
		if s.Round > 1 {
			fmt.Fprintf(&b, "  … and %d more steps in later rounds, drawn the same way (started while the run's duration lasts)\n", len(p.Steps)-i)
			break
		}
		fmt.Fprintf(&b, "  #%-3d round %d  +%-5s %-16s", s.N, s.Round, s.Gap.Round(100*time.Millisecond), s.Kind)
		if s.Slot > 0 {
			fmt.Fprintf(&b, " worker slot %d", s.Slot)
		}
		if s.Hold > 0 {
			fmt.Fprintf(&b, " for %v", s.Hold.Round(100*time.Millisecond))
		}
		if s.Count > 0 {
			fmt.Fprintf(&b, " %d session(s)", s.Count)
		}
		if s.Kind == KindSourceDrop {
			fmt.Fprintf(&b, " abort=%v", s.Abort)
		}
		if s.MaxAge > 0 {
			fmt.Fprintf(&b, " max age %v, notice %v before", s.MaxAge, scheduleNotice)
		}
		if s.Offset != 0 {
			fmt.Fprintf(&b, " offset %+v", s.Offset)
		}
		b.WriteByte('\n')
		if s.N == p.PolicyAfter {
			b.WriteString("  --- the feed switches to refuse-newer ---\n")
		}
	}
	return b.String()
}
