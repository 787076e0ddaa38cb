// Phase standbymem (issue 39's memory goal): what one worker pays per hot
// standby it holds, against the bare client's memory for one connection
// on the same feed with the same N. An owner worker holds N sessions
// started with a standby, a second worker (the holder) holds their N
// standbys; the holder's RSS, heap and goroutine stacks above its idle
// start, per standby, are set beside the bare client's per connection
// (capacity_bare.go's run, reused) plus the window each standby keeps.

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/feed"
	streamer "github.com/wsfleet/wsfleet/workers/streamer"
)

// standbyMemPhase is the phase (phase.go).
var standbyMemPhase = phase{name: PhaseStandbyMem, run: (*runner).standbyMem, render: renderStandbyMem, goals: standbyMemGoals}

// standbyMemRate is the standbymem run's feed rate (msg/s per connection).
const standbyMemRate = 1

// standbyMemSteadyMax bounds a settle until the RSS is steady
// (settleRSS): the holder returns the memory its placement wave left in
// about 20–30 s (5,000 standbys).
const standbyMemSteadyMax = 2 * time.Minute

// StandbyMemResult is the standbymem phase's run.
type StandbyMemResult struct {
	Phase
	Transport string  `json:"transport"`
	Sessions  int     `json:"sessions"`
	Rate      float64 `json:"rate"`
	// Owned: the owner's sessions at the window's end; PlaceSec: the
	// holder's start → every standby held and connected.
	Owned    int     `json:"owned"`
	PlaceSec float64 `json:"place_s"`
	// Holder are the holder's figures (Held: its standbys; Idle: an idle
	// holder, the same binary with the same settings on the same stack,
	// read before the owner starts and stopped before the holder starts:
	// no standby exists yet); Connected its standbys reading the stream at
	// the window's end and WindowBytes what their windows keep
	// (standby_window_bytes).
	Holder      ClientFigures `json:"holder"`
	Connected   int           `json:"connected"`
	WindowBytes int64         `json:"window_bytes"`
	// Bare is the bare client's run on the same feed with N connections
	// (the workers stopped), above an idle bare client on the same
	// transport.
	Bare ClientFigures `json:"bare"`
	// Profiles are the holder's heap profile (no CPU profile), diffed
	// against the bare client's site by site.
	Profiles Profiles `json:"holder_profiles"`
	// Verdict is the goal's, from the figures above (JudgeStandbyMem).
	Verdict StandbyMemVerdict `json:"verdict"`

	placePeakRSS int64 // the holder's highest RSS read while placed
}

// StandbyMemVerdict is the memory goal judged: a standby's RSS above the
// idle holder ≤ the bare client's RSS above its idle process per
// connection + the window the standby keeps (all KiB per standby).
type StandbyMemVerdict struct {
	HolderKB   float64 `json:"holder_rss_kib_per_standby"`
	BareKB     float64 `json:"bare_rss_kib_per_connection"`
	OverBareKB float64 `json:"holder_minus_bare_kib"`
	WindowKB   float64 `json:"window_kib_per_standby"`
	BoundKB    float64 `json:"bound_kib"` // BareKB + WindowKB
	Known      bool    `json:"known"`     // both runs held connections
	Met        bool    `json:"met"`
}

// JudgeStandbyMem derives h's and b's per-connection figures (their Idle
// subtracted) and judges the goal with windowBytes kept over h.Held
// standbys.
func JudgeStandbyMem(h, b *ClientFigures, windowBytes int64) StandbyMemVerdict {
	h.derive()
	b.derive()
	v := StandbyMemVerdict{Known: h.Held > 0 && b.Held > 0}
	if !v.Known {
		return v
	}
	v.HolderKB, v.BareKB = h.RSSAboveIdleKB, b.RSSAboveIdleKB
	v.OverBareKB = v.HolderKB - v.BareKB
	v.WindowKB = float64(windowBytes) / 1024 / float64(h.Held)
	v.BoundKB = v.BareKB + v.WindowKB
	v.Met = v.HolderKB <= v.BoundKB
	return v
}

// standbyMemSettings are both workers' settings: room for N sessions and
// N standbys, no session held long enough to move (the holder stays a
// holder), the capacity runs' claim pace and per-host handshakes.
func standbyMemSettings(n int) map[string]string {
	return map[string]string{
		schema.EnvMaxSessions:       itoa(n + 100),
		schema.EnvMinHold:           "24h",
		schema.EnvClaimsPerSecond:   "2000",
		schema.EnvHandshakesPerHost: "32",
	}
}

func (r *runner) standbyMem(ctx context.Context) error {
	sz := r.sz
	n := sz.StandbyMemSessions
	res := &StandbyMemResult{Transport: r.capTransport(), Sessions: n, Rate: standbyMemRate}
	res.Phase = r.begin(PhaseStandbyMem, map[string]string{
		"stack": "the lease phases' local stack (devstack: dynalite, fauxqs, the ingest front, bin/feed) on " + r.leaseTransport() + "; the feed admits a standby connection beside the owner's (-allow-standby, told by the tenure header)",
		"workers": fmt.Sprintf("two bin/streamer (the shipped worker), sinks to /dev/null: the owner starts alone and claims %s sessions started through the API with `\"standby\":{\"enabled\":true}` (the default window: 30 s / 1 MiB) at %g msg/s; then the holder starts and the owner places every standby on it; both with %s=%d, %s=24h (no session moves to the holder), %s=2000, %s=32; the standby's backstop re-read at its default (30 s)",
			thousands(n), float64(standbyMemRate), schema.EnvMaxSessions, n+100, schema.EnvMinHold, schema.EnvClaimsPerSecond, schema.EnvHandshakesPerHost),
		"holder": fmt.Sprintf("idle figures from an idle holder: a worker started as the holder is (the same binary and settings, no work queue) on the stack before the owner and before any session, read 3 s after its start (RSS: the mean of 3 reads a second apart; heap, stacks and MemStats after a collection; goroutines from /stats) and stopped gracefully before the owner starts (the holder itself cannot give them: the owner places standbys on it within a second or two of its start, and they were read so until this run); then the holder, once it holds %s standbys all connected (GET /status) and a settle of at least %s and until its RSS is steady (the last %d reads, a second apart, within %g %% of each other; at most %s: the runtime returns the heap the placement wave left over tens of seconds, and the figure is what the standbys hold, not that return; the highest RSS read while placing and settling is given beside it): RSS sampled every second over %s, MemStats (/debug/pprof/heap?debug=1) %d times %s apart, standby_window_bytes from /stats, a heap profile after a collection (diffed against the bare client's, site by site)",
			thousands(n), sz.StandbyMemSettle, steadyReads, steadyBand*100, standbyMemSteadyMax, sz.StandbyMemWindow, memSamples, memSampleEvery),
		"bare client": fmt.Sprintf("bin/bareclient as in the capacity phase's side-by-side runs (its settings there): %s connections on the same feed process, after both workers were killed (never at once), the same settle (at least %s and until its RSS is steady, by the same rule) and window (%s); above an idle bare client on the same transport", thousands(n), sz.StandbyMemSettle, sz.StandbyMemWindow),
		"per standby": "RSS, heap in use, goroutine stacks in use and goroutines above the idle process of each kind (the idle holder, an idle bare client), divided by the standbys held (the connections held); the window is standby_window_bytes ÷ the standbys; the goal: holder ≤ bare + window",
	})
	r.rep.StandbyMem = res
	defer res.end()
	err := r.standbyMemRun(ctx, res)
	res.Verdict = JudgeStandbyMem(&res.Holder, &res.Bare, res.WindowBytes)
	res.Profiles.addHeapAboveBare(ctx, res.Bare)
	r.log.Info().Int("standbys", res.Holder.Held).Float64("holder_kib", res.Verdict.HolderKB).Float64("bare_kib", res.Verdict.BareKB).
		Float64("window_kib", res.Verdict.WindowKB).Bool("met", res.Verdict.Met).Msg("standbymem run done")
	return err
}

// standbyMemRun fills res: the owner, its sessions, the holder's idle
// figures, its standbys measured, the workers killed, the bare client.
func (r *runner) standbyMemRun(ctx context.Context, res *StandbyMemResult) error {
	sz := r.sz
	n := res.Sessions
	ls, err := r.startLeaseStackWith(ctx, PhaseStandbyMem, standbyMemRate, true)
	if err != nil {
		return err
	}
	ls.discardSinks = true
	defer ls.shutdown()
	settings := standbyMemSettings(n)
	res.Holder.GOGC = gogcValue(nil)
	if res.Holder.Idle, err = idleHolder(ctx, ls, settings); err != nil {
		return fmt.Errorf("idle holder: %w", err)
	}
	res.Holder.Idle.Transport = res.Transport
	owner, err := ls.addWorker(ctx, true, settings)
	if err != nil {
		return err
	}
	ids := sessionIDs("sbm-%05d", n)
	withStandby := map[string]any{"standby": map[string]any{"enabled": true}}
	if err := ls.startSessionsWith(ctx, ids, func(string) map[string]any { return withStandby }); err != nil {
		return err
	}
	if err := ls.waitOwned(ctx, []*bworker{owner}, n, 4*time.Minute); err != nil {
		return err
	}
	r.log.Info().Int("sessions", n).Msg("standbymem: the owner holds every session; starting the holder")
	t0 := time.Now()
	holder, err := ls.addWorker(ctx, false, settings)
	if err != nil {
		return err
	}
	if err := waitConnectedStandbys(ctx, holder, n, 4*time.Minute, &res.placePeakRSS); err != nil {
		return err
	}
	res.PlaceSec = time.Since(t0).Seconds()
	r.log.Info().Int("standbys", n).Float64("place_s", res.PlaceSec).Msg("standbymem: every standby held and connected")
	if err := r.measureHolder(ctx, ls, owner, holder, res); err != nil {
		return err
	}
	// Both workers end before the bare client starts: kill -9, at once (a
	// graceful stop would hand the sessions off and drop the standbys).
	for _, w := range []*bworker{holder, owner} {
		if err := w.Proc.Signal(syscall.SIGKILL); err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := w.Proc.Wait(wctx)
		cancel()
		if err != nil {
			return err
		}
	}
	e := &capEnv{dir: filepath.Join(ls.st.LogDir(), "bare"), tls: res.Transport == "wss", feed: ls.st.Feed, caFile: ls.st.CAFile(),
		urls: []string{feed.URL(ls.st.FeedURL(), "{id}")}, steadyMax: standbyMemSteadyMax}
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		return err
	}
	idle, err := r.idleProc(ctx, KindBare, res.Transport)
	if err != nil {
		return fmt.Errorf("idle bare client: %w", err)
	}
	res.Bare, err = r.bareRun(ctx, e, PhaseStandbyMem, CapRun{Sessions: n, Rate: standbyMemRate}, idle, sz.StandbyMemSettle, sz.StandbyMemWindow)
	if err != nil {
		res.Bare.Error = err.Error()
	}
	return err
}

// idleHolder starts a worker as the holder is started (no work queue,
// settings) on ls before the owner and before any session, reads its idle
// figures 3 s after its start (RSS: the mean of 3 reads a second apart;
// heap, stacks and MemStats after a collection; goroutines from /stats)
// and stops it (a graceful stop: its record says LEFT, so the owner never
// asks it for a standby). The holder's own figures cannot serve: the owner
// places standbys on it within a second or two of its start.
func idleHolder(ctx context.Context, ls *leaseStack, settings map[string]string) (IdleFigures, error) {
	f := IdleFigures{Kind: "holder"}
	w, err := ls.addWorker(ctx, false, settings)
	if err != nil {
		return f, err
	}
	defer func() { _ = w.Proc.Stop(30 * time.Second) }()
	if err := f.readIdle(ctx, w.Proc.Pid(), w.Admin); err != nil {
		return f, err
	}
	st, err := getStats(ctx, w.Admin)
	if err != nil {
		return f, err
	}
	if st.Standbys != 0 || st.Owned != 0 {
		return f, fmt.Errorf("the idle holder held %d standbys and %d sessions", st.Standbys, st.Owned)
	}
	f.Goroutines = st.Goroutines
	if err := w.Proc.Stop(30 * time.Second); err != nil {
		return f, fmt.Errorf("stop: %w", err)
	}
	return f, nil
}

// getStatus reads a worker's /status.
func getStatus(ctx context.Context, admin string) (streamer.Status, error) {
	return getJSON[streamer.Status](ctx, "http://"+admin+"/status", 256<<20)
}

// connectedStandbys counts the standbys of st reading the stream.
func connectedStandbys(st streamer.Status) int {
	n := 0
	for _, v := range st.Standbys {
		if v.Connected {
			n++
		}
	}
	return n
}

// waitConnectedStandbys polls w until it holds want standbys (its /stats),
// every one connected (its /status, read only then: it lists them all),
// or timeout; peak keeps the highest RSS read at the polls.
func waitConnectedStandbys(ctx context.Context, w *bworker, want int, timeout time.Duration, peak *int64) error {
	deadline := time.Now().Add(timeout)
	for {
		if !w.Proc.Running() {
			return fmt.Errorf("holder exited (see %s)", w.Proc.LogPath)
		}
		if rss, err := ProcRSS(w.Proc.Pid()); err == nil {
			*peak = max(*peak, rss)
		}
		stats, err := getStats(ctx, w.Admin)
		if err != nil {
			return err
		}
		held, conn := stats.Standbys, 0
		if held >= want {
			st, err := getStatus(ctx, w.Admin)
			if err != nil {
				return err
			}
			held, conn = len(st.Standbys), connectedStandbys(st)
		}
		if held >= want && conn >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the holder holds %d of %d standbys (%d connected) after %s", held, want, conn, timeout)
		}
		if err := sleepCtx(ctx, time.Second); err != nil {
			return err
		}
	}
}

// measureHolder measures the holder over the settle and window, as a
// capacity run measures its worker, then reads its standbys and profiles.
func (r *runner) measureHolder(ctx context.Context, ls *leaseStack, owner, holder *bworker, res *StandbyMemResult) error {
	sz := r.sz
	f := &res.Holder
	f.LoadStart = ReadLoad()
	var err error
	if f.SettleSec, f.PeakRSSMB, f.Steady, err = settleRSS(ctx, holder.Proc.Pid(), sz.StandbyMemSettle, standbyMemSteadyMax, res.placePeakRSS); err != nil {
		return err
	}
	w, err := sampleWindow(ctx, holder.Proc.Pid(), ls.st.Feed.Pid(), owner.Proc.Pid(), sz.StandbyMemWindow)
	if err != nil {
		return err
	}
	f.WindowSec, f.CPUPct, f.RSSMeanMB = w.seconds, w.workCPU, w.rssMean/(1<<20)
	f.FeedCPUPct, f.MachineCPU = w.feedCPU, w.machineCPU
	mem, err := sampleMemStats(ctx, holder.Admin, memSamples, memSampleEvery, false)
	if err != nil {
		return err
	}
	f.HeapInuseMB, f.StackInuseMB, f.NumGC, f.Mem = mem["HeapInuse"]/(1<<20), mem["Stack"]/(1<<20), int64(mem["NumGC"]), mem
	hs, err := getStats(ctx, holder.Admin)
	if err != nil {
		return err
	}
	f.Held, f.Goroutines, res.WindowBytes = hs.Standbys, hs.Goroutines, hs.StandbyWindowBytes
	// The collections after every figure above; the heap profile before
	// the /status read: encoding a view of every standby leaves a buffer
	// of their size in the JSON encoder's pool.
	if f.LiveHeapMB, err = liveHeapMB(ctx, holder.Admin); err != nil {
		return err
	}
	res.Profiles = collectProfiles(ctx, holder.Admin, ls.st.LogDir(), "standbymem-holder", 0)
	status, err := getStatus(ctx, holder.Admin)
	if err != nil {
		return err
	}
	res.Connected = connectedStandbys(status)
	ost, err := getStats(ctx, owner.Admin)
	if err != nil {
		return err
	}
	res.Owned = ost.Owned
	f.LoadEnd = ReadLoad()
	return nil
}

// standbyMemGoals is issue 39's memory goal on the standbymem run.
func standbyMemGoals(r *Report) []Goal {
	s := r.StandbyMem
	if s == nil {
		return nil
	}
	v := s.Verdict
	measured, miss := fmt.Sprintf("%.1f vs %.1f + %.2f KiB (%+.1f)", v.HolderKB, v.BareKB, v.WindowKB, v.OverBareKB), fmt.Sprintf("+%.1f KiB", v.HolderKB-v.BoundKB)
	if !v.Known {
		measured, miss = "not measured", "not measured"
	}
	return []Goal{judgedIf(v.Known, fmt.Sprintf("Hot standby: memory per standby against the bare client's per connection plus its window, %s standbys × %g msg/s, %s", thousands(s.Holder.Held), s.Rate, s.Transport),
		measured, "≤ bare + window", v.Met, miss)}
}

// renderStandbyMem is the standbymem section.
func renderStandbyMem(p printer, r *Report) {
	s := r.StandbyMem
	if !heading(p, s, "5d. A hot standby's memory against the bare client") {
		return
	}
	h, b, v := s.Holder, s.Bare, s.Verdict
	p("The owner held %s of %s sessions; the holder held %s standbys (%s connected at the window's end, %.0f s from its start to all placed and connected). Per standby or connection, above the idle process of each kind (the idle holder: a worker started as the holder is, before the owner and any session, stopped before the holder starts):\n\n",
		thousands(s.Owned), thousands(s.Sessions), thousands(h.Held), thousands(s.Connected), s.PlaceSec)
	p("| process | held | RSS per standby / connection (RSS ÷ N) | heap | stacks | goroutines | window | RSS mean (idle) | CPU (%% of a core) | load start → end |\n|---|---|---|---|---|---|---|---|---|---|\n")
	row := func(who string, f ClientFigures, window string) {
		if f.Error != "" && f.Held == 0 {
			p("| %s | failed: %s | | | | | | | | |\n", who, oneLine(f.Error))
			return
		}
		p("| %s | %s | %.1f KiB (%.1f) | %.1f KiB | %.1f KiB | %.2f | %s | %.0f MiB (%.1f) | %.1f %% | %s → %s |\n",
			who, thousands(f.Held), f.RSSAboveIdleKB, f.RSSPerSessKB, f.HeapPerSessKB, f.StackPerSessKB, f.GoroutinesPerSess, window, f.RSSMeanMB, f.Idle.RSSMB, f.CPUPct, f.LoadStart, f.LoadEnd)
	}
	row("holder (wsfleet worker)", h, fmt.Sprintf("%.2f KiB", v.WindowKB))
	row("bare client", b, "—")
	p("| holder − bare | | %+.1f KiB | %+.1f KiB | %+.1f KiB | %+.2f | | | | |\n\n", v.OverBareKB, h.HeapPerSessKB-b.HeapPerSessKB, h.StackPerSessKB-b.StackPerSessKB, h.GoroutinesPerSess-b.GoroutinesPerSess)
	renderSettles(p, h, b)
	renderRSSParts(p, h, b)
	if v.Known {
		verdict := "**met**"
		if !v.Met {
			verdict = fmt.Sprintf("**missed** by %.1f KiB", v.HolderKB-v.BoundKB)
		}
		p("Goal (issue 39): a standby ≤ the bare client's memory for one connection plus its window: %.1f ≤ %.1f + %.2f KiB: %s.\n\n", v.HolderKB, v.BareKB, v.WindowKB, verdict)
	}
	pr := s.Profiles
	if pr.Err != "" {
		p("Profile errors: %s\n\n", oneLine(pr.Err))
	}
	excerpt(p, fmt.Sprintf("The holder's heap in use, top entries (`go tool pprof -top -sample_index=inuse_space %s`)", relProfile(pr.HeapFile)), pr.HeapTop)
	if len(pr.HeapAboveBare) > 0 {
		excerpt(p, fmt.Sprintf("The holder's heap in use above the bare client, per allocation site (`go tool pprof -top -sample_index=inuse_space -diff_base %s %s`)", relProfile(pr.BareHeapFile), relProfile(pr.HeapFile)), pr.HeapAboveBare)
		p("Heap above the bare client per standby (the two profiles' in-use totals, each with its process's fixed heap): %+.1f ± %.1f KiB.\n\n", pr.heapAboveBareKiB(h.Held), pr.heapAboveBareErrKiB(h.Held))
	}
}

// rssParts is where a client's RSS above its idle process goes, per
// connection (KiB), from MemStats: the window's (the mean of its reads)
// less the idle process's (after a collection).
type rssParts struct {
	RSS, HeapInuse, HeapKept, Stack, Meta, Rest, HeapGoal float64
	// Live is the live heap above idle (LiveHeapMB less the idle
	// process's HeapAlloc, both after a collection; 0: not read).
	Live float64
}

// rssPartsOf derives f's rssParts (false: MemStats missing on either side,
// or nothing held). f must be derived.
func rssPartsOf(f ClientFigures) (rssParts, bool) {
	m, i := f.Mem, f.Idle.Mem
	if f.Held <= 0 || len(m) == 0 || len(i) == 0 {
		return rssParts{}, false
	}
	per := func(keys ...string) float64 {
		var d float64
		for _, k := range keys {
			d += m[k] - i[k]
		}
		return d / 1024 / float64(f.Held)
	}
	x := rssParts{RSS: f.RSSAboveIdleKB, HeapInuse: per("HeapInuse"), Stack: per("Stack"),
		Meta: per("MSpan", "MCache", "GCSys", "OtherSys", "BuckHashSys"), HeapGoal: per("NextGC")}
	x.HeapKept = per("HeapIdle") - per("HeapReleased")
	if f.LiveHeapMB > 0 {
		x.Live = (f.LiveHeapMB*(1<<20) - i["HeapAlloc"]) / 1024 / float64(f.Held)
	}
	x.Rest = x.RSS - x.HeapInuse - x.HeapKept - x.Stack - x.Meta
	return x, true
}

// renderRSSParts is the table of where the holder's and the bare client's
// RSS above idle goes, per standby or connection.
func renderRSSParts(p printer, h, b ClientFigures) {
	hp, ok1 := rssPartsOf(h)
	bp, ok2 := rssPartsOf(b)
	if !ok1 || !ok2 {
		return
	}
	p("Where the RSS above idle goes, per standby or connection (Go's MemStats at the window's end, the mean of its reads, less the idle process's after a collection; GOGC %s on both):\n\n", h.GOGC)
	p("| KiB per standby / connection | holder | bare client | holder − bare |\n|---|---|---|---|\n")
	row := func(what string, a, c float64) { p("| %s | %.1f | %.1f | %+.1f |\n", what, a, c, a-c) }
	row("RSS", hp.RSS, bp.RSS)
	row("heap in use (HeapInuse)", hp.HeapInuse, bp.HeapInuse)
	row("free heap kept, not returned to the OS (HeapIdle − HeapReleased)", hp.HeapKept, bp.HeapKept)
	row("goroutine stacks (StackInuse)", hp.Stack, bp.Stack)
	row("runtime metadata (MSpanInuse, MCacheInuse, GCSys, OtherSys, BuckHashSys)", hp.Meta, bp.Meta)
	row("the rest (RSS less the above: pages mapped and touched outside these, the binary's)", hp.Rest, bp.Rest)
	row("heap goal (NextGC), for scale: the runtime keeps free heap up to 10 % above it", hp.HeapGoal, bp.HeapGoal)
	if hp.Live != 0 && bp.Live != 0 {
		row("live heap (HeapAlloc after a collection, at the end), for scale", hp.Live, bp.Live)
		p("\nLike with like without the collector's timing (what each holds, not how far its heap has grown toward its goal): live heap + goroutine stacks per standby %.1f KiB, per bare connection %.1f KiB (%+.1f); the RSS above adds the collection headroom, up to GOGC %% of the live heap and stacks (and the runtime keeps up to 10 %% above that goal before it returns memory): a heap that allocates reaches it, the bare client, which allocates almost nothing once connected, may not within the window.\n",
			hp.Live+hp.Stack, bp.Live+bp.Stack, hp.Live+hp.Stack-bp.Live-bp.Stack)
	}
	p("\n")
}

// renderSettles says how long each process settled before its window and
// the highest RSS it read meanwhile (the holder's: from its start, the
// placement wave included), per standby or connection above idle.
func renderSettles(p printer, h, b ClientFigures) {
	if h.SettleSec == 0 && b.SettleSec == 0 {
		return
	}
	one := func(who string, f ClientFigures, since string) string {
		if f.SettleSec == 0 || f.Held <= 0 {
			return who + ": not settled so"
		}
		steady := "its RSS steady"
		if !f.Steady {
			steady = "its RSS not steady at the bound"
		}
		return fmt.Sprintf("%s settled %.0f s (%s); its highest RSS %s: %.0f MiB, %.1f KiB per standby or connection above idle", who, f.SettleSec, steady, since, f.PeakRSSMB, (f.PeakRSSMB-f.Idle.RSSMB)*1024/float64(f.Held))
	}
	p("Settles: %s; %s.\n\n", one("the holder", h, "from its start (the placement wave) to the window"), one("the bare client", b, "from its ramp to the window"))
}
