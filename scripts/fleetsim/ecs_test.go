//go:build fleetsim

package fleetsim

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wsfleet/wsfleet/workers/streamer"
)

// TestKillAZKillsOneAZ: the workers are ECS tasks spread over three AZs
// round robin, and the loss of an AZ kills that AZ's tasks (w-000, w-003,
// w-006, w-009 of ten), not the first third of the running workers.
func TestKillAZKillsOneAZ(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fl, err := New(Config{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer fl.Close()
		if _, err := fl.AddWorkers(10); err != nil {
			t.Fatal(err)
		}
		if err := KillAZ(fl); err != nil {
			t.Fatal(err)
		}
		var dead []string
		for _, m := range fl.Members() {
			if !m.Ended.IsZero() {
				dead = append(dead, m.ID)
			}
		}
		if want := []string{"w-000", "w-003", "w-006", "w-009"}; !slices.Equal(dead, want) {
			t.Errorf("the loss of one AZ of three killed %v, want that AZ's tasks %v", dead, want)
		}
		// ECS keeps the desired count: 4 replacements, none in the lost AZ.
		var running []string
		for _, m := range fl.Running() {
			running = append(running, m.ID)
			if m.AZ == 0 {
				t.Errorf("%s placed in the lost AZ", m.ID)
			}
		}
		if len(running) != 10 {
			t.Errorf("running after the replacements: %v, want 10 tasks", running)
		}
		if ops := fl.ECSOps(); len(ops) != 1 || ops[0].Op != "replace" || ops[0].Tasks != 4 || ops[0].Length < 30 {
			t.Errorf("ECS operations %+v, want one replace of 4 tasks taking a launch time (≥ 30 s)", ops)
		}
	})
}

// A fleet too full to absorb a lost AZ's sessions (6 workers of at most 10
// sessions holding 60) gets them delivering again once ECS's replacements
// are up: the survivors have no room, the new tasks do.
func TestFullFleetRecoversAnAZByReplacements(t *testing.T) {
	sc := Scenario{Name: "az-full", Workers: 6, Sessions: 60, Rate: 1, Duration: 4 * time.Minute, Ramp: 10 * time.Second,
		Skew: 2 * time.Second, Faults: []Step{{At: 80 * time.Second, Do: KillAZ}},
		Fleet: func(c *Config) { c.Worker = func(w *streamer.Config) { w.MaxSessions = 10 } }}
	f := runT(t, sc, 1, nil)
	checkSafeWithin(t, f, 2*time.Minute) // a launch (≤ 45 s) + claims, not a survivor's takeover
	r := faultOf(t, f, "kill")
	if r.Sessions != 20 || r.Recovered != r.Sessions {
		t.Fatalf("the lost AZ's sessions: %d of %d delivering again, want all 20: %s", r.Recovered, r.Sessions, f.Verdict(recoveryBound))
	}
	if r.Max < 30 {
		t.Errorf("recovered within %.1f s: the survivors were full, so not before a replacement's launch (≥ 30 s)", r.Max)
	}
}

// TestLaunchQuota: Fargate's task launch quota is a token bucket of 100
// with 20 a second: 100 launches at once, the next ones 50 ms apart, and a
// full bucket again after 5 idle seconds.
func TestLaunchQuota(t *testing.T) {
	t0 := time.Unix(0, 0)
	e := newECS(ECSConfig{}, 1, t0)
	for i := range 100 {
		if w := e.reserve(t0); w != 0 {
			t.Fatalf("launch %d of the burst waits %s", i+1, w)
		}
	}
	if w := e.reserve(t0); w != 50*time.Millisecond {
		t.Errorf("launch 101 waits %s, want 50ms (20/s)", w)
	}
	for range 48 {
		e.reserve(t0)
	}
	if w := e.reserve(t0); w != 2500*time.Millisecond {
		t.Errorf("launch 150 waits %s, want 2.5s", w)
	}
	t1 := t0.Add(2500*time.Millisecond + 5*time.Second)
	for i := range 100 {
		if w := e.reserve(t1); w != 0 {
			t.Fatalf("after 5 idle seconds, launch %d waits %s", i+1, w)
		}
	}
}

// TestSpreadStopsAcrossAZs: scale-in picks from the AZ with the most
// tasks each time, the newest task first.
func TestSpreadStopsAcrossAZs(t *testing.T) {
	var ms []*Member
	for i, az := range []int{0, 1, 2, 0, 1, 2, 0, 0} {
		ms = append(ms, &Member{ID: string(rune('a' + i)), AZ: az})
	}
	got := ids(spread(ms, 4))
	if want := []string{"h", "g", "d", "e"}; !slices.Equal(got, want) {
		t.Errorf("spread picked %v, want %v", got, want)
	}
}

// TestDeploy plays ECS's rolling update of every task at the short size
// at ECS's defaults (100 %/200 %, stop timeout 30 s): no double owner, no
// loss, every session the old tasks held delivering again within the TTL
// + 5 s of its task's SIGTERM, no task killed; each old task gone and as
// many new ones healthy; the deploy's length at least a Fargate launch
// time. In the short set.
func TestDeploy(t *testing.T) {
	f := deploy(t, "deploy-default", ECSDefaults)
	checkSafe(t, busy(f))
	if op := f.ECS[0]; op.Killed != 0 {
		t.Errorf("%d of %d old tasks killed at the stop timeout %s", op.Killed, shortWorkers, ECSDefaults.StopTimeout)
	}
}

// TestDeployKilledAtStopTimeout: a stop timeout shorter than any graceful
// shutdown (1 ms) kills every old task in its drain before the drain wrote
// anything: its sessions are all still its own (deployKilled).
func TestDeployKilledAtStopTimeout(t *testing.T) { deployKilled(t, time.Millisecond) }

// TestDeployKilledMidDrain: at a stop timeout of 20 ms every old task is
// killed with most of its sessions handed off (seed 1: w-008 hands one to
// w-006, killed 0.2 s before and still listed ALIVE; the reservation holds
// it 5 s). In the short set.
func TestDeployKilledMidDrain(t *testing.T) { deployKilled(t, 20*time.Millisecond) }

// deployKilled runs a deploy whose stop timeout kills every old task in
// its drain: still no double owner, no loss, every session delivering
// again, each killed task gone at its kill (not when its goroutines have
// unwound). A killed task with a watcher that outlives the deploy is taken
// over as a crashed one is, within the TTL + 5 s of its SIGTERM or of that
// watcher's start; one whose watchers were all killed in the deploy too
// waits for their deaths first (seed 1: w-006 ~30 s at 1 ms, w-000 ~20 s;
// killedWatched).
func deployKilled(t *testing.T, stop time.Duration) {
	r := Rolling{MinHealthyPercent: 100, MaxPercent: 200, StopTimeout: stop}
	f, tasks := deployTasks(t, "deploy-killed", r)
	checkSafeWithin(t, busy(f), shortFor)
	for _, rc := range f.Faults {
		t.Logf("%s of %v: %d sessions delivering again after p50 %.1fs, max %.1fs", rc.Kind, rc.Workers, rc.Sessions, rc.P50, rc.Max)
	}
	if op := f.ECS[0]; op.Killed != shortWorkers || op.LongestStop > r.StopTimeout.Seconds() {
		t.Errorf("%d of %d old tasks killed at the stop timeout %s, the longest gone %.3fs after its SIGTERM", op.Killed, shortWorkers, r.StopTimeout, op.LongestStop)
	}
	killedWatched(t, f, tasks)
}

// deploy runs the short deploy-default scenario with r and checks what
// any deploy must do: each old task gone, as many new ones running and
// healthy, one deploy figure, at least a launch time long, its SIGTERMs'
// sessions all delivering again.
func deploy(t *testing.T, name string, r Rolling) Figures {
	t.Helper()
	f, _ := deployTasks(t, name, r)
	return f
}

// deployTasks is deploy, also returning every task of the run (its
// workers, their start and end in seconds from the fleet's start).
func deployTasks(t *testing.T, name string, r Rolling) (Figures, []task) {
	t.Helper()
	var tasks []task
	sc := Scenarios(shortWorkers, shortSessions, shortFor)["deploy-default"]
	sc.Name = name
	var running, healthy int
	sc.Faults = []Step{{At: shortFor / 3, Do: func(fl *Fleet) error {
		old := fl.Running()
		if err := fl.Deploy(r); err != nil {
			return err
		}
		for _, m := range old {
			if m.Ended.IsZero() {
				t.Errorf("%s still running after the deploy", m.ID)
			}
		}
		for _, m := range fl.Running() {
			running++
			if fl.registered(m) {
				healthy++
			}
		}
		tasks = tasksOf(fl)
		return nil
	}}}
	f := runT(t, sc, 1, nil)
	if running != shortWorkers || healthy != shortWorkers {
		t.Errorf("after the deploy %d tasks run, %d healthy; want %d", running, healthy, shortWorkers)
	}
	if len(f.ECS) != 1 || f.ECS[0].Op != "deploy" || f.ECS[0].Tasks != shortWorkers {
		t.Fatalf("ECS operations %+v, want one deploy of %d", f.ECS, shortWorkers)
	}
	op := f.ECS[0]
	if op.Length < DefaultECS().LaunchMin.Seconds() || op.Length > (DefaultECS().LaunchMax+r.StopTimeout+5*time.Second).Seconds() {
		t.Errorf("deploy length %.1fs, want a launch time (30-45 s) and the old tasks' stop", op.Length)
	}
	if op.Sessions == 0 || op.Recovered != op.Sessions {
		t.Errorf("the deploy's SIGTERMs hit %d sessions, %d delivering again", op.Sessions, op.Recovered)
	}
	return f, tasks
}

// TestScaleOutIn: ×10 the tasks through the launch quota, spread evenly
// over the AZs, then back (SIGTERM spread over the AZs, the newest first):
// the original tasks remain, no double owner, no loss, the stopped tasks'
// sessions (if any) delivering again within the TTL + 5 s. Today the
// added tasks take no session (no admin listener in the simulator, so no
// rebalancing moves, and no session starts after the ramp): the scale-in
// stops idle tasks and its SIGTERM hits no session; checkSafe's "hit no
// session" is waived for it (busy).
func TestScaleOutIn(t *testing.T) {
	const workers, sessions = 3, 30
	sc := Scenarios(workers, sessions, shortFor)["scale-out-in"]
	perAZ := func(fl *Fleet) []int {
		n := make([]int, 3)
		for _, m := range fl.Running() {
			n[m.AZ]++
		}
		return n
	}
	var first []*Member
	var afterOut, afterIn []int
	var kept bool
	out, in := sc.Faults[0].Do, sc.Faults[1].Do
	sc.Faults[0].Do = func(fl *Fleet) error {
		first = fl.Running()
		err := out(fl)
		afterOut = perAZ(fl)
		return err
	}
	sc.Faults[1].Do = func(fl *Fleet) error {
		err := in(fl)
		afterIn = perAZ(fl)
		kept = slices.Equal(ids(fl.Running()), ids(first))
		return err
	}
	f := runT(t, sc, 1, nil)
	checkSafe(t, busy(f))
	if !slices.Equal(afterOut, []int{10, 10, 10}) || !slices.Equal(afterIn, []int{1, 1, 1}) || !kept {
		t.Errorf("tasks per AZ after the scale-out %v (want 10 each), after the scale-in %v (want 1 each, the original ones: %v)", afterOut, afterIn, kept)
	}
	if len(f.ECS) != 2 || f.ECS[0].Op != "scale-out" || f.ECS[1].Op != "scale-in" {
		t.Fatalf("ECS operations %+v, want a scale-out and a scale-in", f.ECS)
	}
	if o := f.ECS[0]; o.Tasks != 9*workers || o.Length < DefaultECS().LaunchMin.Seconds() || o.Length > (DefaultECS().LaunchMax+10*time.Second).Seconds() {
		t.Errorf("scale-out of %d tasks took %.1fs, want a launch time (30-45 s) and registering", o.Tasks, o.Length)
	}
	if o := f.ECS[1]; o.Tasks != 9*workers || o.Killed != 0 || o.Recovered != o.Sessions {
		t.Errorf("scale-in %+v: want %d tasks stopped, none killed, their sessions delivering again", o, 9*workers)
	}
}

// busy is f without the SIGTERMs and SIGKILLs of tasks that owned no
// session: ECS stops a deploy's old tasks one by one as replacements turn
// healthy, and at the short size a task may hold none (the sessions'
// spread is the workers' own randomness, not the seed's), which checkSafe
// would call a fault that tests nothing. The operation's total
// (ECSOp.Sessions) is checked instead.
func busy(f Figures) Figures {
	f.Faults = slices.DeleteFunc(slices.Clone(f.Faults), func(r Recovery) bool {
		return (r.Kind == "term" || r.Kind == "kill") && r.Sessions == 0
	})
	return f
}
