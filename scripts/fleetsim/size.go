//go:build fleetsim

package fleetsim

import (
	"fmt"
	"strings"
)

// sizeMarkdown is what issue 36's largest size (1,000 workers × 1,000,000
// sessions) would need, from the report's largest run: its memory (heap
// in use + goroutine stacks, both at their peak) and CPU per session,
// times a million, against this machine.
func (r Report) sizeMarkdown() string {
	var big *Measured
	for i := range r.Runs {
		if m := &r.Runs[i]; m.Sessions > 0 && (big == nil || m.Sessions > big.Sessions) {
			big = m
		}
	}
	if big == nil {
		return ""
	}
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	perMiB := (big.HeapPeak + big.StackPeak) / float64(big.Sessions)
	needGiB := perMiB * goalSessions / 1024
	cpuPerHour := big.CPUPerHour / float64(big.Sessions) * goalSessions
	fits := "does not fit"
	if r.MemoryMiB > 0 && needGiB*1024 <= r.MemoryMiB {
		fits = "fits"
	}
	p("**What %d × %d needs.** The largest run here (%s, %d × %d at %g msg/s) cost %.1f KiB per session\n", goalWorkers, goalSessions, big.Scenario, big.Workers, big.Sessions, big.Rate, perMiB*1024)
	p("(peak heap in use + peak goroutine stacks; the heap figure includes garbage not yet collected) and %.1f CPU\n", big.CPUPerHour/float64(big.Sessions))
	p("seconds per session per simulated hour. At %d sessions that is ~%.0f GiB against this machine's %.0f GiB: it\n", goalSessions, needGiB, r.MemoryMiB/1024)
	p("**%s**; and ~%.0f CPU hours per simulated hour. Every simulated session is a real worker session (its\n", fits, cpuPerHour/3600)
	p("goroutine, its websocket client, its lease) and a test-feed connection (two goroutines, an HTTP server\n")
	p("connection's buffers) over an in-memory pipe; see scripts/fleetsim/doc.go for where the memory goes and what a\n")
	p("lighter session would take.\n")
	return b.String()
}
