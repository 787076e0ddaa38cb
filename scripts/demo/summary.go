package demo

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/wsfleet/wsfleet/scripts/evidence"
)

func ms(v float64) string {
	return (time.Duration(v) * time.Millisecond).String()
}

// PrintSummary writes the human summary of a Result.
func PrintSummary(w io.Writer, r Result) {
	s := r.Settings
	rep := r.Report
	fmt.Fprintf(w, "\n=== wsfleet demo summary ===\n")
	fmt.Fprintf(w, "settings: %d sessions, %d workers (+1 added), feed %.0f msg/s per session (%s),\n", s.Sessions, s.Workers, s.FeedRate, s.FeedMode)
	fmt.Fprintf(w, "          lease TTL %v, renew/checkpoint every %v, reconcile every %v, max skew %v, safety margin %v\n",
		s.LeaseTTL, s.RenewEvery, s.ReconcileEvery, s.MaxSkew, s.SafetyMargin)
	fmt.Fprintf(w, "evidence: the feed's connection records (%d distinct seqs written) and the sinks' records (%d lines)\n\n", rep.SentSeqs, rep.Raw)
	fmt.Fprintf(w, "claim (POST → first message at a sink): p50 %s, max %s over %d sessions\n\n", ms(r.Claim.P50), ms(r.Claim.Max), r.Claim.N)

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "fault\tworker\tsessions\trecovered\trecovery p50\trecovery max\tdark max\treplayed")
	for _, f := range rep.Faults {
		label := map[string]string{evidence.FaultKill: "kill -9", evidence.FaultTerm: "SIGTERM", evidence.FaultStop: "SIGSTOP"}[f.Kind]
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d/%d\t%s\t%s\t%s\t%d\n", label, f.Worker, f.Affected, f.Recovered, f.Affected,
			ms(f.Recovery.P50), ms(f.Recovery.Max), ms(f.Dark.Max), f.Replayed)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "(recovery: fault → first message from another worker; dark: last message before → first after)\n")
	fmt.Fprintf(w, "new worker: delivered for %d session(s)\n", r.AddedTook)
	fmt.Fprintf(w, "stops: %d sessions, source connection closed p50 %s, max %s after the API answered; reconnected: %d\n\n",
		rep.Stops.Sessions, ms(rep.Stops.Closed.P50), ms(rep.Stops.Closed.Max), len(rep.Stops.Reopened))

	check := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "VIOLATION"
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "messages lost\t%d\t(must be 0)\t%s\n", rep.Lost, check(rep.Lost == 0))
	fmt.Fprintf(tw, "seqs skipped (never asked of the source)\t%d\t(must be 0)\t%s\n", rep.Gaps, check(rep.Gaps == 0))
	fmt.Fprintf(tw, "replayed after the crash\t%d\t(max %d per session; bound %d = rate × (checkpoint interval × 1.1 + 1 s) + 1)\t%s\n",
		rep.ReplayCrash, rep.ReplayCrashMax, rep.ReplayBound, check(rep.ReplayCrashMax <= rep.ReplayBound))
	fmt.Fprintf(tw, "replayed after the graceful handoff\t%d\t(must be 0)\t%s\n", rep.ReplayHandoff, check(rep.ReplayHandoff == 0))
	fmt.Fprintf(tw, "replayed otherwise (same owner reconnecting)\t%d\t\t\n", rep.ReplayOther)
	fmt.Fprintf(tw, "max connections per session at the feed\t%d\t(must be 1)\t%s\n", rep.MaxConcurrent, check(rep.MaxConcurrent <= 1))
	fmt.Fprintf(tw, "deliveries under a stale epoch\t%d\t(must be 0)\t%s\n", rep.Stale, check(rep.Stale == 0))
	fmt.Fprintf(tw, "leases held after graceful shutdown\t%d\t(must be 0)\t%s\n", len(r.LeasesHeld), check(len(r.LeasesHeld) == 0))
	fmt.Fprintf(tw, "final checkpoints behind the sink\t%d\t(must be 0)\t%s\n", len(r.Behind), check(len(r.Behind) == 0))
	fmt.Fprintf(tw, "in flight at the end (not lost)\t%d\t(sent while the last owner closed; resumed from the checkpoint on the next start)\t\n", rep.Tail)
	_ = tw.Flush()
	fmt.Fprintf(w, "\nduration %v\n", r.Duration.Round(100*time.Millisecond))
	if len(r.Violations) == 0 {
		fmt.Fprintf(w, "RESULT: PASS (0 violations)\n")
		return
	}
	fmt.Fprintf(w, "RESULT: FAIL (%d violation(s))\n", len(r.Violations))
	for _, v := range r.Violations {
		fmt.Fprintf(w, "  - %s\n", v)
	}
}
