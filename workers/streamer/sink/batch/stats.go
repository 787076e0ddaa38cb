package batch

// What a Batcher counts.

import ()

// Stats are cumulative counts since the batcher started.
type Stats struct {
	Requests      int64 `json:"requests"`       // requests sent
	RequestErrors int64 `json:"request_errors"` // requests that failed whole
	Records       int64 `json:"records"`        // messages acknowledged
	// WireRecords are the records the destination acknowledged (a pack is
	// one, whatever the messages in it); Packs the packs of two or more
	// messages sent; PackFallbacks the packs whose encoding exceeded their
	// bound, whose messages went out as plain records.
	WireRecords    int64 `json:"wire_records"`
	Packs          int64 `json:"packs"`
	PackFallbacks  int64 `json:"pack_fallbacks"`
	EntryErrors    int64 `json:"entry_errors"`    // entries a request failed (then retried)
	DroppedInvalid int64 `json:"dropped_invalid"` // entries dropped: their lease was no longer valid
	// Refused are entries given up on after their permanent refusals
	// (then skipped or ending their tenure, as it decided); Skipped those
	// of them the tenure skipped.
	Refused int64 `json:"refused"`
	Skipped int64 `json:"skipped"`
	// HeldForTrust counts the times a session's entries waited because
	// their tenure's trust would end before a request's timeout.
	HeldForTrust int64 `json:"held_for_trust"`
	// BudgetStalls counts the Submits that waited for the worker's buffer
	// budget; BufferedBytes is what is buffered now.
	BudgetStalls  int64 `json:"budget_stalls"`
	BufferedBytes int64 `json:"buffered_bytes"`
}

// Stats returns the cumulative counts.
func (b *Batcher) Stats() Stats {
	b.mu.Lock()
	buffered := b.buffered
	b.mu.Unlock()
	return Stats{
		Requests: b.requests.Load(), RequestErrors: b.requestErrors.Load(), Records: b.records.Load(),
		WireRecords: b.wireRecords.Load(), Packs: b.packs.Load(), PackFallbacks: b.packFallbacks.Load(),
		EntryErrors: b.entryErrors.Load(), DroppedInvalid: b.dropped.Load(),
		Refused: b.refused.Load(), Skipped: b.skipped.Load(), HeldForTrust: b.heldForTrust.Load(),
		BudgetStalls: b.budgetStalls.Load(), BufferedBytes: buffered,
	}
}
