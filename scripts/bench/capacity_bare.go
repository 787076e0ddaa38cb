// The capacity phase's side-by-side runs (issue 27): the worker and the
// bare reference client (bin/bareclient) on the same feed with the same N,
// one after the other; their per-session figures above the idle process of
// each, the difference and the ratio, the goals judged on them, and the
// table of section 5.

package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/proc"
	"github.com/wsfleet/wsfleet/testkit/tlsca"
	"github.com/wsfleet/wsfleet/workers/streamer/envconfig"
)

// The two clients a side-by-side run measures.
const (
	KindWorker = "worker" // bin/memstreamer
	KindBare   = "bare"   // bin/bareclient
)

// The goals of issue 27, judged on the side-by-side figures at every size
// but the one session as fast as the feed pushes, on the default transport.
const (
	// GoalMemOverBareKiB: memory per session ≤ the bare client's + this.
	GoalMemOverBareKiB = 2.0
	// GoalCPUOverBare: CPU per 1,000 msg/s ≤ this × the bare client's.
	GoalCPUOverBare = 1.2
)

// IdleFigures are an idle process's (no session): what the per-session
// figures are taken above.
type IdleFigures struct {
	Kind         string  `json:"kind"` // worker | bare
	Transport    string  `json:"transport"`
	RSSMB        float64 `json:"rss_mb"`
	HeapInuseMB  float64 `json:"heap_inuse_mb"`
	StackInuseMB float64 `json:"stack_inuse_mb"`
	Goroutines   int     `json:"goroutines"`
	// Mem is the MemStats read with the heap and stacks (memStatKeys).
	Mem map[string]float64 `json:"memstats,omitempty"`
}

// idleFor is the idle figures of kind on transport (zero: not measured).
func idleFor(idle []IdleFigures, kind, transport string) IdleFigures {
	for _, f := range idle {
		if f.Kind == kind && f.Transport == transport {
			return f
		}
	}
	return IdleFigures{Kind: kind, Transport: transport}
}

// ClientFigures are one client's figures in a side-by-side run. The raw
// fields are measured; derive computes the per-session ones.
type ClientFigures struct {
	Held      int     `json:"held"`
	RampSec   float64 `json:"ramp_s"`
	WindowSec float64 `json:"window_s"`
	MsgRate   float64 `json:"msg_per_s"`
	CPUPct    float64 `json:"cpu_pct_of_one_core"`
	RSSMeanMB float64 `json:"rss_mean_mb"`
	// HeapInuseMB and StackInuseMB are MemStats' HeapInuse and StackInuse
	// after the window (the mean of memSamples reads).
	HeapInuseMB  float64 `json:"heap_inuse_mb"`
	StackInuseMB float64 `json:"stack_inuse_mb"`
	// Mem is every MemStats of memStatKeys over the same reads (their
	// mean): where the RSS goes besides the heap and stacks in use.
	Mem        map[string]float64 `json:"memstats,omitempty"`
	Goroutines int                `json:"goroutines"`
	Reconnects int64              `json:"reconnects_in_window"`
	// Redials are the connections dialled again since the start (the
	// ramp included); DialErrors the bare client's failed dials since the
	// start (the worker's are in its reconnects).
	Redials    int64 `json:"redials_total"`
	DialErrors int64 `json:"dial_errors_total,omitempty"`
	// SettleSec, PeakRSSMB and Steady are a settle until the RSS is
	// steady (settleRSS; the standbymem phase's): its length, the highest
	// RSS read from the start to the window, and whether the RSS was
	// steady within the bound.
	SettleSec float64 `json:"settle_s,omitempty"`
	// LiveHeapMB is HeapAlloc read after a collection at the end (the
	// standbymem phase's: its live heap, exact, whatever the collector's
	// timing; the idle process's is Idle.Mem's, read so too).
	LiveHeapMB float64 `json:"live_heap_mb,omitempty"`
	PeakRSSMB  float64 `json:"rss_peak_mb,omitempty"`
	Steady     bool    `json:"steady,omitempty"`
	GOGC       string  `json:"gogc"`
	NumGC      int64   `json:"num_gc"` // collections so far, at the end
	// StoreMB is the worker's in-process lease store's table (bin/
	// memstreamer's stand-in for DynamoDB's: the shipped worker keeps none
	// of it in its process), its live heap right after seeding (memseed):
	// the per-session figures above idle are taken without it; the bare
	// client's is 0.
	StoreMB    float64     `json:"store_mb,omitempty"`
	FeedCPUPct float64     `json:"feed_cpu_pct"`
	MachineCPU float64     `json:"machine_cpu_pct"`
	LoadStart  LoadAvg     `json:"load_start"`
	LoadEnd    LoadAvg     `json:"load_end"`
	Idle       IdleFigures `json:"idle"`
	// HeapFile is the bare client's heap profile, saved after the window as
	// the worker's is (the worker's, in its run's Profiles, is diffed
	// against it); HeapError says why there is none.
	HeapFile  string `json:"heap_file,omitempty"`
	HeapError string `json:"heap_profile_error,omitempty"`

	// Derived (derive).
	CPUPer1k   float64 `json:"cpu_pct_per_1000_msg_s"`
	MsgPerCore float64 `json:"msg_per_s_per_core"`
	// RSSPerSessKB is the mean RSS ÷ held; the others are above Idle,
	// without StoreMB.
	RSSPerSessKB      float64 `json:"rss_kib_per_session"`
	RSSAboveIdleKB    float64 `json:"rss_kib_per_session_above_idle"`
	HeapPerSessKB     float64 `json:"heap_kib_per_session_above_idle"`
	StackPerSessKB    float64 `json:"stack_kib_per_session_above_idle"`
	GoroutinesPerSess float64 `json:"goroutines_per_session_above_idle"`
	Error             string  `json:"error,omitempty"`
}

// derive computes the per-session figures from the raw ones.
func (f *ClientFigures) derive() {
	f.CPUPer1k, f.MsgPerCore = 0, 0
	if f.MsgRate > 0 && f.CPUPct > 0 {
		f.CPUPer1k = f.CPUPct / (f.MsgRate / 1000)
		f.MsgPerCore = f.MsgRate / (f.CPUPct / 100)
	}
	f.RSSPerSessKB, f.RSSAboveIdleKB, f.HeapPerSessKB, f.StackPerSessKB, f.GoroutinesPerSess = 0, 0, 0, 0, 0
	if f.Held <= 0 {
		return
	}
	n := float64(f.Held)
	f.RSSPerSessKB = f.RSSMeanMB * 1024 / n
	f.RSSAboveIdleKB = (f.RSSMeanMB - f.Idle.RSSMB - f.StoreMB) * 1024 / n
	f.HeapPerSessKB = (f.HeapInuseMB - f.Idle.HeapInuseMB - f.StoreMB) * 1024 / n
	f.StackPerSessKB = (f.StackInuseMB - f.Idle.StackInuseMB) * 1024 / n
	f.GoroutinesPerSess = float64(f.Goroutines-f.Idle.Goroutines) / n
}

// Delta is the worker's figures against the bare client's (a difference
// or a ratio, figure by figure).
type Delta struct {
	RSSKB             float64 `json:"rss_kib_per_session"`
	RSSAboveIdleKB    float64 `json:"rss_kib_per_session_above_idle"`
	HeapKB            float64 `json:"heap_kib_per_session_above_idle"`
	StackKB           float64 `json:"stack_kib_per_session_above_idle"`
	GoroutinesPerSess float64 `json:"goroutines_per_session_above_idle"`
	CPUPer1k          float64 `json:"cpu_pct_per_1000_msg_s"`
	MsgPerCore        float64 `json:"msg_per_s_per_core"`
}

// CapCompare is one side-by-side run: one size on one transport.
type CapCompare struct {
	Sessions     int           `json:"sessions"`
	Rate         float64       `json:"rate"` // MaxFeedRate: as fast as the feed pushes
	PayloadBytes int           `json:"payload_bytes,omitempty"`
	MessageBytes int           `json:"message_bytes"`
	Transport    string        `json:"transport"`
	Worker       ClientFigures `json:"worker"`
	Bare         ClientFigures `json:"bare"`
	// Diff = worker − bare; Ratio = worker ÷ bare (0 where the bare
	// client's figure is not positive).
	Diff  Delta `json:"worker_minus_bare"`
	Ratio Delta `json:"worker_over_bare"`
}

// NewCapCompare sets the worker's figures beside the bare client's (both
// derived here).
func NewCapCompare(c CapRun, transport string, w, b ClientFigures) CapCompare {
	w.derive()
	b.derive()
	x := CapCompare{Sessions: c.Sessions, Rate: c.Rate, PayloadBytes: c.PayloadBytes, MessageBytes: FeedMessageBytes(c.PayloadBytes, 5), Transport: transport, Worker: w, Bare: b}
	x.Diff = deltaOf(w, b, func(a, b float64) float64 { return a - b })
	x.Ratio = deltaOf(w, b, ratio)
	return x
}

// deltaOf is op(the worker's figure, the bare client's), figure by figure.
func deltaOf(w, b ClientFigures, op func(a, b float64) float64) Delta {
	return Delta{
		RSSKB: op(w.RSSPerSessKB, b.RSSPerSessKB), RSSAboveIdleKB: op(w.RSSAboveIdleKB, b.RSSAboveIdleKB), HeapKB: op(w.HeapPerSessKB, b.HeapPerSessKB),
		StackKB: op(w.StackPerSessKB, b.StackPerSessKB), GoroutinesPerSess: op(w.GoroutinesPerSess, b.GoroutinesPerSess),
		CPUPer1k: op(w.CPUPer1k, b.CPUPer1k), MsgPerCore: op(w.MsgPerCore, b.MsgPerCore),
	}
}

// ratio is a ÷ b, 0 (undefined) unless both are meaningful: b > 0 and
// a ≥ 0 (a figure above an idle process can come out negative in noise).
func ratio(a, b float64) float64 {
	if b <= 0 || a < 0 {
		return 0
	}
	return a / b
}

// Label names the side-by-side run's size.
func (x CapCompare) Label() string {
	return CapRun{Sessions: x.Sessions, Rate: x.Rate, PayloadBytes: x.PayloadBytes}.Label()
}

// paced: a run at a set rate (not as fast as the feed pushes).
func (x CapCompare) paced() bool { return x.Rate < MaxFeedRate }

// workerFigures are the worker's side of a side-by-side run.
func workerFigures(res CapRunResult, w windowResult, mem map[string]float64, idle IdleFigures) ClientFigures {
	return ClientFigures{Redials: w.s1.Messages["reconnects"],
		Held: res.Held, RampSec: res.RampSec, WindowSec: res.WindowSec, MsgRate: res.MsgRate, CPUPct: res.CPUPct, RSSMeanMB: res.RSSMeanMB,
		HeapInuseMB: mem["HeapInuse"] / (1 << 20), StackInuseMB: mem["Stack"] / (1 << 20), NumGC: int64(mem["NumGC"]), Goroutines: res.Goroutines, Reconnects: res.Reconnects,
		GOGC: gogcValue(res.Env), FeedCPUPct: w.feedCPU, MachineCPU: w.machineCPU, LoadStart: res.LoadStart, LoadEnd: res.LoadEnd, Idle: idle,
	}
}

// gogcValue is the GOGC a run's worker has (and its bare client is given).
func gogcValue(env map[string]string) string {
	if v, ok := env["GOGC"]; ok {
		return v
	}
	return itoa(envconfig.DefaultGCPercent)
}

// bareStats is bin/bareclient's /stats document (the fields the bench
// reads).
type bareStats struct {
	Connections int            `json:"connections"`
	Dialled     int            `json:"dialled"`
	Messages    int64          `json:"messages"`
	Reconnects  int64          `json:"reconnects"`
	DialErrors  int64          `json:"dial_errors"`
	Goroutines  int            `json:"goroutines"`
	Errors      map[string]int `json:"errors"`
}

func getBareStats(ctx context.Context, admin string) (bareStats, error) {
	return getJSON[bareStats](ctx, "http://"+admin+"/stats", 1<<20)
}

// startBare starts bin/bareclient with n connections on e's feed and waits
// for its /healthz.
func (r *runner) startBare(ctx context.Context, e *capEnv, name string, n int, gogc string) (*proc.Proc, string, error) {
	port, err := enginetest.FreePort()
	if err != nil {
		return nil, "", err
	}
	admin := "127.0.0.1:" + itoa(port)
	argv := []string{r.cfg.Bin.BareClient, "-n", itoa(n), "-prefix", "cap-", "-admin", admin, "-dial-rate", "2000", "-dials-in-flight", "32"}
	if n > 0 {
		argv = append(argv, "-urls", strings.Join(e.feedURLs(), ","))
	}
	if e.caFile != "" {
		argv = append(argv, "-ca", e.caFile)
	}
	p := &proc.Proc{Name: name, Argv: argv, Env: append(cleanEnv(), "GOGC="+gogc), Dir: r.cfg.Root, LogPath: filepath.Join(e.dir, name+".log")}
	if err := p.Start(); err != nil {
		return nil, "", err
	}
	if err := p.WaitReady(ctx, 30*time.Second, proc.HTTPOK("http://"+admin+"/healthz")); err != nil {
		_ = p.Stop(5 * time.Second)
		return nil, "", err
	}
	return p, admin, nil
}

// bareRun runs the bare client on e's feed (the worker stopped) as the
// worker's run was measured: settle, then a window of window.
func (r *runner) bareRun(ctx context.Context, e *capEnv, name string, c CapRun, idle IdleFigures, settle, window time.Duration) (ClientFigures, error) {
	f := ClientFigures{GOGC: gogcValue(c.Env), Idle: idle, LoadStart: ReadLoad()}
	start := time.Now()
	p, admin, err := r.startBare(ctx, e, name+"-bare", c.Sessions, f.GOGC)
	if err != nil {
		return f, err
	}
	defer func() {
		if err := p.Stop(30 * time.Second); err != nil {
			r.log.Warn().Err(err).Str("run", name).Msg("bare client stop")
		}
	}()
	r.log.Info().Str("run", name).Int("connections", c.Sessions).Msg("bare client: ramping up")
	if err := waitBare(ctx, p, admin, c.Sessions, waitRate(c.Rate), 4*time.Minute); err != nil {
		return f, err
	}
	f.RampSec = time.Since(start).Seconds()
	if e.steadyMax > 0 {
		f.SettleSec, f.PeakRSSMB, f.Steady, err = settleRSS(ctx, p.Pid(), settle, e.steadyMax, 0)
	} else {
		err = sleepCtx(ctx, settle)
	}
	if err != nil {
		return f, err
	}
	s0, err := getBareStats(ctx, admin)
	if err != nil {
		return f, err
	}
	w, err := sampleWindow(ctx, p.Pid(), e.feed.Pid(), 0, window)
	if err != nil {
		return f, err
	}
	s1, err := getBareStats(ctx, admin)
	if err != nil {
		return f, err
	}
	mem, err := sampleMemStats(ctx, admin, memSamples, memSampleEvery, false)
	if err != nil {
		return f, err
	}
	f.Held, f.WindowSec, f.CPUPct, f.RSSMeanMB = s1.Connections, w.seconds, w.workCPU, w.rssMean/(1<<20)
	f.MsgRate = float64(s1.Messages-s0.Messages) / w.seconds
	f.HeapInuseMB, f.StackInuseMB, f.NumGC, f.Mem = mem["HeapInuse"]/(1<<20), mem["Stack"]/(1<<20), int64(mem["NumGC"]), mem
	f.Goroutines, f.Reconnects, f.Redials, f.DialErrors = s1.Goroutines, s1.Reconnects-s0.Reconnects, s1.Reconnects, s1.DialErrors
	f.FeedCPUPct, f.MachineCPU, f.LoadEnd = w.feedCPU, w.machineCPU, ReadLoad()
	// Last: its collections come after every figure above.
	if e.steadyMax > 0 {
		if f.LiveHeapMB, err = liveHeapMB(ctx, admin); err != nil {
			return f, err
		}
	}
	f.HeapFile = filepath.Join(e.dir, name+"-bare-heap.pb.gz")
	if err := fetchHeapProfile(ctx, admin, f.HeapFile); err != nil {
		f.HeapFile, f.HeapError = "", err.Error()
	}
	return f, nil
}

// waitBare waits until the bare client holds want connections and reads
// at least 90 % of the messages they should bring, for two polls in a row.
func waitBare(ctx context.Context, p *proc.Proc, admin string, want int, rate float64, timeout time.Duration) error {
	return waitStreaming(ctx, p, "bare client", "connections", want, rate, timeout, func(ctx context.Context) (int, int64, string, error) {
		st, err := getBareStats(ctx, admin)
		return st.Connections, st.Messages, fmt.Sprintf(" (%d dial errors; %v)", st.DialErrors, st.Errors), err
	})
}

// idleProcs measures the idle processes the per-session figures are taken
// above: the worker (memory store, no session) and, when bare, the bare
// client (no connection), on each transport the runs use. An idle process
// runs 3 s; its RSS is the mean of 3 reads a second apart, its heap and
// stacks are read after a collection (the live fixed cost).
func (r *runner) idleProcs(ctx context.Context, bare bool) ([]IdleFigures, error) {
	var trs []string
	for _, c := range r.sz.CapRuns {
		for _, tr := range r.capTransports(c) {
			if !slices.Contains(trs, tr) {
				trs = append(trs, tr)
			}
		}
	}
	var out []IdleFigures
	for _, tr := range trs {
		kinds := []string{KindWorker}
		if bare {
			kinds = append(kinds, KindBare)
		}
		for _, kind := range kinds {
			f, err := r.idleProc(ctx, kind, tr)
			if err != nil {
				return out, fmt.Errorf("idle %s on %s: %w", kind, tr, err)
			}
			out = append(out, f)
		}
	}
	return out, nil
}

func (r *runner) idleProc(ctx context.Context, kind, tr string) (IdleFigures, error) {
	f := IdleFigures{Kind: kind, Transport: tr}
	e := &capEnv{dir: filepath.Join(r.cfg.WorkDir, "capacity-idle-"+kind+"-"+tr), tls: tr == "wss"}
	if err := freshDir(e.dir); err != nil {
		return f, err
	}
	if e.tls {
		ca, err := tlsca.New(filepath.Join(e.dir, "tls"))
		if err != nil {
			return f, err
		}
		e.caFile = ca.CertFile
	}
	var pid int
	var admin string
	switch kind {
	case KindWorker:
		defer e.stop(func(err error) { r.log.Warn().Err(err).Msg("idle worker: stop") })
		settings := map[string]string{}
		if e.tls {
			settings[schema.EnvExtraCAFile] = e.caFile
		}
		if err := r.startCapWorker(ctx, e, "idle-worker", []string{r.cfg.Bin.MemStreamer, "-sessions", "0"}, settings, nil); err != nil {
			return f, err
		}
		pid, admin = e.work.Pid(), e.admin
	default:
		p, a, err := r.startBare(ctx, e, "idle-bare", 0, gogcValue(nil))
		if err != nil {
			return f, err
		}
		defer func() { _ = p.Stop(10 * time.Second) }()
		pid, admin = p.Pid(), a
	}
	if err := f.readIdle(ctx, pid, admin); err != nil {
		return f, err
	}
	// The worker's /stats and the bare client's name their goroutines alike.
	st, err := getJSON[struct {
		Goroutines int `json:"goroutines"`
	}](ctx, "http://"+admin+"/stats", 1<<20)
	f.Goroutines = st.Goroutines
	return f, err
}

// readIdle reads an idle process's memory 3 s after its start: RSS the
// mean of 3 reads a second apart, heap, stacks and MemStats (from its
// admin endpoint) after a collection.
func (f *IdleFigures) readIdle(ctx context.Context, pid int, admin string) error {
	if err := sleepCtx(ctx, 3*time.Second); err != nil {
		return err
	}
	var sum float64
	for i := range 3 {
		if i > 0 {
			if err := sleepCtx(ctx, time.Second); err != nil {
				return err
			}
		}
		rss, err := ProcRSS(pid)
		if err != nil {
			return err
		}
		sum += float64(rss)
	}
	f.RSSMB = sum / 3 / (1 << 20)
	mem, err := sampleMemStats(ctx, admin, 1, 0, true)
	if err != nil {
		return err
	}
	f.HeapInuseMB, f.StackInuseMB, f.Mem = mem["HeapInuse"]/(1<<20), mem["Stack"]/(1<<20), mem
	return nil
}
