// A measured run's processes, shared by the capacity, standbymem, tls,
// dynalite, throughput and bill phases: bin/feed and a worker each in its
// own process (capEnv), the waits until a client streams, the settle, and
// the window that measures a process (CPU, RSS, MemStats).

package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/proc"
	"github.com/wsfleet/wsfleet/testkit/tlsca"
)

// MemStats sampling after a window: memSamples reads memSampleEvery apart,
// averaged (heap in use moves with the GC cycle).
const (
	memSamples     = 5
	memSampleEvery = time.Second
)

// steadyReads and steadyBand are settleRSS's rule: the RSS is steady once
// the last steadyReads reads (a second apart) lie within steadyBand of
// each other (the highest ≤ (1 + steadyBand) × the lowest): neither the
// placement wave's rise nor the return after it.
const (
	steadyReads = 10
	steadyBand  = 0.02
)

// feedAddrs are the loopback addresses the capacity feed listens on (the
// worker's connections are spread over them: no address pair comes near
// the ephemeral-port range).
var feedAddrs = []string{"127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"}

// capEnv is a capacity run's processes and folder.
type capEnv struct {
	dir   string
	port  int
	feed  *proc.Proc // stdout discarded
	work  *proc.Proc // stdout (its sink) discarded
	admin string
	// tls: the feed serves wss:// with a CA made in dir/tls (caFile its
	// certificate, ca the CA); payload pads its messages.
	tls     bool
	payload int
	ca      *tlsca.CA
	caFile  string
	// onStdout, when set, sees every line of the worker's stdout (its
	// stdout sink) instead of /dev/null.
	onStdout func(line []byte)
	// urls, when set, are the sessions' URL patterns on a feed this env
	// did not start (the standbymem phase's lease stack's).
	urls []string
	// steadyMax, when > 0, makes the bare client's settle last until its
	// RSS is steady, at most steadyMax (settleRSS; the standbymem
	// phase's: the holder settles so).
	steadyMax time.Duration
}

func (e *capEnv) stop(log func(error)) {
	if e.work != nil {
		if err := e.work.Stop(60 * time.Second); err != nil {
			log(err)
		}
	}
	if e.feed != nil {
		if err := e.feed.Stop(10 * time.Second); err != nil {
			log(err)
		}
	}
}

// startFeed starts bin/feed on feedAddrs at rate (a few ports are tried: a
// free port on 127.0.0.1 may be taken on another address). It runs in its
// own process: the worker's and the feed's sockets each count against their
// own process's open-file limit.
func (r *runner) startFeed(ctx context.Context, e *capEnv, rate float64) error {
	var last error
	var tlsArgs []string
	probe := func(port int) func(context.Context) error {
		return proc.HTTPOK("http://127.0.0.1:" + itoa(port) + "/healthz")
	}
	if e.tls {
		// The driver makes the CA; the feed loads it (LoadOrNew) from the
		// same folder.
		dir := filepath.Join(e.dir, "tls")
		ca, err := tlsca.New(dir)
		if err == nil {
			err = ca.WriteServer(dir)
		}
		if err != nil {
			return err
		}
		e.ca, e.caFile, tlsArgs = ca, ca.CertFile, []string{"-tls-dir", dir}
		probe = func(port int) func(context.Context) error {
			return httpsOK("https://127.0.0.1:"+itoa(port)+"/healthz", ca.ClientTLS())
		}
	}
	for range 3 {
		port, err := enginetest.FreePort()
		if err != nil {
			return err
		}
		argv := []string{r.cfg.Bin.Feed, "-addr", strings.Join(feedAddrs, ","), "-port", itoa(port), "-rate", strconv.FormatFloat(rate, 'f', -1, 64)}
		if e.payload > 0 {
			argv = append(argv, "-payload-bytes", itoa(e.payload))
		}
		argv = append(argv, tlsArgs...)
		f := &proc.Proc{Name: "feed", Argv: argv, Env: cleanEnv(), Dir: r.cfg.Root, LogPath: filepath.Join(e.dir, "feed.log"), DiscardStdout: true}
		if err := f.Start(); err != nil {
			return err
		}
		if last = f.WaitReady(ctx, 10*time.Second, probe(port)); last == nil {
			e.feed, e.port = f, port
			return nil
		}
		_ = f.Stop(time.Second)
	}
	return last
}

// feedURLs are the sessions' URL patterns over feedAddrs ({id} = connection id).
func (e *capEnv) feedURLs() []string {
	if len(e.urls) > 0 {
		return e.urls
	}
	scheme := "ws"
	if e.tls {
		scheme = "wss"
	}
	var out []string
	for _, a := range feedAddrs {
		out = append(out, scheme+"://"+a+":"+itoa(e.port)+"/feed/{id}")
	}
	return out
}

// httpsOK is a WaitReady probe: a GET of url over TLS with cfg that
// answers 2xx.
func httpsOK(url string, cfg *tls.Config) func(context.Context) error {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	return proc.HTTPOKWith(c, url)
}

// startCapWorker starts a capacity worker (argv: the binary and its flags;
// stdout to /dev/null) and waits for /healthz.
func (r *runner) startCapWorker(ctx context.Context, e *capEnv, id string, argv []string, settings map[string]string, extraEnv []string) error {
	port, err := enginetest.FreePort()
	if err != nil {
		return err
	}
	e.admin = "127.0.0.1:" + itoa(port)
	set := map[string]string{
		schema.EnvSink:            "stdout",
		schema.EnvLogLevel:        "info",
		schema.EnvClaimsPerSecond: "2000",
		schema.EnvReconcileEvery:  "1s", // claims 19,000 sessions fast
		// The audit at the default reconcile's cadence, as a worker with
		// the defaults runs it: not a full by_owner listing every second.
		schema.EnvAuditEvery:    "5s",
		"WSFLEET_METRICS_EVERY": "1m",
		// Every session dials the one feed host: its per-host cap at the
		// worker's bound keeps the claim wave dialled 32 at once, as the
		// bare client and the runs before issue 35 dialled.
		schema.EnvHandshakesPerHost: "32",
	}
	for k, v := range settings {
		set[k] = v
	}
	env := append(workerEnv(id, e.admin, set), extraEnv...)
	// Stdout to /dev/null: a sink at tens of thousands of messages per
	// second then costs only its write syscalls, not a pipe reader or a file.
	e.work = &proc.Proc{Name: id, Argv: argv, Env: env, Dir: r.cfg.Root, LogPath: filepath.Join(e.dir, id+".log"), DiscardStdout: e.onStdout == nil, OnLine: e.onStdout}
	if err := e.work.Start(); err != nil {
		return err
	}
	return e.work.WaitReady(ctx, 30*time.Second, proc.HTTPOK("http://"+e.admin+"/healthz"))
}

// waitHeld waits until the worker owns want sessions and counts at least
// 90 % of the messages they should bring, for two polls in a row.
func waitHeld(ctx context.Context, e *capEnv, want int, rate float64, timeout time.Duration) error {
	return waitStreaming(ctx, e.work, "worker", "sessions", want, rate, timeout, func(ctx context.Context) (int, int64, string, error) {
		st, err := getStats(ctx, e.admin)
		return st.Owned, st.Messages["messages_in"], "", err
	})
}

// waitStreaming polls process p every second (read: what it holds, the
// messages it counted so far, a note for a timeout) until it holds want
// and counts at least 90 % of the messages they should bring (rate each),
// for two polls in a row; what and unit name p and what it holds.
func waitStreaming(ctx context.Context, p *proc.Proc, what, unit string, want int, rate float64, timeout time.Duration, read func(context.Context) (held int, msgs int64, note string, err error)) error {
	deadline := time.Now().Add(timeout)
	var prev int64
	var prevAt time.Time
	good := 0
	for {
		if !p.Running() {
			return fmt.Errorf("%s exited (see %s)", what, p.LogPath)
		}
		held, msgs, note, err := read(ctx)
		if err != nil {
			return err
		}
		now := time.Now()
		if !prevAt.IsZero() && held >= want {
			got := float64(msgs-prev) / now.Sub(prevAt).Seconds()
			if got >= 0.9*float64(want)*rate {
				good++
			} else {
				good = 0
			}
		}
		if good >= 2 {
			return nil
		}
		if now.After(deadline) {
			return fmt.Errorf("%s holds %d of %d %s after %s%s", what, held, want, unit, timeout, note)
		}
		prev, prevAt = msgs, now
		if err := sleepCtx(ctx, time.Second); err != nil {
			return err
		}
	}
}

// window measures the worker (and the other processes) for d.
type windowResult struct {
	seconds          float64
	workCPU, feedCPU float64
	otherCPU         float64
	machineCPU       float64 // all processes, % of one core
	rssMean, rssMax  float64 // bytes
	s0, s1           workerStats
}

func measureWindow(ctx context.Context, e *capEnv, other int, d time.Duration) (windowResult, error) {
	s0, err := getStats(ctx, e.admin)
	if err != nil {
		return windowResult{}, err
	}
	w, err := sampleWindow(ctx, e.work.Pid(), e.feed.Pid(), other, d)
	if err != nil {
		return w, err
	}
	s1, err := getStats(ctx, e.admin)
	if err != nil {
		return w, err
	}
	w.s0, w.s1 = s0, s1
	return w, nil
}

// sampleWindow measures process pid for d: its CPU, the feed's (feedPid),
// another process's (other; 0: none) and the machine's, and pid's RSS
// every second. The stats (s0, s1) are the caller's.
func sampleWindow(ctx context.Context, pid, feedPid, other int, d time.Duration) (windowResult, error) {
	var w windowResult
	t0 := time.Now()
	wc, fc, oc, mc := startCPU(pid), startCPU(feedPid), startCPU(other), startMachine()
	var sum float64
	n := 0
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for time.Since(t0) < d {
		select {
		case <-ctx.Done():
			return w, ctx.Err()
		case <-tick.C:
		}
		if rss, err := ProcRSS(pid); err == nil {
			sum += float64(rss)
			n++
			w.rssMax = math.Max(w.rssMax, float64(rss))
		}
	}
	w.workCPU, w.feedCPU, w.otherCPU, w.machineCPU = wc.percent(), fc.percent(), oc.percent(), mc.percent()
	w.seconds = time.Since(t0).Seconds()
	if n > 0 {
		w.rssMean = sum / float64(n)
	}
	return w, nil
}

// waitRate is the rate per session a run waits for before it settles: its
// own, or for a run as fast as the feed pushes, 1,000 msg/s (messages
// flowing).
func waitRate(rate float64) float64 {
	if rate >= MaxFeedRate {
		return 1000
	}
	return rate
}

// sampleMemStats reads the MemStats lines of admin's /debug/pprof/heap
// n times every apart and returns each one's mean (gc: a collection
// first, for an idle process's live figures).
func sampleMemStats(ctx context.Context, admin string, n int, every time.Duration, gc bool) (map[string]float64, error) {
	url := "http://" + admin + "/debug/pprof/heap?debug=1"
	if gc {
		url += "&gc=1"
	}
	sum := map[string]float64{}
	for i := range n {
		if i > 0 {
			if err := sleepCtx(ctx, every); err != nil {
				return nil, err
			}
		}
		b, err := httpGet(ctx, url, 64<<20)
		if err != nil {
			return nil, err
		}
		for k, v := range parseMemStats(b) {
			sum[k] += float64(v)
		}
	}
	for k := range sum {
		sum[k] /= float64(n)
	}
	return sum, nil
}

// settleRSS waits at least minWait and then until pid's RSS is steady
// (steadyReads, steadyBand), at most maxWait: after a wave of dials the
// runtime returns the heap the wave left over tens of seconds, and a
// window read meanwhile measures that return, not what the connections
// hold. It returns the wait, the highest RSS read (MiB; peak0, bytes,
// read before, counts) and whether the RSS was steady.
func settleRSS(ctx context.Context, pid int, minWait, maxWait time.Duration, peak0 int64) (sec, peakMB float64, steady bool, err error) {
	start := time.Now()
	peak := peak0
	var reads []float64
	for {
		rss, err := ProcRSS(pid)
		if err != nil {
			return 0, 0, false, err
		}
		peak = max(peak, rss)
		reads = append(reads, float64(rss))
		el := time.Since(start)
		steady = rssSteady(reads)
		if el >= minWait && (steady || el >= maxWait) {
			return el.Seconds(), float64(peak) / (1 << 20), steady, nil
		}
		if err := sleepCtx(ctx, time.Second); err != nil {
			return 0, 0, false, err
		}
	}
}

// rssSteady reports whether reads (oldest first, a second apart) are
// steady: the last steadyReads within steadyBand of each other.
func rssSteady(reads []float64) bool {
	n := len(reads)
	if n < steadyReads {
		return false
	}
	last := reads[n-steadyReads:]
	return slices.Max(last) <= (1+steadyBand)*slices.Min(last)
}

// liveHeapMB is a process's HeapAlloc (MiB) read after a collection.
func liveHeapMB(ctx context.Context, admin string) (float64, error) {
	mem, err := sampleMemStats(ctx, admin, 1, 0, true)
	return mem["HeapAlloc"] / (1 << 20), err
}
