package dynamostore

import "sync"

// maxHints bounds the release hints a store keeps (a Get of a stopped
// session its worker never releases leaves one): past it they are dropped,
// which costs only the order of a release's variants.
const maxHints = 100_000

// ReleaseHints remembers the sessions whose last Get through the store
// showed them not STARTED (stopped, or FAILED), so that their release tries
// the variant for that state first. A worker releases a stopped session
// after re-reading it (its mailbox told it of the stop): without the hint
// the STARTED variant went first, failed its condition (1 write unit and a
// consistent read) and the release took a second write. Both variants stay
// conditional on the state they assume: a wrong hint costs that refusal,
// never a wrong write. testkit/simddb bills its releases by the same
// hints. The zero value is ready.
type ReleaseHints struct {
	mu      sync.Mutex
	stopped map[string]bool
}

// Note records that session id was just read STARTED (and not FAILED) or
// not.
func (h *ReleaseHints) Note(id string, started bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if started {
		delete(h.stopped, id)
		return
	}
	if h.stopped == nil || len(h.stopped) >= maxHints {
		h.stopped = map[string]bool{}
	}
	h.stopped[id] = true
}

// Take reports whether id was last read not STARTED, and forgets it.
func (h *ReleaseHints) Take(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.stopped[id]
	delete(h.stopped, id)
	return s
}
