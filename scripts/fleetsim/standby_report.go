//go:build fleetsim

package fleetsim

import (
	"fmt"
	"strings"
)

// standbyMarkdown is docs/SCALE.md's section on the standby runs
// (standby.go), empty when the report has none.
func standbyMarkdown(runs []Measured) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	for _, m := range runs {
		if m.Standby == nil {
			continue
		}
		if b.Len() == 0 {
			p("## Hot standby (issue 39)\n\n")
			p("`standby-crash`: `crash` on sources that cannot replay (the feed's seq in the data, no resume parameter:\n")
			p("a reconnect starts at the live edge), half the sessions with `\"standby\":{\"enabled\":true}`. The standby\n")
			p("protocol runs between the workers' admin servers over the mesh, the feed admits a standby's connection\n")
			p("beside the owner's (by the tenure header). Declared dead → first message: from the start of the first\n")
			p("`DeclareDead` of the killed worker's record that succeeded (when the watcher stamped its `ended_at_ms`, the\n")
			p("benchmark's anchor) to each of its sessions' first delivery by another worker, in virtual time (no clock\n")
			p("skew): the takeover on DynamoDB's latency distribution\n")
			p("(`simddb.AWS()`), with no engine's request queue in it. The control's loss is what its source sent while\n")
			p("nobody was connected (not counted as lost above); the standby sessions' is. Promotions: every claim that\n")
			p("adopted a standby's connection (hand-offs to the standby's worker included).\n\n")
			p("| scenario | standby sessions | lost | promotions | declared dead → first message p50 / p99 / max (hit) | control sessions | lost | declared dead → first message p50 / p99 / max (hit) |\n")
			p("|---|---|---|---|---|---|---|---|\n")
		}
		s := m.Standby
		p("| %s | %d | %d | %d | %s | %d | %d | %s |\n", runLabel(runs, m), s.Sessions, s.Lost, s.Promotions, s.Takeover, s.Control, s.ControlLost, s.ControlTakeover)
	}
	if b.Len() > 0 {
		p("\n")
	}
	return b.String()
}
