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
			p("The path splits each takeover at the new owner's acquire (the first begun after the declaration): notice\n")
			p("(the declaration → the acquire's start: the death told, the dead worker's record read, the claim\n")
			p("admitted), the acquire (its conditional write, then the checkpoint's fence, beside the spec's read unless the acquirer has the configuration: a promotion), and\n")
			p("deliver (its return → the first message: a standby's window drained; without one, the dial and the\n")
			p("source's next message). Each p50 / p99 / max, ms (how many).\n\n")
			p("| scenario | group | sessions | lost | promotions | declared dead → first message | notice | acquire | deliver |\n")
			p("|---|---|---|---|---|---|---|---|---|\n")
		}
		s := m.Standby
		p("| %s | standby | %d | %d | %d | %s | %s | %s | %s |\n", runLabel(runs, m), s.Sessions, s.Lost, s.Promotions, s.Takeover,
			s.Path.Notice, s.Path.Acquire, s.Path.Deliver)
		p("| %s | control | %d | %d | – | %s | %s | %s | %s |\n", runLabel(runs, m), s.Control, s.ControlLost, s.ControlTakeover,
			s.ControlPath.Notice, s.ControlPath.Acquire, s.ControlPath.Deliver)
	}
	if b.Len() > 0 {
		p("\n")
	}
	return b.String()
}
