package streamer

// claimShare is the claims per second this worker may send: its
// ClaimsPerSecond, and with a fleet budget (Config.FleetClaimsPerSecond) at
// most its part of the budget, so that the fleet's claims together stay
// within what the table's write headroom was sized for, however many
// workers claim at once (a mass start, the takeover of a lost AZ, a
// rolling deploy). Its part is its room's (MaxSessions above the sessions
// it holds) of the fleet's room, the newest summary head's (Summary.Room,
// written every RefreshEvery): the workers that can take more take more.
// Divided evenly among the alive workers instead, the survivors of a lost
// AZ filled up and stopped claiming while the replacements, with most of
// the fleet's room, claimed at their third of the budget, and the
// recovery's tail slowed to that (the fleet simulator at 1,000 ×
// 1,000,000: the lost AZ's sessions came back at 3,400 a second from its
// first tenth to its fifth, at 1,700 from its seventh to its ninth, and
// its last tenth took 58 s). Since each
// worker's own room only shrinks as it claims, the parts add up to at most
// the budget, but for a worker whose sessions ended since the head, and
// the workers not yet in the head's membership (just started): those
// claim at an even share (the budget over the alive workers the last
// listing counted), and before their first listing at the pacer's floor
// (0.1/s). The pacer's AIMD still halves the share when the table
// throttles anyway.
func (w *Worker) claimShare() float64 {
	if w.cfg.FleetClaimsPerSecond <= 0 {
		return w.cfg.ClaimsPerSecond
	}
	alive := w.keeper.AliveWorkers()
	if alive == 0 {
		// No listing yet (a worker just started: its first refresh is a
		// tick and a read away): it does not know how many share the
		// budget. Taking the whole budget as its share (a fleet of one),
		// as it did, each of a lost AZ's replacements, started together,
		// claimed up to a second's burst of 50 at once. The fleet
		// simulator's AZ loss at 100 × 100,000 (budget 346/s): the
		// busiest 10 s of claims 566 a second before (1.64 × the
		// budget, as the replacements started), 511 with this (1.48 ×).
		return 0
	}
	share := w.cfg.FleetClaimsPerSecond / float64(alive)
	if head, _, ok := w.keeper.Summary(); ok && head.Room > 0 && w.keeper.InSummary() {
		share = roomShare(w.cfg.FleetClaimsPerSecond, w.cfg.MaxSessions-w.owned(), head.Room)
	}
	return min(w.cfg.ClaimsPerSecond, share)
}

// roomShare is the part of budget of a worker with room mine in a fleet
// with room fleet (its own counted in it, but a head may predate sessions
// that left it since: never more than the whole budget).
func roomShare(budget float64, mine, fleet int) float64 {
	mine = max(0, mine)
	return budget * float64(mine) / float64(max(fleet, mine, 1))
}

// claimRate is the pace this worker's claims wait for: its share of the
// fleet's budget, lower while the store throttles (the pacer).
func (w *Worker) claimRate() float64 {
	return min(w.claimShare(), w.pacer.Rate())
}
