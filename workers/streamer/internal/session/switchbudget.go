package session

import "sync/atomic"

// SwitchBudget bounds what the new connections of planned reconnects hold
// before their switch (the messages they read past their session's last
// delivered seq), over every session of a worker: each new connection holds
// at most MaxSwitchBytes, and all of them together at most the budget, so
// that a reconnect_on notice to every session while the sink is slow (every
// current connection waiting for sink room, every new one reading ahead)
// holds the budget, not MaxSessions × MaxSwitchBytes. A new connection
// reserves each message's bytes before it keeps the message, and one that
// finds the budget full is given up, as one that runs MaxSwitchBytes ahead
// is (the current connection stays). Safe for concurrent use.
type SwitchBudget struct {
	limit int64
	used  atomic.Int64
}

// NewSwitchBudget returns a budget of limit bytes; nil (no bound beyond
// each new connection's MaxSwitchBytes) when limit is 0 or less.
func NewSwitchBudget(limit int64) *SwitchBudget {
	if limit <= 0 {
		return nil
	}
	return &SwitchBudget{limit: limit}
}

// Used is what the new connections hold now.
func (b *SwitchBudget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// reserve takes n bytes of the budget, or reports false (nothing taken)
// when they do not fit. A nil budget always fits.
func (b *SwitchBudget) reserve(n int64) bool {
	if b == nil {
		return true
	}
	for {
		u := b.used.Load()
		if u+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// release gives back n bytes reserve took.
func (b *SwitchBudget) release(n int64) {
	if b != nil && n != 0 {
		b.used.Add(-n)
	}
}
