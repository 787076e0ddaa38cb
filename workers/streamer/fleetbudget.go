package streamer

// claimShare is the claims per second this worker may send: its
// ClaimsPerSecond, and with a fleet budget (Config.FleetClaimsPerSecond)
// at most the budget divided by the alive workers it knows of (the
// Keeper's listing, refreshed every RefreshEvery), so that the fleet's
// claims together stay within what the table's write headroom was sized
// for, however many workers claim at once (a mass start, the takeover of a
// lost AZ by the survivors, whose shares grow as the dead leave the
// listing). The pacer's AIMD still halves the share when the table
// throttles anyway.
func (w *Worker) claimShare() float64 {
	if w.cfg.FleetClaimsPerSecond <= 0 {
		return w.cfg.ClaimsPerSecond
	}
	alive := max(1, w.keeper.AliveWorkers())
	return min(w.cfg.ClaimsPerSecond, w.cfg.FleetClaimsPerSecond/float64(alive))
}

// claimRate is the pace this worker's claims wait for: its share of the
// fleet's budget, lower while the store throttles (the pacer).
func (w *Worker) claimRate() float64 {
	return min(w.claimShare(), w.pacer.Rate())
}
