package streamer

// claimShare is the claims per second this worker may send: its
// ClaimsPerSecond, and with a fleet budget (Config.FleetClaimsPerSecond)
// at most the budget divided by the alive workers it knows of (the
// Keeper's listing, refreshed every RefreshEvery; the pacer's floor,
// 0.1/s, before its first), so that the fleet's
// claims together stay within what the table's write headroom was sized
// for, however many workers claim at once (a mass start, the takeover of a
// lost AZ by the survivors, whose shares grow as the dead leave the
// listing). The pacer's AIMD still halves the share when the table
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
	return min(w.cfg.ClaimsPerSecond, w.cfg.FleetClaimsPerSecond/float64(alive))
}

// claimRate is the pace this worker's claims wait for: its share of the
// fleet's budget, lower while the store throttles (the pacer).
func (w *Worker) claimRate() float64 {
	return min(w.claimShare(), w.pacer.Rate())
}
