//go:build fleetsim

package fleetsim

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// ECSConfig is the simulated ECS service the fleet's workers are tasks of:
// the AZs its tasks are spread over and Fargate's launch pacing and time.
type ECSConfig struct {
	// AZs the service's subnets are in (infra: the VPC's public subnets,
	// one per AZ; a Region has three or more).
	AZs int
	// Burst and Rate are Fargate's task launch rate quota, a token bucket
	// per account and Region: 100 tasks at once, then 20 a second
	// ("Fargate Resource rate quota for On Demand Amazon ECS tasks": burst
	// 100, sustained 20/s; https://docs.aws.amazon.com/AmazonECS/latest/developerguide/throttling.html).
	Burst float64
	Rate  float64
	// LaunchMin and LaunchMax bound the time from a launch leaving the
	// quota to the worker's Run (provisioning, ENI, image pull, start),
	// drawn uniformly from the seed. An assumption from AWS's own answer
	// that "it is normal for new AWS Fargate tasks to take 30-45 seconds or
	// longer to start" (https://repost.aws/questions/QUjZAzJd27SZWxXM7MgyxOZw/how-to-speed-up-provisioning-of-ecs-fargate-task);
	// no AWS page states a figure.
	LaunchMin, LaunchMax time.Duration
}

// DefaultECS is ECSConfig's defaults (the sources are on its fields).
func DefaultECS() ECSConfig {
	return ECSConfig{AZs: 3, Burst: 100, Rate: 20, LaunchMin: 30 * time.Second, LaunchMax: 45 * time.Second}
}

// Rolling is an ECS rolling update's (and a scale-in's) settings.
type Rolling struct {
	// MinHealthyPercent of the desired count stays healthy (rounded up);
	// MaxPercent of it may be RUNNING or PENDING at once (rounded down).
	MinHealthyPercent, MaxPercent int
	// StopTimeout is SIGTERM → SIGKILL of a stopped task.
	StopTimeout time.Duration
}

// ECSDefaults is what ECS does unless told otherwise: minimumHealthyPercent
// 100, maximumPercent 200 (a rolling update's defaults:
// https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_DeploymentConfiguration.html),
// the container's stopTimeout 30 s ("if the parameter is not specified,
// the default value of 30 seconds is used" on Fargate, at most 120 s:
// https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_ContainerDefinition.html).
var ECSDefaults = Rolling{MinHealthyPercent: 100, MaxPercent: 200, StopTimeout: 30 * time.Second}

// InfraRolling is what the infra chooses, restated (the simulator does not
// import infra): MinHealthyPercent 100 and MaxHealthyPercent 200 on the
// streamer service (infra/stacks/wsfleet.go), StopTimeout 40 s in dev and
// prod (infra/stacks/config.go; the worker's ShutdownDeadline there is
// 30 s, the streamer's default).
var InfraRolling = Rolling{MinHealthyPercent: 100, MaxPercent: 200, StopTimeout: 40 * time.Second}

// ECSOp is one ECS operation's figures (Figures.ECS). Seconds of virtual
// time.
type ECSOp struct {
	Op    string  `json:"op"` // deploy, scale-out, scale-in, replace
	At    float64 `json:"at"` // from the fleet's start
	Tasks int     `json:"tasks"`
	// Length: a deploy's first replacement requested → its last old task
	// gone; a scale-out's first launch requested → its last task healthy; a
	// scale-in's SIGTERM → its last task gone.
	Length float64 `json:"length"`
	// Killed are the tasks still running at the stop timeout (SIGKILL);
	// LongestStop the longest SIGTERM → exit.
	Killed      int     `json:"killed"`
	LongestStop float64 `json:"longest_stop"`
	// Sessions the tasks it stopped owned at their SIGTERM, Recovered
	// those delivering again, MaxAgain the longest SIGTERM → delivering
	// again (an upper bound of the dark time: it includes the session's
	// streaming on the draining task until its turn), Dark the exact dark
	// times of their hand-offs (dark.go), pooled (the judge's "term"
	// faults within the operation).
	Sessions  int     `json:"sessions"`
	Recovered int     `json:"recovered"`
	MaxAgain  float64 `json:"max_again"`
	Dark      Dark    `json:"dark"`
}

// ecsRecoveries are ops with the recovery of the sessions their SIGTERMs
// hit (the "term" faults from each op's start to its end; a SIGKILL's
// sessions are those of the task's SIGTERM before it).
func ecsRecoveries(ops []ECSOp, rs []Recovery) []ECSOp {
	for i, op := range ops {
		var dark []float64
		for _, r := range rs {
			if r.Kind == "term" && r.At >= op.At && r.At <= op.At+op.Length {
				ops[i].Sessions += r.Sessions
				ops[i].Recovered += r.Recovered
				ops[i].MaxAgain = max(ops[i].MaxAgain, r.Max)
				dark = append(dark, r.dark...)
			}
		}
		slices.Sort(dark)
		ops[i].Dark = darkOf(dark)
	}
	return ops
}

// ecs is the fleet's ECS state: the launch quota's bucket (one per account:
// it spans operations) and the launch times' draws (their own stream: the
// fleet's other draws do not move).
type ecs struct {
	cfg     ECSConfig
	tokens  float64
	at      time.Time
	rnd     *rand.Rand
	pending []int  // launches requested and not started, by AZ
	down    []bool // AZs lost (KillAZ): nothing is placed there
	ops     []ECSOp
}

func newECS(cfg ECSConfig, seed uint64, now time.Time) *ecs {
	if cfg == (ECSConfig{}) {
		cfg = DefaultECS()
	}
	return &ecs{cfg: cfg, tokens: cfg.Burst, at: now, rnd: rand.New(rand.NewPCG(seed, 0xec5)), pending: make([]int, cfg.AZs), down: make([]bool, cfg.AZs)}
}

// reserve takes a token of the launch quota at now: the wait until it is
// there (tokens go negative for reservations waiting their turn).
func (e *ecs) reserve(now time.Time) time.Duration {
	e.tokens = min(e.cfg.Burst, e.tokens+now.Sub(e.at).Seconds()*e.cfg.Rate)
	e.at = now
	e.tokens--
	if e.tokens >= 0 {
		return 0
	}
	return time.Duration(-e.tokens / e.cfg.Rate * float64(time.Second))
}

// placeLocked is the AZ of a new task: the one with the fewest running and
// pending tasks among those not lost, the first on a tie (ECS's spread by
// AZ: round robin from an even start). fl.mu held.
func (fl *Fleet) placeLocked() int {
	n := slices.Clone(fl.ecs.pending)
	for _, m := range fl.members {
		if m.Ended.IsZero() {
			n[m.AZ]++
		}
	}
	best := -1
	for az, k := range n {
		if !fl.ecs.down[az] && (best < 0 || k < n[best]) {
			best = az
		}
	}
	return max(best, 0)
}

// opDeadline bounds a deploy or a scale-out in virtual time: ECS's
// circuit breaker would fail one whose tasks never turn healthy; the
// simulator reports it instead of waiting forever.
const opDeadline = time.Hour

// launch is a task requested and not yet started.
type launch struct {
	az    int
	ready time.Time
}

// tasks is one ECS operation in progress: the launches it requested, the
// tasks it started, the tasks it stopped (SIGTERM, SIGKILL at the stop
// timeout). Driven from the scenario's goroutine only.
type tasks struct {
	fl      *Fleet
	op      ECSOp
	timeout time.Duration
	pending []launch
	started []*Member
	stop    map[*Member]time.Time // SIGKILL due
	termed  map[*Member]time.Time
	// killed: when each SIGKILLed task was killed, its end for ECS (the
	// simulated process's goroutines unwind after it: a queue poll in
	// flight runs to its wait, up to 10 s).
	killed map[*Member]time.Time
	// lastEnd is the latest end of a stopped task.
	lastEnd time.Time
	exits   chan exit
}

type exit struct {
	m   *Member
	err error
}

func (fl *Fleet) newTasks(op string, timeout time.Duration) *tasks {
	return &tasks{fl: fl, op: ECSOp{Op: op, At: time.Since(fl.t0).Seconds()}, timeout: timeout,
		stop: map[*Member]time.Time{}, termed: map[*Member]time.Time{}, killed: map[*Member]time.Time{}, exits: make(chan exit)}
}

// request asks ECS for n tasks: each placed in an AZ now, through the
// launch quota, started a launch time later.
func (ts *tasks) request(n int) {
	fl := ts.fl
	now := time.Now()
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for range n {
		az := fl.placeLocked()
		fl.ecs.pending[az]++
		c := fl.ecs.cfg
		d := c.LaunchMin + time.Duration(fl.ecs.rnd.Int64N(int64(c.LaunchMax-c.LaunchMin)/int64(time.Millisecond)+1))*time.Millisecond
		ts.pending = append(ts.pending, launch{az: az, ready: now.Add(fl.ecs.reserve(now) + d)})
	}
}

// startDue starts the launches whose time has come (the real worker's New
// and Run, in their AZ).
func (ts *tasks) startDue(now time.Time) error {
	var rest []launch
	for _, l := range ts.pending {
		if l.ready.After(now) {
			rest = append(rest, l)
			continue
		}
		ts.fl.mu.Lock()
		ts.fl.ecs.pending[l.az]--
		ts.fl.mu.Unlock()
		m, err := ts.fl.addWorkerAZ(nil, l.az)
		if err != nil {
			return err
		}
		ts.started = append(ts.started, m)
	}
	ts.pending = rest
	return nil
}

// healthy is how many of the tasks started have registered (their worker
// record ALIVE: the simulator's look at the table, unmetered).
func (ts *tasks) healthy() int {
	n := 0
	for _, m := range ts.started {
		if ts.fl.registered(m) {
			n++
		}
	}
	return n
}

func (fl *Fleet) registered(m *Member) bool {
	rec, err := fl.Table.Mem().GetWorker(context.Background(), m.ID)
	return err == nil && rec.Alive()
}

// term SIGTERMs ms at once (one "term" fault: the sessions they own must
// deliver again) and schedules their SIGKILL at the stop timeout.
func (ts *tasks) term(ms []*Member) {
	if len(ms) == 0 {
		return
	}
	now := time.Now()
	ts.fl.Record.fault(Fault{Kind: "term", Workers: ids(ms), At: now, Sessions: ts.fl.ownedBy(ms)})
	for _, m := range ms {
		ts.stop[m] = now.Add(ts.timeout)
		ts.termed[m] = now
		m.cancel()
		// The scenario's goroutine receives every exit before it returns
		// (it waits for ts.stop to empty).
		go func() { ts.exits <- exit{m: m, err: <-m.done} }()
	}
}

// killDue SIGKILLs the stopped tasks still running at their stop timeout,
// at once (one "kill" fault).
func (ts *tasks) killDue(now time.Time) {
	var due []*Member
	for m, at := range ts.stop {
		if _, gone := ts.killed[m]; !at.After(now) && !gone {
			due = append(due, m)
		}
	}
	if len(due) == 0 {
		return
	}
	slices.SortFunc(due, func(a, b *Member) int { return cmp.Compare(a.ID, b.ID) })
	ts.fl.Record.fault(Fault{Kind: "kill", Workers: ids(due), At: now, Sessions: ts.fl.ownedBy(due)})
	for _, m := range due {
		ts.killed[m] = now
		m.cutOff()
	}
	ts.op.Killed += len(due)
}

// wait blocks until the next of: a stopped task exits, a launch is due, a
// SIGKILL is due, or a second (ECS's scheduler looks again).
func (ts *tasks) wait() {
	next := time.Now().Add(time.Second)
	for _, l := range ts.pending {
		if l.ready.Before(next) {
			next = l.ready
		}
	}
	for m, at := range ts.stop {
		if _, gone := ts.killed[m]; at.Before(next) && !gone {
			next = at
		}
	}
	t := time.NewTimer(time.Until(next))
	defer t.Stop()
	select {
	case e := <-ts.exits:
		ts.exited(e)
	case <-t.C:
	}
	for { // every exit already sent
		select {
		case e := <-ts.exits:
			ts.exited(e)
		default:
			return
		}
	}
}

func (ts *tasks) exited(e exit) {
	end := time.Now()
	if at, ok := ts.killed[e.m]; ok {
		end = at
	}
	e.m.Err, e.m.Ended = e.err, end
	ts.op.LongestStop = max(ts.op.LongestStop, end.Sub(ts.termed[e.m]).Seconds())
	if end.After(ts.lastEnd) {
		ts.lastEnd = end
	}
	delete(ts.stop, e.m)
}

// abandon kills every stopped task still running and awaits their exits
// (an operation that gives up leaves no goroutine behind).
func (ts *tasks) abandon() {
	ts.killDue(time.Now().Add(ts.timeout))
	for len(ts.stop) > 0 {
		ts.exited(<-ts.exits)
	}
}

// done records the operation's figures, its length ending at end.
func (ts *tasks) done(end time.Time) {
	ts.op.Length = end.Sub(ts.fl.t0).Seconds() - ts.op.At
	ts.fl.mu.Lock()
	ts.fl.ecs.ops = append(ts.fl.ecs.ops, ts.op)
	ts.fl.mu.Unlock()
}

// ECSOps are the ECS operations done so far.
func (fl *Fleet) ECSOps() []ECSOp {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return slices.Clone(fl.ecs.ops)
}

// Deploy plays ECS's rolling update of the whole service with r: every
// running task replaced by a new one. ECS starts replacements while the
// tasks RUNNING or PENDING stay within MaxPercent of the desired count
// (at 100/200 all of them at once, as the launch quota allows), and stops
// old tasks (SIGTERM, SIGKILL after the stop timeout) while the healthy
// ones (old ones not stopped, new ones registered) stay at least
// MinHealthyPercent of it. It returns once the last old task is gone and
// every replacement is healthy; the deploy's length is up to the last old
// task gone.
func (fl *Fleet) Deploy(r Rolling) error {
	old := fl.Running()
	desired := len(old)
	most := desired * r.MaxPercent / 100
	least := (desired*r.MinHealthyPercent + 99) / 100
	if desired == 0 || most <= desired && least >= desired {
		return fmt.Errorf("fleetsim: deploy of %d tasks at %d%%/%d%%: nothing can start or stop", desired, r.MinHealthyPercent, r.MaxPercent)
	}
	ts := fl.newTasks("deploy", r.StopTimeout)
	ts.op.Tasks = desired
	fl.Record.fault(Fault{Kind: "deploy", Workers: ids(old), At: time.Now()})
	left := old // old tasks not yet stopped
	var gone time.Time
	for start := time.Now(); ; {
		now := time.Now()
		if now.Sub(start) > opDeadline {
			ts.abandon()
			return fmt.Errorf("fleetsim: deploy not done after %s: %d old tasks left, %d of %d new healthy", opDeadline, len(left)+len(ts.stop), ts.healthy(), desired)
		}
		if err := ts.startDue(now); err != nil {
			ts.abandon()
			return err
		}
		ts.killDue(now)
		if n := min(desired-len(ts.pending)-len(ts.started), most-len(left)-len(ts.pending)-len(ts.started)); n > 0 {
			ts.request(n)
		}
		if k := min(len(left), len(left)+ts.healthy()-least); k > 0 {
			stop := spread(left, k)
			left = slices.DeleteFunc(left, func(m *Member) bool { return slices.Contains(stop, m) })
			ts.term(stop)
		}
		if len(left) == 0 && len(ts.stop) == 0 {
			if gone.IsZero() {
				gone = ts.lastEnd
			}
			if len(ts.pending) == 0 && ts.healthy() == desired {
				ts.done(gone)
				return nil
			}
		}
		ts.wait()
	}
}

// ScaleOut plays ECS raising the desired count by n: n tasks launched
// through the launch quota, placed over the AZs. It returns once every one
// is healthy.
func (fl *Fleet) ScaleOut(n int) error { return fl.launch("scale-out", n) }

// launch is an ECS operation that starts n tasks (a scale-out, the
// replacement of lost ones) and returns once every one is healthy.
func (fl *Fleet) launch(op string, n int) error {
	ts := fl.newTasks(op, 0)
	ts.op.Tasks = n
	ts.request(n)
	for start := time.Now(); len(ts.pending) > 0 || ts.healthy() < n; {
		if time.Since(start) > opDeadline {
			return fmt.Errorf("fleetsim: %s not done after %s: %d of %d tasks healthy", op, opDeadline, ts.healthy(), n)
		}
		if err := ts.startDue(time.Now()); err != nil {
			return err
		}
		if len(ts.pending) == 0 && ts.healthy() == n {
			break
		}
		ts.wait()
	}
	fl.Record.fault(Fault{Kind: "add", Workers: ids(ts.started), At: fl.t0.Add(time.Duration(ts.op.At * float64(time.Second)))})
	ts.done(time.Now())
	return nil
}

// ScaleIn plays ECS lowering the desired count by n: n running tasks picked
// as ECS does (spread, below) get SIGTERM at once and SIGKILL at stop if
// they have not exited by then. It returns once every one is gone.
func (fl *Fleet) ScaleIn(n int, stop time.Duration) error {
	r := fl.Running()
	if n <= 0 || n >= len(r) {
		return fmt.Errorf("fleetsim: scale in by %d of %d running", n, len(r))
	}
	ts := fl.newTasks("scale-in", stop)
	ts.op.Tasks = n
	ts.term(spread(r, n))
	for len(ts.stop) > 0 {
		ts.killDue(time.Now())
		ts.wait()
	}
	ts.done(ts.lastEnd)
	return nil
}

// spread picks k of ms as ECS's service scheduler picks the tasks to stop:
// keeping the AZs balanced, each from the AZ with the most of them (the
// first on a tie); within an AZ ECS documents no order for Fargate: the
// newest task (the last started) goes first.
func spread(ms []*Member, k int) []*Member {
	by := map[int][]*Member{}
	azs := 0
	for _, m := range ms {
		by[m.AZ] = append(by[m.AZ], m)
		azs = max(azs, m.AZ+1)
	}
	var out []*Member
	for range min(k, len(ms)) {
		best := -1
		for az := range azs {
			if best < 0 || len(by[az]) > len(by[best]) {
				best = az
			}
		}
		l := by[best]
		out = append(out, l[len(l)-1])
		by[best] = l[:len(l)-1]
	}
	return out
}

// KillAZ kills every running task of the first AZ at once (the loss of one
// availability zone of three: a third of the workers), and ECS's service
// scheduler, keeping the desired count, launches as many replacements in
// the other AZs ("replace": through the launch quota, a launch time
// later). The survivors take what they have room for (WSFLEET_MAX_SESSIONS)
// at once; a fleet too full to absorb a third of its sessions waits for
// the replacements. It returns once they are healthy.
func KillAZ(fl *Fleet) error {
	var in []*Member
	for _, m := range fl.Running() {
		if m.AZ == 0 {
			in = append(in, m)
		}
	}
	if len(in) == 0 {
		return fmt.Errorf("fleetsim: kill an AZ: no worker running in it")
	}
	fl.mu.Lock()
	fl.ecs.down[0] = true
	fl.mu.Unlock()
	fl.Kill(in...)
	return fl.launch("replace", len(in))
}

// DeployStep is a scenario step: Fleet.Deploy with r.
func DeployStep(r Rolling) func(*Fleet) error {
	return func(fl *Fleet) error { return fl.Deploy(r) }
}
