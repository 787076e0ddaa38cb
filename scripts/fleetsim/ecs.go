//go:build fleetsim

// The simulated ECS service: its settings (ECSConfig, Rolling, each with
// its source), an operation's figures (ECSOp), and the fleet's ECS state:
// the launch quota and the placement of tasks over the AZs. An operation
// in progress is ecs_tasks.go; the operations a scenario plays are
// ecs_ops.go.

package fleetsim

import (
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
	// ShutdownDeadline is the workers' WSFLEET_SHUTDOWN_DEADLINE in the
	// service these settings come with (every task's, old and new: a
	// scenario sets it at the fleet's start, withDeadline); 0: the
	// worker's default (30 s).
	ShutdownDeadline time.Duration
}

// ECSDefaults is what ECS does unless told otherwise: minimumHealthyPercent
// 100, maximumPercent 200 (a rolling update's defaults:
// https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_DeploymentConfiguration.html),
// the container's stopTimeout 30 s ("if the parameter is not specified,
// the default value of 30 seconds is used" on Fargate, at most 120 s:
// https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_ContainerDefinition.html).
var ECSDefaults = Rolling{MinHealthyPercent: 100, MaxPercent: 200, StopTimeout: 30 * time.Second}

// InfraRolling is what the infra chooses for prod, restated (the
// simulator does not import infra): MinHealthyPercent 100 and
// MaxHealthyPercent DeployMaxPercent = 129 on the streamer service
// (infra/stacks/streamer.go), StopTimeout 120 s and the worker's
// ShutdownDeadline 110 s (infra/stacks/config.go: a wave of hand-offs
// within a third of the deadline at the fleet's claim budget, docs/infra.md
// "Rolling deploys"). Dev keeps ECS's 200 % with 40 s / 30 s.
var InfraRolling = Rolling{MinHealthyPercent: 100, MaxPercent: 129, StopTimeout: 120 * time.Second, ShutdownDeadline: 110 * time.Second}

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
	return leastLoadedAZ(n, fl.ecs.down)
}

// leastLoadedAZ is ECS's spread by AZ: the AZ with the fewest of tasks
// among those not down, the first on a tie (0 when every AZ is down).
func leastLoadedAZ(tasks []int, down []bool) int {
	best := -1
	for az, k := range tasks {
		if !down[az] && (best < 0 || k < tasks[best]) {
			best = az
		}
	}
	return max(best, 0)
}

// ECSOps are the ECS operations done so far.
func (fl *Fleet) ECSOps() []ECSOp {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return slices.Clone(fl.ecs.ops)
}
