// Phase tls: the claim path over TLS (issue 27 part 4). One worker (the
// capacity runs' bin/memstreamer) claims N sessions at once, as a takeover
// or a hand-off burst does, on ws://, on wss:// with TLS session resumption
// (the default: every dial to the feed but the first resumes from a
// ticket) and on wss:// with full handshakes (WSFLEET_TLS_RESUMPTION=false).
// Measured: the worker's CPU (and the feed's, the server side of the
// handshakes) from the worker's start until every session delivers, per
// session. The runs differ only in the transport, so their differences are
// the handshakes' cost; each also carries the same process start and a
// second or two of streaming.

package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// tlsPhase is the phase (phase.go).
var tlsPhase = phase{name: PhaseTLS, run: (*runner).tlsClaim, render: renderTLSClaim}

// TLSClaimRun is one claim burst.
type TLSClaimRun struct {
	Name       string  `json:"name"`
	Transport  string  `json:"transport"` // ws | wss
	Resumption bool    `json:"tls_resumption"`
	Sessions   int     `json:"sessions"`
	RampSec    float64 `json:"ramp_s"`
	// WorkerCPUms and FeedCPUms are CPU time (user + system) from the
	// worker's start until every session delivers.
	WorkerCPUms float64 `json:"worker_cpu_ms"`
	FeedCPUms   float64 `json:"feed_cpu_ms"`
	// Per session.
	WorkerCPUmsPerSession float64 `json:"worker_cpu_ms_per_session"`
	FeedCPUmsPerSession   float64 `json:"feed_cpu_ms_per_session"`
	Error                 string  `json:"error,omitempty"`
}

// TLSClaimResult is the phase.
type TLSClaimResult struct {
	Phase
	Runs []TLSClaimRun `json:"runs"`
}

// tlsClaimRuns are the bursts, in order.
var tlsClaimRuns = []struct {
	name, transport string
	resume          bool
}{
	{"ws", "ws", false},
	{"wss-resumed", "wss", true},
	{"wss-full", "wss", false},
}

func (r *runner) tlsClaim(ctx context.Context) error {
	n := r.sz.TLSClaimSessions
	res := &TLSClaimResult{}
	res.Phase = r.begin(PhaseTLS, map[string]string{
		"sessions": itoa(n),
		"runs":     "ws://; wss:// resuming TLS sessions (the default); wss:// with full handshakes (" + schema.EnvTLSResumption + "=false)",
		"worker":   "bin/memstreamer claiming every session at once (claims by reconciliation every 1 s at up to 2,000/s), sink stdout → /dev/null; the feed (bin/feed, TLS 1.3, ECDSA P-256 from the run's CA) at 1 msg/s per session",
		"measured": "CPU (user + system, /proc/<pid>/stat) of the worker and of the feed from the worker's start until every session delivers (messages/s ≥ 90 % of sessions × rate over a second), per session",
	})
	r.rep.TLSClaim = res
	defer res.end()
	var errs []string
	for _, c := range tlsClaimRuns {
		run, err := r.tlsClaimRun(ctx, c.name, c.transport, c.resume, n)
		if err != nil {
			run.Error = err.Error()
			errs = append(errs, c.name+": "+err.Error())
		}
		res.Runs = append(res.Runs, run)
		r.log.Info().Str("run", c.name).Float64("worker_cpu_ms_per_session", run.WorkerCPUmsPerSession).
			Float64("feed_cpu_ms_per_session", run.FeedCPUmsPerSession).Float64("ramp_s", run.RampSec).Msg("tls claim run done")
	}
	if len(errs) > 0 {
		return fmt.Errorf("tls claim: %s", strings.Join(errs, "; "))
	}
	return nil
}

func (r *runner) tlsClaimRun(ctx context.Context, name, transport string, resume bool, n int) (TLSClaimRun, error) {
	run := TLSClaimRun{Name: name, Transport: transport, Resumption: resume, Sessions: n}
	e := &capEnv{dir: filepath.Join(r.cfg.WorkDir, "tls-"+name), tls: transport == "wss"}
	if err := freshDir(e.dir); err != nil {
		return run, err
	}
	defer e.stop(func(err error) { r.log.Warn().Err(err).Str("run", name).Msg("stop") })
	const rate = 1.0
	if err := r.startFeed(ctx, e, rate); err != nil {
		return run, err
	}
	feed0, err := ProcCPU(e.feed.Pid())
	if err != nil {
		return run, err
	}
	argv := []string{r.cfg.Bin.MemStreamer, "-sessions", itoa(n), "-urls", strings.Join(e.feedURLs(), ","), "-resume-param", "from", "-prefix", "tls-"}
	settings := map[string]string{schema.EnvMaxSessions: itoa(n), EnvMaxRenews: CapMaxRenews}
	if e.tls {
		settings[schema.EnvExtraCAFile] = e.caFile
		if !resume {
			settings[schema.EnvTLSResumption] = "false"
		}
	}
	start := time.Now()
	if err := r.startCapWorker(ctx, e, "tls-"+name+"-worker", argv, settings, nil); err != nil {
		return run, err
	}
	if err := waitDelivering(ctx, e, n, rate, 3*time.Minute); err != nil {
		return run, err
	}
	run.RampSec = time.Since(start).Seconds()
	wcpu, err := ProcCPU(e.work.Pid())
	if err != nil {
		return run, err
	}
	fcpu, err := ProcCPU(e.feed.Pid())
	if err != nil {
		return run, err
	}
	run.WorkerCPUms = float64(wcpu) / float64(time.Millisecond)
	run.FeedCPUms = float64(fcpu-feed0) / float64(time.Millisecond)
	run.WorkerCPUmsPerSession = run.WorkerCPUms / float64(n)
	run.FeedCPUmsPerSession = run.FeedCPUms / float64(n)
	return run, nil
}

// waitDelivering waits until the worker holds want sessions and delivers
// at least 90 % of want × rate messages over a second (every session has
// dialed and streams).
func waitDelivering(ctx context.Context, e *capEnv, want int, rate float64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var prev workerStats
	var prevAt time.Time
	for {
		if !e.work.Running() {
			return fmt.Errorf("worker exited (see %s)", e.work.LogPath)
		}
		st, err := getStats(ctx, e.admin)
		if err == nil {
			now := time.Now()
			if !prevAt.IsZero() && st.Owned >= want && now.Sub(prevAt) >= time.Second {
				got := float64(st.Messages["messages_in"]-prev.Messages["messages_in"]) / now.Sub(prevAt).Seconds()
				if got >= 0.9*float64(want)*rate {
					return nil
				}
			}
			if prevAt.IsZero() || now.Sub(prevAt) >= time.Second {
				prev, prevAt = st, now
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not every session delivering after %s", timeout)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

func renderTLSClaim(p printer, r *Report) {
	t := r.TLSClaim
	if !heading(p, t, "5c. The claim path over TLS: a burst of claims on ws:// and wss://") {
		return
	}
	p("| run | sessions | until every session delivers | worker CPU | per session | feed CPU (the server side) | per session |\n|---|---|---|---|---|---|---|\n")
	var ws, resumed, full *TLSClaimRun
	for i := range t.Runs {
		x := &t.Runs[i]
		if x.Error != "" {
			p("| %s | %d | failed: %s | | | | |\n", x.Name, x.Sessions, x.Error)
			continue
		}
		p("| %s | %d | %.1f s | %.0f ms | %.2f ms | %.0f ms | %.2f ms |\n", x.Name, x.Sessions, x.RampSec, x.WorkerCPUms, x.WorkerCPUmsPerSession, x.FeedCPUms, x.FeedCPUmsPerSession)
		switch x.Name {
		case "ws":
			ws = x
		case "wss-resumed":
			resumed = x
		case "wss-full":
			full = x
		}
	}
	p("\n")
	if ws != nil && resumed != nil && full != nil {
		p("The TLS handshake costs the worker %.2f ms per session with full handshakes and %.2f ms resumed (above ws://); resumption cuts the worker's share by %.0f %% and the feed's by %.0f %%. The worker resumes by default (`%s`, docs/worker.md).\n\n",
			full.WorkerCPUmsPerSession-ws.WorkerCPUmsPerSession, resumed.WorkerCPUmsPerSession-ws.WorkerCPUmsPerSession,
			pctCut(full.WorkerCPUmsPerSession-ws.WorkerCPUmsPerSession, resumed.WorkerCPUmsPerSession-ws.WorkerCPUmsPerSession),
			pctCut(full.FeedCPUmsPerSession-ws.FeedCPUmsPerSession, resumed.FeedCPUmsPerSession-ws.FeedCPUmsPerSession), schema.EnvTLSResumption)
	}
}

// pctCut is how much smaller b is than a, in %.
func pctCut(a, b float64) float64 {
	if a <= 0 {
		return 0
	}
	return 100 * (a - b) / a
}
