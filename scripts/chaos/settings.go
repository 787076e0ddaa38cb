// The Settings a run states and the Bounds the checks hold it to, all
// derived from its timings (Config.Settings).

package chaos

import (
	"time"

	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/shared/lease"
)

// Settings are what a run states: its scale and timings, and the bounds the
// checks hold it to (all derived from the timings).
type Settings struct {
	Seed            int64   `json:"seed"`
	DurationMs      int64   `json:"duration_ms"`
	Workers         int     `json:"workers"`
	Sessions        int     `json:"sessions"`
	FeedRate        float64 `json:"feed_rate"`
	FeedMode        string  `json:"feed_mode"`
	SwitchPolicy    bool    `json:"switch_policy"`
	FeedPingMs      int64   `json:"feed_ping_every_ms"`
	FeedPingTimeout int64   `json:"feed_ping_timeout_ms"`
	LeaseTTLMs      int64   `json:"lease_ttl_ms"` // the liveness TTL
	HeartbeatMs     int64   `json:"heartbeat_every_ms"`
	WatchMs         int64   `json:"watch_every_ms"` // watchers read the records they watch every heartbeat / 2
	CheckpointMs    int64   `json:"checkpoint_every_ms"`
	ReconcileMs     int64   `json:"reconcile_every_ms"`
	ClockOffsetMax  int64   `json:"clock_offset_max_ms"`
	SafetyMarginMs  int64   `json:"safety_margin_ms"`
	ShutdownMs      int64   `json:"shutdown_deadline_ms"`
	ReconnectMaxMs  int64   `json:"reconnect_max_ms"`
	RebalanceMs     int64   `json:"rebalance_every_ms"`
	MinHoldMs       int64   `json:"min_hold_ms"`
	// Sink is the workers' sink (stdout, sqs, kinesis); with an AWS sink
	// the judge reads the destination, not the workers' stdout.
	Sink string `json:"sink"`
	// SinkRequestTimeoutMs is the sink's request timeout: the worker's
	// default, half the safety margin (WSFLEET_SINK_REQUEST_TIMEOUT).
	SinkRequestTimeoutMs int64 `json:"sink_request_timeout_ms,omitempty"`
	// SinkRefusalSkip: sessions were started with on_sink_refusal "skip".
	SinkRefusalSkip bool `json:"sink_refusal_skip,omitempty"`
	// PlannedEvery, PlannedAgeMs, PlannedSwitchMs: every PlannedEvery-th
	// session was started with planned reconnects (Config.PlannedEvery);
	// TenureHeader is the handshake header naming the tenure ("": none,
	// and no planned overlap at the feed).
	PlannedEvery    int    `json:"planned_every,omitempty"`
	PlannedAgeMs    int64  `json:"planned_age_ms,omitempty"`
	PlannedSwitchMs int64  `json:"planned_switch_ms,omitempty"`
	TenureHeader    string `json:"tenure_header,omitempty"`
	// StandbyEvery: every StandbyEvery-th session was started with a hot
	// standby on a source that cannot replay, every 2 × StandbyEvery-th
	// on such a source without (Config.StandbyEvery); StandbyOff says why
	// the sessions started without a standby after all (the API refused
	// the field), "" when they had one.
	StandbyEvery int    `json:"standby_every,omitempty"`
	StandbyOff   string `json:"standby_off,omitempty"`
	// TLS: the feed served wss:// (the stack's per-run CA); false: ws://.
	TLS bool `json:"tls"`
	// DynamoModel is the DynamoDB model's profile the stack ran on ("":
	// dynalite alone).
	DynamoModel string `json:"dynamo_model,omitempty"`
	Bounds      Bounds `json:"bounds"`
}

// destSink reports whether the deliveries were read from a destination
// (an AWS sink).
func (s Settings) destSink() bool { return isAWSSink(s.Sink) }

// Bounds are the recovery and closing deadlines the checks apply, with the
// margins they state.
type Bounds struct {
	// Crash: kill -9, SIGSTOP or a partition from DynamoDB → a newer tenure
	// delivers: TTL (the heartbeat counter stood still that long on a
	// watcher's clock) + one watch interval (the watcher's reads) +
	// CrashMargin.
	CrashMs       int64 `json:"crash_ms"`
	CrashMarginMs int64 `json:"crash_margin_ms"` // 1 s: the declaring watcher's takeover (claim, dial, first message)
	// Fence: no delivery under a tenure of a worker that cannot heartbeat
	// later than FenceMs after it lost DynamoDB (its trust deadline, last
	// successful heartbeat + TTL − safety margin, is earlier) + FenceSlack
	// (the sink line's way to the harness).
	FenceMs      int64 `json:"fence_ms"`
	FenceSlackMs int64 `json:"fence_slack_ms"`
	// Handoff: SIGTERM → another worker delivers: 1 s. A rebalancing
	// move (a graceful hand-off) is held to it too: its previous owner's
	// last delivery → the receiver's first.
	HandoffMs int64 `json:"handoff_ms"`
	// Balance: a worker joins → every running worker within ±10 % (or 2
	// sessions) of its fair share: the minimum hold (the sessions the
	// fleet claims meanwhile must age first) + 6 rounds (10 % of a
	// worker's sessions move per round) + 2 s (the joiner's start); on the
	// DynamoDB model one round more: a round plans from the fleet as the
	// by_worker_list index and eventually consistent reads show it, which
	// lag (p99 0.8 s, under a round) and may miss the joiner once.
	BalanceMs int64 `json:"balance_ms"`
	// Claim: start acknowledged → first delivery, also without SQS:
	// reconcile interval × 1.2 (its jitter) + 1 s.
	ClaimMs int64 `json:"claim_ms"`
	// Outage: DynamoDB back → every session delivers again: as Claim.
	OutageMs int64 `json:"outage_ms"`
	// Reconnect: source drop (or end of refusal, or a connection the
	// source closed at its max age) → delivering again: reconnect max +
	// 1 s.
	ReconnectMs int64 `json:"reconnect_ms"`
	// PlannedOverlap: the longest two connections of one tenure may be
	// open at once (a planned reconnect): the switch timeout (the new
	// connection is closed at it) + 1 s (its close handshake, a loaded
	// host).
	PlannedOverlapMs int64 `json:"planned_overlap_ms,omitempty"`
	// Stop: stop acknowledged → the source's connection closed, no
	// delivery after: one heartbeat interval (the owner reads its mailbox
	// on its next heartbeat, whichever worker the SQS stop reaches) +
	// 500 ms (the heartbeat call and the close handshake).
	StopMs int64 `json:"stop_ms"`
	// Replay: raw repeats one session may see across a crash or zombie
	// (what was accepted since the last checkpoint): rate × (checkpoint ×
	// 1.1 + 1 s) + 1; across a DynamoDB outage or partition (nothing can be
	// checkpointed until the worker fences itself): rate × (checkpoint ×
	// 1.1 + TTL − margin + 1 s) + 1.
	ReplayCrash  int64 `json:"replay_crash"`
	ReplayOutage int64 `json:"replay_outage"`
	// TrustDeadline: while the harness has a worker's DynamoDB path frozen
	// from F (dynalite frozen, its proxy frozen, SIGSTOP), its last
	// successful heartbeat was sent before F, so its trust deadline is
	// ≤ F + TTL − margin; a sink request ends by then + the request
	// timeout. Nothing of its tenures may reach the destination after
	// F + TrustDeadlineMs (TTL − margin + request timeout +
	// TrustTolMs: the proxy's stamp is taken when the destination's answer
	// reaches it, the engine's own stamp has 1 ms resolution).
	TrustDeadlineMs int64 `json:"trust_deadline_ms,omitempty"`
	TrustTolMs      int64 `json:"trust_tolerance_ms,omitempty"`
	// SinkRecover: a sink fault lifted → every session it hit delivers a
	// new seq: the batch's longest retry backoff (5 s, a failed entry's
	// backoff grows while the fault lasts) + the request timeout + 1 s.
	SinkRecoverMs int64 `json:"sink_recover_ms,omitempty"`
	// SinkRefuseRecover: after refusals, a record refused permanently is
	// still refused at its remaining attempts (the permanent attempts, 3,
	// less one), each after a backoff of up to 5 s, and the session's later
	// entries wait behind it: (3 − 1) × 5 s + the request timeout + 1 s.
	SinkRefuseRecoverMs int64 `json:"sink_refuse_recover_ms,omitempty"`
	// IndexLagCrash: a kill -9 while the indexes lag → a newer tenure
	// delivers: Crash + the lag (a session the worker acquired within the
	// lag is missing from its by_owner query until the lag has passed).
	IndexLagCrashMs int64 `json:"index_lag_crash_ms,omitempty"`
	// Storm: a throttling or ambiguous-error storm lifted → every session
	// delivers a new seq: Crash (a worker whose heartbeats were refused
	// for a TTL is declared dead, and its sessions taken over) + Outage.
	StormMs int64 `json:"storm_ms,omitempty"`
	// ReplayStorm: raw repeats one session may see across a tenure a storm
	// ended: as ReplayOutage, plus the longest the checkpoints yield to a
	// throttling store (lease.CheckpointHoldMax intervals).
	ReplayStorm int64 `json:"replay_storm,omitempty"`
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// Settings derives the Settings of c: the bounds the checks apply.
func (c Config) Settings() Settings {
	w := c.Stack.Worker
	crashMargin := time.Second
	watch := w.HeartbeatEvery / 2 // lease.Config.WatchEvery
	ckpt := time.Duration(float64(w.CheckpointEvery) * 1.1)
	claim := time.Duration(float64(w.ReconcileEvery)*1.2) + time.Second
	rate := c.Stack.FeedRate
	set := Settings{
		Seed: c.Seed, DurationMs: ms(c.Duration), Workers: c.Stack.Workers, Sessions: c.Sessions,
		FeedRate: rate, FeedMode: string(c.Stack.FeedMode), SwitchPolicy: c.SwitchPolicy,
		FeedPingMs: ms(c.FeedPingEvery), FeedPingTimeout: ms(c.FeedPingTimeout),
		LeaseTTLMs: ms(w.LeaseTTL), HeartbeatMs: ms(w.HeartbeatEvery), WatchMs: ms(watch), CheckpointMs: ms(w.CheckpointEvery),
		ReconcileMs: ms(w.ReconcileEvery), ClockOffsetMax: ms(c.ClockOffsetMax),
		SafetyMarginMs: ms(w.SafetyMargin), ShutdownMs: ms(w.ShutdownDeadline),
		ReconnectMaxMs: ms(c.ReconnectMax), RebalanceMs: ms(w.RebalanceEvery), MinHoldMs: ms(w.MinHold),
		Sink: sinkName(c.Stack.Sink), SinkRefusalSkip: c.awsSink() && c.SinkRefusalSkip, TenureHeader: c.Stack.TenureHeader,
		TLS: !c.Stack.PlainWS,
		Bounds: Bounds{
			CrashMs: ms(w.LeaseTTL + watch + crashMargin), CrashMarginMs: ms(crashMargin),
			FenceMs: ms(w.LeaseTTL - w.SafetyMargin), FenceSlackMs: ms(stdoutFenceSlack),
			HandoffMs:    1000,
			BalanceMs:    ms(w.MinHold + 6*w.RebalanceEvery + 2*time.Second),
			ClaimMs:      ms(claim),
			OutageMs:     ms(claim),
			ReconnectMs:  ms(c.ReconnectMax + time.Second),
			StopMs:       ms(w.HeartbeatEvery + 500*time.Millisecond),
			ReplayCrash:  int64(rate*(ckpt.Seconds()+1)) + 1,
			ReplayOutage: int64(rate*(ckpt.Seconds()+(w.LeaseTTL-w.SafetyMargin).Seconds()+1)) + 1,
		},
	}
	set.StandbyEvery = c.StandbyEvery
	if c.PlannedEvery > 0 {
		set.PlannedEvery, set.PlannedAgeMs, set.PlannedSwitchMs = c.PlannedEvery, ms(c.PlannedAge), ms(c.PlannedSwitch)
		set.Bounds.PlannedOverlapMs = ms(c.PlannedSwitch + time.Second)
	}
	if c.Stack.DynamoModel != "" {
		set.DynamoModel = c.Stack.DynamoModel
		set.Bounds.IndexLagCrashMs = set.Bounds.CrashMs + ms(modelLag)
		set.Bounds.StormMs = set.Bounds.CrashMs + set.Bounds.OutageMs
		set.Bounds.BalanceMs += ms(w.RebalanceEvery)
		hold := time.Duration(lease.CheckpointHoldMax) * w.CheckpointEvery
		set.Bounds.ReplayStorm = int64(rate*(ckpt.Seconds()+hold.Seconds()+(w.LeaseTTL-w.SafetyMargin).Seconds()+1)) + 1
	}
	if c.awsSink() {
		set.SinkRequestTimeoutMs = ms(w.SafetyMargin / 2)
		set.Bounds.TrustTolMs = 100
		set.Bounds.TrustDeadlineMs = ms(w.LeaseTTL-w.SafetyMargin) + set.SinkRequestTimeoutMs + set.Bounds.TrustTolMs
		set.Bounds.SinkRecoverMs = ms(sinkRetryMax) + set.SinkRequestTimeoutMs + 1000
		set.Bounds.SinkRefuseRecoverMs = (sinkPermanentAttempts-1)*ms(sinkRetryMax) + set.SinkRequestTimeoutMs + 1000
		// A record reaches the destination up to the request timeout after
		// the trust deadline (no request is sent that would end past it).
		set.Bounds.FenceSlackMs = set.SinkRequestTimeoutMs + set.Bounds.TrustTolMs
	}
	return set
}

// asStdout is s for evidence read from the workers' stdout: no sink
// bounds, the stdout fence slack.
func (s Settings) asStdout() Settings {
	s.Sink, s.SinkRequestTimeoutMs, s.SinkRefusalSkip = devstack.SinkStdout, 0, false
	s.Bounds.TrustDeadlineMs, s.Bounds.TrustTolMs, s.Bounds.SinkRecoverMs, s.Bounds.SinkRefuseRecoverMs = 0, 0, 0, 0
	s.Bounds.FenceSlackMs = stdoutFenceSlack.Milliseconds()
	return s
}

// stdoutFenceSlack is the fence slack for stdout lines (their way to the
// harness).
const stdoutFenceSlack = 500 * time.Millisecond

// sinkRetryMax is the batch sink's longest retry backoff
// (workers/streamer/sink/batch DefaultConfig: Retry.Max).
const sinkRetryMax = 5 * time.Second

// sinkPermanentAttempts is how many times the batch sink sends an entry
// refused permanently before it gives it up (sink/batch DefaultConfig:
// PermanentAttempts).
const sinkPermanentAttempts = 3

func sinkName(s string) string {
	if s == "" {
		return devstack.SinkStdout
	}
	return s
}
