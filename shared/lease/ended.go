// The tenures this Keeper ended in the table, and the audit's rule that a
// by_owner entry of one of them is stale.

package lease

import (
	"sync"
	"time"
)

// endedTenures remembers the tenures this Keeper ended in the table (a
// release, a hand-off's release, a failure, or a tenure given to a
// receiver that took it), from the moment the write that ends one is sent
// (forgotten if it fails), by session, for as long as a by_owner listing
// may still show them: an audit listing sent before the release landed,
// or an index lagging behind it. Without it the audit takes such an entry
// for a tenure the worker holds in the table but not in memory and
// releases it again: a conditional write refused (1 write unit and the
// consistent read that explains it) for nothing. In the cost bench's stop
// of 1,000 sessions that was 8 % of the releases (an audit pass over the
// burst), the last 0.04 write units of a tenure. The audit drops such
// entries from its listing, and a release of a tenure the audit found
// (Keeper.ReleaseToken) that this Keeper is ending or ended writes nothing:
// the audit's pass acts on its entries one by one while the releases go on.
//
// Dropping the entry is safe: only an acquire makes a session anybody's,
// at a higher epoch, so once this worker's tenure at epoch e ended, no
// entry naming this worker at e or below is its session any more. Entries
// are forgotten after keep (the index lag bound and a listing's deadline):
// a listing that still shows one later costs that refused write, nothing
// else.
type endedTenures struct {
	mu   sync.Mutex // a leaf lock
	keep time.Duration
	at   map[string]endedTenure
}

type endedTenure struct {
	epoch int64
	at    time.Time
}

// add records that t ended at now (the newer epoch wins).
func (e *endedTenures) add(t Token, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.at == nil {
		e.at = map[string]endedTenure{}
	}
	if cur, ok := e.at[t.ConnectionID]; ok && cur.epoch > t.Epoch {
		return
	}
	e.at[t.ConnectionID] = endedTenure{epoch: t.Epoch, at: now}
}

// undo forgets t after the write that was to end it failed (the tenure
// may still be this worker's in the table: the audit is what finds it).
func (e *endedTenures) undo(t Token) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if cur, ok := e.at[t.ConnectionID]; ok && cur.epoch == t.Epoch {
		delete(e.at, t.ConnectionID)
	}
}

// covers reports whether t is a tenure this Keeper ended, or is ending.
func (e *endedTenures) covers(t Token) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	cur, ok := e.at[t.ConnectionID]
	return ok && t.Epoch <= cur.epoch
}

// live returns the entries of owned that are not tenures this Keeper
// ended (StaleOwned), filtered in owned's array (the caller's: Audit), and
// forgets what is older than keep.
func (e *endedTenures) live(owned []Owned, now time.Time) []Owned {
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, t := range e.at {
		if now.Sub(t.at) > e.keep {
			delete(e.at, id)
		}
	}
	out := owned[:0]
	for _, o := range owned {
		t, ok := e.at[o.ConnectionID]
		if ok && StaleOwned(o, t.epoch) {
			continue
		}
		out = append(out, o)
	}
	clear(owned[len(out):]) // no reference kept to a dropped entry
	return out
}

// StaleOwned reports whether a listing's entry o, naming its worker as the
// session's owner, is stale because that worker ended the session's
// tenure at endedEpoch: o's epoch is that one or an older one.
func StaleOwned(o Owned, endedEpoch int64) bool { return o.Epoch <= endedEpoch }
