// Phase capacity: one worker on the no-I/O memory store: sessions held,
// CPU per 1,000 msg/s, RSS per session.

package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/scripts/bench/memseed"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// capacityPhase is the phase (phase.go).
var capacityPhase = phase{name: PhaseCapacity, run: (*runner).capacity, render: renderCapacity, goals: capacityGoals}

// CapRunResult is one capacity run (figure 4).
type CapRunResult struct {
	Store    string            `json:"store"` // memory | dynalite
	Sessions int               `json:"sessions"`
	Rate     float64           `json:"rate"`
	Env      map[string]string `json:"env,omitempty"`
	// Transport is the feed's scheme, ws or wss ("": ws, reports before
	// issue 27); PayloadBytes the messages' padding (MessageBytes ≈ their
	// size).
	Transport    string  `json:"transport,omitempty"`
	PayloadBytes int     `json:"payload_bytes,omitempty"`
	MessageBytes int     `json:"message_bytes,omitempty"`
	Held         int     `json:"held"`
	RampSec      float64 `json:"ramp_s"`
	// MsgRate is what the worker counted during the window; Expected is
	// Held × Rate.
	MsgRate    float64 `json:"msg_per_s"`
	Expected   float64 `json:"expected_msg_per_s"`
	WindowSec  float64 `json:"window_s"`
	CPUPct     float64 `json:"cpu_pct_of_one_core"`
	CPUPer1k   float64 `json:"cpu_pct_per_1000_msg_s"`
	FeedCPUPct float64 `json:"feed_cpu_pct"`
	// MachineCPU is every process on the machine (the benchmark's and
	// anyone else's), in % of one core.
	MachineCPU   float64 `json:"machine_cpu_pct"`
	RSSMeanMB    float64 `json:"rss_mean_mb"`
	RSSMaxMB     float64 `json:"rss_max_mb"`
	RSSPerSessKB float64 `json:"rss_kib_per_session"` // mean RSS / held
	// RSSMarginalKB is (mean RSS − the idle worker\'s RSS) / held.
	RSSMarginalKB float64 `json:"rss_kib_per_session_above_idle"`
	Goroutines    int     `json:"goroutines"`
	OpenFiles     int     `json:"open_files"`
	Reconnects    int64   `json:"reconnects_in_window"`
	// Heartbeats in the window (on the memory store: no I/O) against the
	// one a second needed, and tenures lost (RenewsPerSec keeps its JSON
	// name from before issue 13).
	RenewsPerSec float64  `json:"renews_per_s"`
	NeededPerSec float64  `json:"needed_renews_per_s"`
	LeaseLost    int64    `json:"lease_lost"`
	MaxRenews    string   `json:"max_concurrent_renews"`
	LoadStart    LoadAvg  `json:"load_start"`
	LoadEnd      LoadAvg  `json:"load_end"`
	Profiles     Profiles `json:"profiles"`
}

// CapacityResult is figure 4 with the memory store.
type CapacityResult struct {
	Phase
	// Transport is the runs' default scheme: wss, or ws with -plain-ws.
	Transport string `json:"transport,omitempty"`
	// IdleRSSMB is an idle worker's RSS (memory store, no session).
	IdleRSSMB float64        `json:"idle_rss_mb"`
	Runs      []CapRunResult `json:"runs"`
	// Idle are the idle processes (the worker and the bare client, no
	// session, per transport: wss loads the system roots and the CA) the
	// side-by-side figures are taken above.
	Idle []IdleFigures `json:"idle,omitempty"`
	// Compare are the side-by-side runs: the worker and the bare client on
	// the same feed with the same N, one after the other.
	Compare []CapCompare `json:"compare,omitempty"`
	// Charts are the SVG files the report links (beside BENCHMARKS.md).
	Charts []string `json:"charts,omitempty"`
}

func (r *runner) capacity(ctx context.Context) error {
	sz := r.sz
	res := &CapacityResult{Transport: r.capTransport()}
	var runs []string
	for _, c := range sz.CapRuns {
		x := c.Label() + " on " + strings.Join(r.capTransports(c), " and ")
		if c.Bare {
			x += ", each beside the bare client"
		}
		runs = append(runs, x)
	}
	res.Phase = r.begin(PhaseCapacity, map[string]string{
		"worker":      "bin/memstreamer (the streamer package's worker on the no-I/O lease store, shared/lease/memstore: register, heartbeat every 1 s, acquire, checkpoint every 60 s and release run in memory; the Keeper, reconciler and control loop all run), sink stdout → /dev/null (JSON-lines envelope + one write syscall per message), pings every 15 s, claims by reconciliation every 1 s at up to 2,000/s, dialled 32 at once (" + schema.EnvHandshakesInFlight + "'s default, the bare client's bound; " + schema.EnvHandshakesPerHost + "=32, since every session dials the one feed host) (the audit every 5 s, as with the default reconcile: " + schema.EnvAuditEvery + "), " + EnvMaxRenews + "=" + CapMaxRenews + " (the floor: below the worker's default for these sizes), GOGC 50 (the binary's default) unless stated; on wss:// it trusts the run's CA through " + schema.EnvExtraCAFile,
		"feed":        fmt.Sprintf("bin/feed (testkit/feed) in its own process on %s, one port; each session's URL on one address in turn; messages {\"seq\":N,\"session\":S,\"ts\":MS} (~60 B), padded with -payload-bytes where a size says so; on wss:// (the default; -plain-ws: ws://) with a server certificate (ECDSA P-256) from a CA made for the run (testkit/tlsca, bin/feed -tls-dir), verified by every client", strings.Join(feedAddrs, ", ")),
		"runs":        strings.Join(runs, "; "),
		"window":      fmt.Sprintf("settle %s after every session delivers, then measure %s: CPU from /proc/<pid>/stat, RSS (VmRSS) sampled every second, messages from the worker's /stats; then the Go runtime's MemStats (/debug/pprof/heap?debug=1) %d times %s apart, a heap profile after a collection (/debug/pprof/heap?gc=1) and a %s CPU profile", sz.CapSettle, sz.CapWindow, memSamples, memSampleEvery, sz.CPUProfile),
		"bare client": fmt.Sprintf("bin/bareclient (scripts/bench/cmd/bareclient): what a minimal user program does with the worker's library (github.com/coder/websocket, the version in go.mod) and nothing else: the same N connections to the same URLs on the same feed process, right after the worker has stopped (never both at once), dialled at up to 2,000/s (the worker's claim rate) and 32 at once (an unbounded storm of TLS handshakes outlasts the feed's 5 s handshake deadline on this machine, dials again and keeps its peak in the RSS), compression disabled as the worker dials, one goroutine per connection that dials and then reads every message into io.Discard (Conn.Reader, no context timer: the library's cheapest read), wss:// verified against the system roots plus the run's CA (-ca); the worker's GOGC; measured as the worker is: the same settle (%s) and window (%s), CPU and RSS from /proc, messages from its /stats, MemStats from its /debug/pprof/heap?debug=1, then a heap profile after a collection as the worker's (the worker's heap is diffed against it site by site in \"Where it goes\"; no CPU profile)", sz.CapSettle, sz.CapWindow),
		"per session": "RSS, heap in use and goroutine stacks in use above the idle process of the same kind and transport (the worker's or the bare client's, no session), divided by the sessions held (in the side-by-side runs, the worker's without the lease table it seeded: below); the RSS divided by the sessions without subtracting the idle process is shown too; CPU per 1,000 msg/s = CPU (% of one core) ÷ (msg/s ÷ 1,000), msg/s per core its inverse",
	})
	r.rep.Capacity = res
	defer res.end()
	bare := false
	for _, c := range sz.CapRuns {
		bare = bare || c.Bare
	}
	idle, err := r.idleProcs(ctx, bare)
	res.Idle = idle
	if err != nil {
		return err
	}
	res.IdleRSSMB = idleFor(idle, KindWorker, res.Transport).RSSMB
	for i, c := range sz.CapRuns {
		for _, tr := range r.capTransports(c) {
			name := fmt.Sprintf("capacity-%d-%s", i+1, tr)
			rr, cmp, err := r.capacityRun(ctx, name, c, tr, idle)
			if rr != nil {
				if w := idleFor(idle, KindWorker, tr); rr.Held > 0 && w.RSSMB > 0 {
					rr.RSSMarginalKB = (rr.RSSMeanMB - w.RSSMB) * 1024 / float64(rr.Held)
				}
				res.Runs = append(res.Runs, *rr)
			}
			if cmp != nil {
				res.Compare = append(res.Compare, *cmp)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// capTransport is the capacity runs' default scheme.
func (r *runner) capTransport() string {
	if r.cfg.PlainWS {
		return "ws"
	}
	return "wss"
}

// capTransports are the schemes run c runs on: a side-by-side run on wss
// and on ws (ws alone with -plain-ws), any other on the default.
func (r *runner) capTransports(c CapRun) []string {
	if c.Bare && !r.cfg.PlainWS {
		return []string{"wss", "ws"}
	}
	return []string{r.capTransport()}
}

// capacityRun is run c on transport tr: the feed, the worker on it, and
// then, for a side-by-side run, the bare client on the same feed (the
// worker stopped first).
func (r *runner) capacityRun(ctx context.Context, name string, c CapRun, tr string, idle []IdleFigures) (*CapRunResult, *CapCompare, error) {
	sz := r.sz
	e := &capEnv{dir: filepath.Join(r.cfg.WorkDir, name), tls: tr == "wss", payload: c.PayloadBytes}
	if err := freshDir(e.dir); err != nil {
		return nil, nil, err
	}
	defer e.stop(func(err error) { r.log.Warn().Err(err).Str("run", name).Msg("stop") })
	res := &CapRunResult{Store: "memory", Sessions: c.Sessions, Rate: c.Rate, Env: c.Env, LoadStart: ReadLoad(), MaxRenews: CapMaxRenews,
		Transport: tr, PayloadBytes: c.PayloadBytes, MessageBytes: FeedMessageBytes(c.PayloadBytes, 5)}
	if v, ok := c.Env[EnvMaxRenews]; ok {
		res.MaxRenews = v
	}
	if err := r.startFeed(ctx, e, c.Rate); err != nil {
		return res, nil, err
	}
	argv := []string{r.cfg.Bin.MemStreamer, "-sessions", itoa(c.Sessions), "-urls", strings.Join(e.feedURLs(), ","), "-resume-param", "from", "-prefix", "cap-"}
	var extra []string
	for k, v := range c.Env {
		extra = append(extra, k+"="+v)
	}
	start := time.Now()
	settings := map[string]string{schema.EnvMaxSessions: itoa(c.Sessions), EnvMaxRenews: CapMaxRenews}
	if e.tls {
		settings[schema.EnvExtraCAFile] = e.caFile
	}
	if err := r.startCapWorker(ctx, e, name+"-worker", argv, settings, extra); err != nil {
		return res, nil, err
	}
	r.log.Info().Str("run", name).Int("sessions", c.Sessions).Float64("rate", c.Rate).Str("transport", tr).Msg("capacity run: ramping up")
	if err := waitHeld(ctx, e, c.Sessions, waitRate(c.Rate), 4*time.Minute); err != nil {
		return res, nil, err
	}
	res.RampSec = time.Since(start).Seconds()
	if err := sleepCtx(ctx, sz.CapSettle); err != nil {
		return res, nil, err
	}
	w, err := measureWindow(ctx, e, 0, sz.CapWindow)
	if err != nil {
		return res, nil, err
	}
	fillCapResult(res, w, c.Rate)
	res.OpenFiles = ProcOpenFiles(e.work.Pid())
	wmem, err := sampleMemStats(ctx, e.admin, memSamples, memSampleEvery, false)
	if err != nil {
		return res, nil, err
	}
	res.Profiles = collectProfiles(ctx, e.admin, e.dir, name, sz.CPUProfile)
	res.LoadEnd = ReadLoad()
	r.log.Info().Str("run", name).Int("held", res.Held).Float64("msg_s", res.MsgRate).Float64("cpu_per_1k", res.CPUPer1k).
		Float64("rss_kib_per_session", res.RSSPerSessKB).Msg("capacity run done")
	if !c.Bare {
		return res, nil, nil
	}
	// The worker stops before the bare client starts: the two never share
	// the cores.
	if err := e.work.Stop(30 * time.Second); err != nil {
		r.log.Warn().Err(err).Str("run", name).Msg("worker stop")
	}
	e.work = nil
	wf := workerFigures(*res, w, wmem, idleFor(idle, KindWorker, tr))
	if wf.StoreMB, err = storeMB(filepath.Join(e.dir, name+"-worker.log")); err != nil {
		return res, nil, err
	}
	bf, err := r.bareRun(ctx, e, name, c, idleFor(idle, KindBare, tr), sz.CapSettle, sz.CapWindow)
	cmp := NewCapCompare(c, tr, wf, bf)
	if err != nil {
		cmp.Bare.Error = err.Error()
	}
	res.Profiles.addHeapAboveBare(ctx, cmp.Bare)
	r.log.Info().Str("run", name).Float64("bare_cpu_per_1k", cmp.Bare.CPUPer1k).Float64("bare_rss_kib_per_session", cmp.Bare.RSSAboveIdleKB).
		Float64("cpu_ratio", cmp.Ratio.CPUPer1k).Float64("rss_diff_kib", cmp.Diff.RSSAboveIdleKB).Msg("bare client run done")
	return res, &cmp, err
}

func fillCapResult(res *CapRunResult, w windowResult, rate float64) {
	res.Held = w.s1.Owned
	res.WindowSec = w.seconds
	res.MsgRate = float64(w.s1.Messages["messages_in"]-w.s0.Messages["messages_in"]) / w.seconds
	res.Expected = float64(res.Held) * rate
	res.CPUPct = w.workCPU
	if res.MsgRate > 0 {
		res.CPUPer1k = res.CPUPct / (res.MsgRate / 1000)
	}
	res.FeedCPUPct, res.MachineCPU = w.feedCPU, w.machineCPU
	res.RSSMeanMB, res.RSSMaxMB = w.rssMean/(1<<20), w.rssMax/(1<<20)
	if res.Held > 0 {
		res.RSSPerSessKB = w.rssMean / 1024 / float64(res.Held)
	}
	res.Goroutines = w.s1.Goroutines
	res.Reconnects = w.s1.Messages["reconnects"] - w.s0.Messages["reconnects"]
	res.RenewsPerSec = float64(w.s1.HeartbeatsOK-w.s0.HeartbeatsOK) / w.seconds // one heartbeat per worker since issue 13
	res.NeededPerSec = 1 / DefaultHeartbeatEvery.Seconds()
	res.LeaseLost = w.s1.LeaseLost - w.s0.LeaseLost
}

// runLabel names a worker run: size, payload, environment, transport.
func runLabel(run CapRunResult) string {
	x := CapRun{Sessions: run.Sessions, Rate: run.Rate, PayloadBytes: run.PayloadBytes, Env: run.Env}.Label()
	if run.Transport != "" {
		x += ", " + run.Transport
	}
	return x
}

func renderCapacity(p printer, r *Report) {
	c := r.Capacity
	if !heading(p, c, "5. One worker's capacity (no-I/O store)") {
		return
	}
	p("| run | held | msg/s (expected) | worker CPU (%% of a core) | CPU per 1,000 msg/s | RSS mean / max | RSS per session (above the idle worker's) | heartbeats/s (needed) | tenures lost | goroutines | open files | feed CPU | machine CPU (of %d %%) | load start → end |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n", 100*r.Machine.Cores)
	var renewed, needed float64
	var lost int64
	for _, run := range c.Runs {
		label := fmt.Sprintf("%s, %s=%s", runLabel(CapRunResult{Sessions: run.Sessions, Rate: run.Rate, PayloadBytes: run.PayloadBytes, Transport: run.Transport}), EnvMaxRenews, run.MaxRenews) + envLabel(withoutKey(run.Env, EnvMaxRenews))
		renewed, needed, lost = renewed+run.RenewsPerSec, needed+run.NeededPerSec, lost+run.LeaseLost
		expected := thousands(int(run.Expected))
		if run.Rate >= MaxFeedRate {
			expected = "as fast as the feed pushes"
		}
		p("| %s | %s | %s (%s) | %.1f %% | %.2f %% | %.0f / %.0f MiB | %.1f KiB (%.1f KiB) | %.2f (%.0f) | %d | %s | %s | %.0f %% | %.0f %% | %s → %s |\n",
			label, thousands(run.Held), thousands(int(run.MsgRate)), expected,
			run.CPUPct, run.CPUPer1k, run.RSSMeanMB, run.RSSMaxMB, run.RSSPerSessKB, run.RSSMarginalKB, run.RenewsPerSec, run.NeededPerSec, run.LeaseLost,
			thousands(run.Goroutines), thousands(run.OpenFiles), run.FeedCPUPct, run.MachineCPU, run.LoadStart, run.LoadEnd)
	}
	p("\n**Writes in flight are not the bound.** Since issue 13 a held session writes only its checkpoint (every 60 s when last_seq advanced) and the worker one heartbeat a second; `%s` (the runs set 64) caps the checkpoints in flight, so a worker sustains 64 ÷ (the store's write latency) checkpoints/s. With the no-I/O store that bounds nothing: over the runs above the workers heartbeat %.1f times/s against %.0f needed (one per worker per second) and lost %d tenures. Against DynamoDB at, say, 5 ms per UpdateItem, 64 in flight write 12,800 checkpoints/s, enough for about %s sessions at one checkpoint a minute — far above the default MaxSessions (1,000); section 5b measures the store itself.\n", EnvMaxRenews, renewed, needed, lost, thousands(WriteBound(64, 5*time.Millisecond, DefaultCheckpointEvery)))
	if c.IdleRSSMB > 0 {
		p("\nAn idle worker (memory store, no session) has an RSS of %.1f MiB; the 32 KiB goal is judged on the total RSS divided by the sessions held (the stricter figure).\n", c.IdleRSSMB)
	}
	if len(c.Compare) == 0 {
		p("\nFor scale (docs/references.md, a client-only probe on the same machine kind): a bare coder/websocket client reading 1 msg/s on 19,800 connections, nothing else, ≈ 33 KiB and ≈ 2.3 %% of a core per 1,000 msg/s; gorilla/websocket ≈ 24 KiB and ≈ 1.5 %%.\n\n")
	} else {
		p("\n")
		renderCompare(p, r)
	}
	for _, run := range c.Runs {
		renderProfiles(p, run)
	}
}

// WriteBound is the most sessions a Keeper keeps checkpointed with
// maxInFlight writes in flight, each taking latency, every session
// checkpointing once per every (Little's law): maxInFlight / latency ×
// every.
func WriteBound(maxInFlight int, latency, every time.Duration) int {
	return int(float64(maxInFlight) / latency.Seconds() * every.Seconds())
}

// capacityGoals are the capacity runs' goals (Goals): RSS per session and
// CPU per 1,000 msg/s.
func capacityGoals(r *Report) []Goal {
	var gs []Goal
	if c := r.Capacity; c != nil {
		for _, run := range c.Runs {
			// The one session as fast as the feed pushes has no per-session
			// goal; runs on the other transport are for comparison.
			if run.Held == 0 || run.Rate >= MaxFeedRate || (c.Transport != "" && run.Transport != c.Transport) {
				continue
			}
			label := fmt.Sprintf("%s sessions × %g msg/s%s", thousands(run.Held), run.Rate, envLabel(run.Env))
			if run.Transport != "" {
				label += ", " + run.Transport
			}
			if run.Rate <= 1 {
				gs = append(gs, judged("RSS per session, "+label, fmt.Sprintf("%.1f KiB", run.RSSPerSessKB), "≤ 32 KiB", run.RSSPerSessKB <= 32,
					fmt.Sprintf("+%.1f KiB (+%.0f %%)", run.RSSPerSessKB-32, 100*(run.RSSPerSessKB/32-1))))
			}
			gs = append(gs, judged("CPU per 1,000 msg/s, "+label, fmt.Sprintf("%.2f %% of a core", run.CPUPer1k), "≤ 2.5 %", run.CPUPer1k <= 2.5,
				fmt.Sprintf("+%.2f points (×%.1f)", run.CPUPer1k-2.5, run.CPUPer1k/2.5)))
		}
	}
	return append(gs, compareGoals(r)...)
}

// storeMB is the table the worker seeded (memseed), from its log, in MiB.
func storeMB(logPath string) (float64, error) {
	n, found, err := memseed.StoreBytes(logPath)
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("%s: no %q line with %s", logPath, memseed.SeededMsg, memseed.StoreBytesField)
	}
	return float64(n) / (1 << 20), nil
}
