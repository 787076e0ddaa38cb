// Tests of the plan and of the config it is drawn from.

package chaos

import (
	"strings"
	"testing"
	"time"
)

func TestPlan(t *testing.T) {
	c := ShortConfig()
	c.Seed = 42
	a, b := NewPlan(c), NewPlan(c)
	if a.String() != b.String() {
		t.Fatal("the same seed made two plans")
	}
	c.Seed = 43
	if NewPlan(c).String() == a.String() {
		t.Fatal("two seeds made the same plan")
	}
	kinds := map[string]bool{}
	for _, s := range a.Steps {
		kinds[s.Kind] = true
		if (s.Kind == KindZombie || s.Kind == KindPartition) && s.Hold <= time.Duration(c.Settings().Bounds.CrashMs)*time.Millisecond {
			t.Fatalf("%s held %v, not past the crash bound (its watchers must have declared it dead)", s.Kind, s.Hold)
		}
		if s.Kind == KindDynamoDown && s.Hold != 2*c.Stack.Worker.LeaseTTL {
			t.Fatalf("DynamoDB down %v", s.Hold)
		}
		if s.Kind == KindClockOffset && (s.Offset == 0 || s.Offset.Abs() > c.ClockOffsetMax) {
			t.Fatalf("offset %v outside the max %v", s.Offset, c.ClockOffsetMax)
		}
		if s.Kind == KindSchedule && (s.MaxAge < 2500*time.Millisecond || s.MaxAge > 3500*time.Millisecond || s.MaxAge <= scheduleNotice || s.Hold < 2*s.MaxAge || s.Count < 1) {
			t.Fatalf("source schedule: max age %v (notice %v), for %v, %d session(s) dropped onto it", s.MaxAge, scheduleNotice, s.Hold, s.Count)
		}
		if s.Kind == KindSourcePoison && (s.Count < len(poisonKinds) || s.Hold < 2*time.Second || s.Hold > 3*time.Second) {
			t.Fatalf("source poison: %d session(s) (one per poison kind at least), for %v (2–3 s in the short run)", s.Count, s.Hold)
		}
	}
	for _, k := range AllKinds {
		if !kinds[k] {
			t.Fatalf("the short plan lacks %s", k)
		}
	}
	if len(a.Steps) != len(AllKinds) || a.Steps[0].Kind != KindClockOffset {
		t.Fatalf("short plan: %s", a)
	}
	// The demo plan is fixed, and the short run runs its steps right after
	// the clock offset.
	d := c
	d.Plan = PlanDemo
	demo := NewPlan(d)
	d.Seed = 42
	if demo.String() != NewPlan(d).String() || len(demo.Steps) != len(demoKinds) || demo.PolicyAfter != 0 {
		t.Fatalf("demo plan:\n%s", demo)
	}
	for i, s := range demo.Steps {
		got := a.Steps[i+1]
		if got.Kind != s.Kind || got.Gap != s.Gap || got.Count != s.Count || got.Pick != s.Pick || s.Kind != demoKinds[i] {
			t.Fatalf("short step %d %+v, demo step %+v", i+2, got, s)
		}
	}
	long := DefaultConfig()
	long.Seed = 42
	lp := NewPlan(long)
	var planned time.Duration
	for _, s := range lp.Steps {
		planned += estimate(s, long)
	}
	if planned < 2*long.Duration || len(lp.Steps) < 4*len(AllKinds) || lp.PolicyAfter != 0 {
		t.Fatalf("10-minute plan: %d steps, %v planned", len(lp.Steps), planned)
	}
}

// The demo plan's result lists its own kinds only: none is missing.
func TestDemoPlanKinds(t *testing.T) {
	s := newScenario()
	res := Analyze(s.ev, s.set, Plan{Name: PlanDemo})
	if !res.OK() || len(res.Missing) != len(demoKinds)-1 || len(res.Kinds) != len(demoKinds) || res.Kinds[0].Kind != KindKill {
		t.Fatalf("missing %v, kinds %+v, violations %+v", res.Missing, res.Kinds, res.Violations)
	}
	var md strings.Builder
	WriteReport(&md, res)
	if !strings.Contains(md.String(), "the demo plan") || !strings.Contains(md.String(), "`make demo`") {
		t.Fatalf("report:\n%s", md.String())
	}
}

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	c.OutDir = "x"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	d := DemoConfig()
	d.OutDir = "x"
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	c.Stack.Workers, c.Stack.InMemory, c.FeedPingEvery, c.OutDir, c.Plan = 2, true, 5*time.Second, "", "nope"
	c.Stack.DynamoProxies = false
	c.Stack.TenureHeader = ""
	c.StandbyEvery = 1
	err := c.Validate()
	for _, want := range []string{"workers", "on disk", "feed ping", "out dir", "plan", "proxy", "tenure header", "standby sessions every 1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}
