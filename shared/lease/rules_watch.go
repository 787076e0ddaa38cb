package lease

// Who watches whom and who claims what first: rendezvous hashing over the
// alive workers.

import (
	"slices"
)

// Watchers ranks the workers that watch target among alive (rendezvous
// hashing: every worker computes the same answer from the same list) and
// returns the first n, never target itself.
func Watchers(target string, alive []string, n int) []string {
	// The first n by (score desc, id asc), kept in order as alive is
	// scanned once: O(len(alive) × n), not a sort of every worker (a
	// Keeper asks for every alive worker's watchers at each refresh).
	top := make([]ranked, 0, n)
	for _, w := range alive {
		if w == target {
			continue
		}
		r := ranked{w, rendezvous(target, w)}
		i := len(top)
		for i > 0 && r.before(top[i-1]) {
			i--
		}
		if i >= n {
			continue
		}
		if len(top) < n {
			top = append(top, ranked{})
		}
		copy(top[i+1:], top[i:])
		top[i] = r
	}
	out := make([]string, len(top))
	for i, r := range top {
		out[i] = r.id
	}
	return out
}

// OrphanClaimers is how many workers try an unowned session on their
// reconcile listing's first sight of it past Config.UnownedGrace
// (MayClaimUnowned).
const OrphanClaimers = 2

// MayClaimUnowned says whether self tries to acquire unowned session id
// that its reconcile listing (by_unowned) shows, past Config.UnownedGrace
// (a session within it is left to the work queue's fast path: Keeper.MayClaim):
// on that listing's first sight of it only when self ranks among the first
// OrphanClaimers of alive by rendezvous hashing of id (as Watchers ranks
// watchers; self counted when alive misses it, and alone when alive is
// empty); when an earlier listing of self showed it unowned past the grace
// too (relisted), always.
//
// Why: a session just started is claimed by the work queue's fast path
// (its start notification), while every worker's reconcile pass lists the
// same fresh entries of by_unowned; before this rule each pass tried them
// all, so the more workers the more claims lost each start (each a refused
// conditional write, its classifying read and a read of the holder's
// record: 16 acquires a session at 1,000 workers in the fleet simulator,
// 2.3 at 100). Now at most OrphanClaimers passes race the fast path on a
// session's first sighting, whatever the fleet's size; and with
// UnownedGrace set none does within it, which leaves a fresh start to its
// notification (with 2 workers both rank within OrphanClaimers, and their
// passes raced every start listed a moment before its fast-path acquire).
// Liveness: an orphan
// whose notification was lost is tried by its first OrphanClaimers
// workers' next passes, and, when they are full, gone or not listing it,
// by any worker on its next listing that shows it again: one reconcile
// pass later than before at most. Safety is the acquire's condition,
// unchanged: this only chooses which workers ask.
func MayClaimUnowned(id, self string, alive []string, relisted bool) bool {
	return relisted || ranksWithin(id, self, alive, OrphanClaimers)
}

// GoneOrder sorts gone (the workers of the GONE list) into the order self's
// reconcile passes visit them: by rendezvous score, so that each worker
// starts at another dead worker. A pass stops visiting once its listing is
// full (Orphans' limit), and every worker reads the GONE list in the same
// order: in that order every survivor of a lost AZ read the same dead
// worker's whole by_owner each pass and tried the same sessions (the fleet
// simulator at 1,000 × 1,000,000: that index key read at 2,912 of its
// 3,000 units/s, the table's reads at its limit). Liveness: every gone
// worker is still visited by the workers that rank it first, and by any
// worker once those before it in its order are drained (or DONE). Safety
// is the acquires' conditions, unchanged: this only orders who asks first.
func GoneOrder(self string, gone []string) {
	// Each score once, not twice per comparison.
	rs := make([]ranked, len(gone))
	for i, g := range gone {
		rs[i] = ranked{g, rendezvous(g, self)}
	}
	sortRanked(rs)
	for i, r := range rs {
		gone[i] = r.id
	}
}

// SampleOf is at most n of ids, the highest by rendezvous score with key
// (ties by id), in that order: the workers a takeover of key's sessions
// (or key's own drain) reads and spreads them over when the fleet is
// larger than n (Keeper.FleetSample). Each key draws another sample, so
// the takeovers of an AZ's dead workers, each spread over its own n,
// together cover the survivors about evenly, while each reads n records
// instead of every alive worker's (the fleet simulator at 1,000 ×
// 1,000,000: 334 takeovers reading 1,000 records each met the account's
// read limit within seconds of the loss). ids is not modified.
func SampleOf(key string, ids []string, n int) []string {
	if n <= 0 {
		return nil
	}
	rs := make([]ranked, len(ids))
	for i, id := range ids {
		rs[i] = ranked{id, rendezvous(key, id)}
	}
	sortRanked(rs)
	out := make([]string, 0, min(n, len(rs)))
	for _, r := range rs[:min(n, len(rs))] {
		out = append(out, r.id)
	}
	return out
}

// ranked is a watcher's rendezvous score for one target.
type ranked struct {
	id    string
	score uint64
}

// sortRanked sorts rs highest first (ranked.before).
func sortRanked(rs []ranked) {
	slices.SortFunc(rs, func(a, b ranked) int {
		switch {
		case a.before(b):
			return -1
		case b.before(a):
			return 1
		}
		return 0
	})
}

// before: a ranks above b (the higher score; on a tie the smaller id).
func (a ranked) before(b ranked) bool {
	return a.score > b.score || (a.score == b.score && a.id < b.id)
}

// AliveView is the alive workers as self counts them for watching: the ALIVE
// list as listed (by_worker_list, an index that lags on DynamoDB), with self
// added (a worker that has just registered is missing from the list until
// the index shows it, and without itself in the list it would watch
// nobody until the next refresh) and without the workers self knows are
// gone (one just declared dead is still listed; as a watcher of others it
// would take a slot that a live worker should have). Found on the DynamoDB
// model: a worker three seconds old watched nobody when the only other
// worker froze, and the takeover came a refresh late.
func AliveView(self string, listed []string, gone func(string) bool) []string {
	out := make([]string, 0, len(listed)+1)
	for _, id := range listed {
		if id == self || !gone(id) {
			out = append(out, id)
		}
	}
	if !slices.Contains(out, self) {
		out = append(out, self)
	}
	return out
}

// Targets are the workers among alive that self watches.
//
// The answer is Watchers' (t is a target when self is among
// Watchers(t, alive, n)), found without ranking everyone for every t: for
// each t, alive is scanned until n workers rank above self. Self's rank
// for t is uniform, so that takes about n × ln(len(alive)) scores a target
// on average instead of a sort of alive: a 1,000-worker fleet's refresh
// costs each worker ~15,000 scores, not 1,000 sorts of 1,000 (the fleet
// simulator's CPU went there).
func Targets(self string, alive []string, n int) []string {
	if !slices.Contains(alive, self) {
		return nil // nobody's watcher: Watchers ranks only alive
	}
	var out []string
	for _, t := range alive {
		if t != self && ranksWithin(t, self, alive, n) {
			out = append(out, t)
		}
	}
	return out
}

// ranksWithin: self is among target's first n watchers in alive.
func ranksWithin(target, self string, alive []string, n int) bool {
	me := ranked{self, rendezvous(target, self)}
	above := 0
	for _, w := range alive {
		if w == target || w == self {
			continue
		}
		if (ranked{w, rendezvous(target, w)}).before(me) {
			if above++; above >= n {
				return false
			}
		}
	}
	return n > 0
}

// rendezvous is FNV-1a 64 of target, a separator and watcher, mixed.
func rendezvous(target, watcher string) uint64 {
	h := uint64(14695981039346656037)
	for _, s := range []string{target, "\x00", watcher} {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= 1099511628211
		}
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}
