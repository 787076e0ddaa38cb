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
	// Per session that ran: a session that never delivered (the table
	// did not let it be claimed in time) cost little.
	ran := big.Sessions - big.Silent
	if ran <= 0 {
		return ""
	}
	perMiB := (big.HeapPeak + big.StackPeak) / float64(ran)
	needGiB := perMiB * goalSessions / 1024
	cpuPerHour := big.CPUPerHour / float64(ran) * goalSessions
	fits := "does not fit"
	if r.MemoryMiB > 0 && needGiB*1024 <= r.MemoryMiB {
		fits = "fits"
	}
	p("**What %d × %d needs.** The largest run here (%s, %d × %d at %g msg/s, %d of them delivering) cost %.1f KiB\n", goalWorkers, goalSessions, big.Scenario, big.Workers, big.Sessions, big.Rate, ran, perMiB*1024)
	p("per delivering session (%.1f KiB per session started; peak heap in use + peak goroutine stacks, the heap figure\n", (big.HeapPeak+big.StackPeak)/float64(big.Sessions)*1024)
	p("including garbage not yet collected)\n")
	p("and %.4f CPU seconds per delivering session per simulated hour. At %d sessions that is ~%.0f GiB against this machine's %.0f GiB: it\n", big.CPUPerHour/float64(ran), goalSessions, needGiB, r.MemoryMiB/1024)
	p("**%s**; and ~%.0f CPU hours per simulated hour. ", fits, cpuPerHour/3600)
	if !r.Light {
		p("Every simulated session is a real worker session (its\n")
		p("goroutine, its websocket client, its lease) and a test-feed connection (two goroutines, an HTTP server\n")
		p("connection's buffers) over an in-memory pipe (`FEED=true`)")
	} else {
		p("Every simulated session is a real worker session (its\n")
		p("goroutine, its lease, its sink state and timers) above the light source's connection (no socket, no\n")
		p("WebSocket client, no source goroutine)")
	}
	p("; see scripts/fleetsim/doc.go for where the memory goes.\n")
	if by := costBySize(r.Runs); by != "" {
		p("\nBy size (each size's run with the most sessions delivering; memory and CPU per delivering session):\n%s.\n", by)
	}
	return b.String()
}

// costBySize is each size's cost per delivering session (its run with the
// most), when the runs are of more than one size (Measured.Size); "" when
// of one.
func costBySize(runs []Measured) string {
	best := map[Size]Measured{}
	var order []Size
	for _, m := range runs {
		ran := m.Sessions - m.Silent
		if m.Size == (Size{}) || ran <= 0 {
			continue
		}
		b, ok := best[m.Size]
		if !ok {
			order = append(order, m.Size)
		}
		if !ok || ran > b.Sessions-b.Silent {
			best[m.Size] = m
		}
	}
	if len(order) < 2 {
		return ""
	}
	var parts []string
	for _, sz := range order {
		m := best[sz]
		ran := float64(m.Sessions - m.Silent)
		parts = append(parts, fmt.Sprintf("%d × %d (%s): %.1f KiB, %.4f CPU s per simulated hour", sz.Workers, sz.Sessions, m.Scenario, (m.HeapPeak+m.StackPeak)/ran*1024, m.CPUPerHour/ran))
	}
	return strings.Join(parts, "; ")
}
