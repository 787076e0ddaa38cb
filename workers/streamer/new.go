package streamer

// New: a Worker wired from its Config and Deps (the Keeper, the claim
// admission, the sink pipeline, the reconciler, the admin handlers).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/logging"
	"github.com/wsfleet/wsfleet/shared/metrics"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/claim"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/session"
)

// New validates cfg and builds a worker.
func New(cfg Config, deps Deps) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.Resolved()
	if deps.Store == nil || deps.Handler == nil {
		return nil, errors.New("streamer: Deps.Store and Deps.Handler are required")
	}
	if deps.Clock == nil {
		deps.Clock = clock.Real{}
	}
	if deps.Metrics == nil {
		deps.Metrics = os.Stderr
	}
	w := &Worker{
		cfg: cfg, deps: deps,
		sessions:     map[string]*session.Session{},
		claiming:     map[string]bool{},
		claimMail:    map[string][]string{},
		standbys:     map[string]*standbyHeld{},
		alignFP:      map[string]uint64{},
		ownStandbys:  map[string]*ownerStandby{},
		placeNow:     make(chan struct{}, 1),
		freed:        make(chan struct{}, 1),
		idle:         make(chan struct{}, 1),
		consumerStop: make(chan struct{}),
		pacer:        newClaimPacer(cfg.ClaimsPerSecond, deps.Clock),
		handoffIn:    newHandoffGate(cfg.ClaimsPerSecond, handoffDrainRate(cfg.MaxSessions, cfg.ShutdownDeadline)),
		reg: metrics.NewRegistry(cfg.MetricsNamespace, map[string]string{
			schema.DimEnvironment: cfg.Environment, schema.DimService: schema.ServiceStreamer,
		}),
	}
	if deps.Logger != nil {
		w.log = *deps.Logger
	} else {
		w.log = logging.New(os.Stderr, schema.ServiceStreamer, cfg.LogLevel)
	}
	w.log = w.log.With().Str("worker_id", cfg.WorkerID).Logger()
	w.store = withSummary(healthStore{Store: deps.Store, health: &w.table, now: deps.Clock.Now}, deps.Store)
	lc := cfg.LeaseConfig()
	if deps.Queue != nil {
		// A session just started is left to its start notification.
		lc.UnownedGrace = claim.FastPathGrace(cfg.ReconcileEvery)
		// A dead or gone worker's sessions are left to its takeover,
		// which announces on the queue what no receiver took.
		lc.GoneGrace = claim.TakeoverGrace
		lc.Flowing = func() bool { return w.consumer.Flowing(claim.FlowingWithin(cfg.ReconcileEvery)) }
		// Longer while the queue brings the announcements of a death, or
		// its declarer tells this worker a part.
		lc.GoneGraceMax = claim.TakeoverGraceMax
		lc.Announcing = func() bool {
			within := claim.FlowingWithin(cfg.ReconcileEvery)
			return w.consumer.Announcing(within) || w.partsFlowing(within)
		}
	}
	k, err := lease.NewKeeper(w.store, deps.Clock, lc, observer{w}, w.report)
	if err != nil {
		return nil, fmt.Errorf("streamer: %w", err)
	}
	k.SetPlanner(w.summaryPlan)
	w.keeper = k
	tlsConf, err := sourceTLS(cfg)
	if err != nil {
		return nil, fmt.Errorf("streamer: %w", err)
	}
	w.hardCtx, w.hardCancel = context.WithCancel(context.Background())
	w.rebal.client = &http.Client{Timeout: time.Second}
	w.rebal.rnd = deps.Rand.Stream("rebalance")
	w.handoffRnd = deps.Rand.Stream("handoff")
	w.standbyRnd = deps.Rand.Stream("standby")
	// Planned reconnects' new connections and standbys' windows share one
	// budget (WSFLEET_SWITCH_BUFFER_BUDGET).
	switchBudget := session.NewSwitchBudget(cfg.SwitchBufferBudget)
	w.env = &session.Env{
		Config:     cfg.sessionConfig(),
		Handler:    deps.Handler,
		Client:     session.NewClient(cfg.AllowPrivateIPs, cfg.AllowedHosts, tlsConf),
		Log:        w.log,
		Counters:   &w.counters,
		Dials:      session.NewDialGate(cfg.DialsPerHost, cfg.DialLimits...),
		Handshakes: session.NewHandshakes(cfg.HandshakesInFlight, cfg.HandshakesPerHost),
		Switch:     switchBudget,
		Standbys:   switchBudget,
		Frames:     session.NewFrameBudget(cfg.LargeFrameBudget),
		Opened:     w.opened,
		Secrets:    deps.Secrets,
		NoteError: func(ctx context.Context, h *lease.Held, gen int64, reason string, at time.Time) error {
			return w.keeper.NoteError(ctx, h, gen, reason, at)
		},
		Anchor:   w.keeper.Anchor,
		Schedule: &session.Schedule{},
		Rand:     deps.Rand,
	}
	if deps.Queue != nil {
		w.consumer = &claim.Consumer{Queue: deps.Queue, Claimer: claimer{w, pathQueue}, Log: w.log, Freed: w.freed, Stop: w.consumerStop, Clock: deps.Clock,
			Rand: deps.Rand.Stream("consume")}
		w.handoffs = deps.Queue
		if bp, ok := deps.Queue.(notify.BatchPublisher); ok {
			// A drain announces every session's hand-off at once: batched,
			// tens of requests instead of one per session.
			w.handoffs = notify.NewCoalescer(bp, notify.MaxBatch, handoffSenders)
		}
	}
	w.recon = &claim.Reconciler{
		Lister: k, Claimer: claimer{w, pathReconcile}, Log: w.log, Every: cfg.ReconcileEvery,
		// The pace a pass's claims wait for: this worker's share of the
		// fleet's budget, lower while the store throttles.
		ClaimRate: w.claimRate,
		OnOrphans: func(n int) {
			if n > 0 {
				w.reg.Add(schema.MetricOrphansSeen, float64(n))
			}
		},
		OnPass: w.auditPass(),
		Clock:  deps.Clock,
		Rand:   deps.Rand.Stream("reconcile"),
	}
	if w.consumer != nil {
		// The fast-path grace only while the work queue answers.
		w.recon.FastPathDown = func() bool { return w.consumer.Healthy() != nil }
	}
	return w, nil
}
