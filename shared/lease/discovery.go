// Finding work: sessions nobody holds, a dead worker's sessions, and the
// audit of what the table says this worker owns.
//
// Every list here reads an index (by_unowned, by_worker_list, by_owner),
// eventually consistent on DynamoDB: an answer may miss a recent write. A
// missing entry only delays what is found, except where an empty answer
// would end the search: a GONE worker moves to DONE only after the index
// lag bound (MayMarkDone), and DONE records are swept again, slowly.

package lease

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// Orphans lists sessions this worker may try to acquire, up to limit:
// STARTED sessions without owner, then the STARTED sessions of workers that
// died or left (a GONE record), then those of DONE workers a sweep found
// owning some (DoneSweepEvery); the stopped sessions of those workers it
// disowns (disownStopped). A GONE worker moves to DONE when its by_owner
// query, sent at least IndexLagBound after this Keeper first saw it gone,
// finds nothing (MayMarkDone) and a consistent read of its record shows it
// still GONE.
func (k *Keeper) Orphans(ctx context.Context, limit int) ([]Candidate, error) {
	var out []Candidate
	ids, err := rpc(ctx, k.cfg.listTimeout(), func(ctx context.Context) ([]string, error) { return k.store.Unowned(ctx, limit) })
	if err != nil {
		return nil, fmt.Errorf("unowned: %w", err)
	}
	out = append(out, k.sightings(ids)...)
	gone, err := rpc(ctx, k.cfg.listTimeout(), func(ctx context.Context) ([]string, error) {
		return k.store.ListWorkers(ctx, schema.WorkerListGone, 0)
	})
	if err != nil {
		return out, fmt.Errorf("gone workers: %w", err)
	}
	GoneOrder(k.cfg.Owner, gone)
	for _, w := range gone {
		if len(out) >= limit {
			break
		}
		// The listing was answered after w's record left ALIVE.
		seenAt := k.markGone(w)
		sentAt := k.clk.Now()
		if k.inGoneGrace(w, sentAt.Sub(seenAt)) {
			continue // left to its takeover
		}
		// All of them (limit 0): by_owner has no sort key, so a limited
		// page may hold only stopped entries and never reach a STARTED
		// one behind them.
		owned, err := k.ownedBy(ctx, w)
		if err != nil {
			return capped(out, limit), fmt.Errorf("sessions of %s: %w", w, err)
		}
		if MayMarkDone(seenAt, sentAt, len(owned), k.cfg.IndexLagBound) {
			if err := k.markDone(ctx, w); err != nil {
				return capped(out, limit), err
			}
			continue
		}
		out = appendStarted(out, owned)
		if err := k.disownStopped(ctx, owned); err != nil {
			return capped(out, limit), err
		}
	}
	out, err = k.sweepDone(ctx, out, limit)
	return capped(out, limit), err
}

// unownedKeep is how many listings a session's first sighting unowned is
// remembered after the last listing that showed it: a listing is capped
// (Orphans' limit) and rotates over the by_unowned shards, so an orphan
// missing from one listing is still a second sighting in a later one.
const unownedKeep = 2 * schema.IndexShards

// sightings are the unowned sessions ids of this listing as candidates:
// Fresh while this Keeper's listings have shown it unowned for less than
// UnownedGrace, Relisted when an earlier listing showed it unowned past the
// grace too.
func (k *Keeper) sightings(ids []string) []Candidate {
	k.gmu.Lock()
	defer k.gmu.Unlock()
	at := k.clk.Now().Sub(k.sightBase)
	k.listings++
	n := k.listings
	out := make([]Candidate, 0, len(ids))
	for _, id := range ids {
		s, ok := k.unownedSeen[id]
		if !ok {
			s.firstAt = at
		}
		s.last = n
		fresh := at-s.firstAt < k.cfg.UnownedGrace
		if !fresh && s.ripe == 0 {
			s.ripe = n
		}
		k.unownedSeen[id] = s
		out = append(out, Candidate{ConnectionID: id, Fresh: fresh, Relisted: !fresh && s.ripe < n, Seen: ok})
	}
	k.unownedPeak = max(k.unownedPeak, len(k.unownedSeen))
	if n%unownedKeep == 0 {
		// Forget the sessions no listing showed for unownedKeep listings
		// (claimed, or stopped): the map holds at most the orphans of the
		// last unownedKeep listings.
		for id, s := range k.unownedSeen {
			if s.last+unownedKeep < n {
				delete(k.unownedSeen, id)
			}
		}
		k.shrinkSightingsLocked()
	}
	return out
}

// forgetSighting drops the sighting of a session this Keeper now holds: no
// orphan of its listings any more, and a worker at capacity lists none, so
// its sighting would otherwise stay until the worker lists again (every
// session a full worker claimed, 80 B each in the capacity bench). Should
// it be unowned again later (released, handed off), its next sighting is a
// first one: the orphan it was before the claim is not this one.
func (k *Keeper) forgetSighting(id string) {
	k.gmu.Lock()
	defer k.gmu.Unlock()
	if _, ok := k.unownedSeen[id]; !ok {
		return
	}
	delete(k.unownedSeen, id)
	k.shrinkSightingsLocked()
}

// shrinkSightingsLocked gives unownedSeen a map of its size once it holds
// half its peak or less (under gmu). A Go map keeps the room its largest
// size took: after a claim wave, that of every session the worker claimed
// (148 B each in the capacity bench), for the process's life. A new map
// holds what is left (maps.Clone would keep the room too); halving each
// time keeps the copies' cost proportional to the deletions.
func (k *Keeper) shrinkSightingsLocked() {
	if k.unownedPeak == 0 || len(k.unownedSeen) > k.unownedPeak/2 {
		return
	}
	left := make(map[string]sighting, len(k.unownedSeen))
	maps.Copy(left, k.unownedSeen)
	k.unownedSeen, k.unownedPeak = left, len(left)
}

// sighting is when the first listing that showed a session unowned was
// answered (on the Keeper's clock, since its sightBase), the first listing
// past UnownedGrace (ripe; 0: none yet) and the last. 16 bytes: a paced
// mass start keeps up to unownedKeep full listings of them in every
// worker (the fleet simulator's 1,000 workers in one process: 257 MB of
// a 1,051 MB heap at 100 × 100,000 when each was 48).
type sighting struct {
	firstAt    time.Duration
	ripe, last uint32
}

// MayClaim says whether the reconciler should try to acquire c: a session
// of a worker seen not alive always; an unowned one once it is no longer
// Fresh (UnownedGrace), when MayClaimUnowned says so of this worker among
// the alive workers of the last refresh.
func (k *Keeper) MayClaim(c Candidate) bool {
	if c.Prev != nil {
		return true
	}
	if c.Fresh {
		return false
	}
	k.lmu.Lock()
	alive := k.aliveIDs
	k.lmu.Unlock()
	return MayClaimUnowned(c.ConnectionID, k.cfg.Owner, alive, c.Relisted)
}

// capped is out cut to limit candidates.
func capped(out []Candidate, limit int) []Candidate {
	if len(out) > limit {
		return out[:limit]
	}
	return out
}

// appendStarted appends the STARTED sessions of owned, each with the tenure
// to take over.
func appendStarted(out []Candidate, owned []Owned) []Candidate {
	for _, o := range owned {
		if o.DesiredState == schema.StateStarted {
			t := o.Token
			out = append(out, Candidate{ConnectionID: o.ConnectionID, Prev: &t})
		}
	}
	return out
}

// disownStopped clears the owner of each stopped session in owned, the
// by_owner entries of a worker this Keeper saw not alive (Store.Disown:
// conditional on the entry's tenure and on the session not STARTED).
//
// A worker that ends (dies, or leaves without releasing) while a session
// it owns is STOPPED leaves that session owned: no takeover moves it (only
// STARTED sessions are taken), so without this its by_owner entry would
// keep the record GONE until the record expires (a day), and a start after
// that, which ingest writes as a start of an owned session (no
// unowned_shard, the owner's mailbox, which no longer exists), would be
// found by no reconciler if its notification were lost. Cleared, the
// session is like any released STOPPED one: its next start puts it in
// by_unowned, and the record moves to DONE. A start landing first makes
// the clearing fail its condition (the session is then a STARTED one of a
// gone worker, taken over from this same list); a clearing landing first
// makes that start's has-owner write fail its condition, and ingest
// re-reads and writes the unowned variant. This keeps one invariant for
// ingest to rely on: an owned session's owner is alive, or its record is
// GONE and lists the session. (The other way, ingest reading the owner's
// record on every start of an owned session and writing unowned_shard
// when it is not ALIVE, would add a read to ingest's path, put a liveness
// judgement outside the ownership core, and leave an owned session in
// by_unowned, which Acquire would refuse.)
//
// Cost: one conditional write per such session, once (two write units
// with a 1 KB header, and the by_owner entry's delete); a reconciler whose
// index still showed a cleared entry pays a failed write. Definitive
// refusals (a newer tenure, a start since, the item gone) are that race,
// not errors.
func (k *Keeper) disownStopped(ctx context.Context, owned []Owned) error {
	for _, o := range owned {
		if o.DesiredState == schema.StateStarted {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
		err := k.store.Disown(wctx, o.Token)
		cancel()
		if err != nil && !Definitive(err) {
			return fmt.Errorf("disown stopped session: %w", err)
		}
	}
	return nil
}

// markDone moves GONE worker w to DONE after a consistent read of its
// record (not the by_worker_list index the GONE listing came from) shows it
// still GONE: a record another Keeper already moved is not written again.
func (k *Keeper) markDone(ctx context.Context, w string) error {
	rec, err := rpc(ctx, k.cfg.RPCTimeout, func(ctx context.Context) (WorkerRecord, error) { return k.store.GetWorker(ctx, w) })
	switch {
	case errors.Is(err, ErrWorkerNotFound):
		return nil // expired
	case err != nil:
		return fmt.Errorf("mark %s done: %w", w, err)
	case rec.Alive() || rec.List != schema.WorkerListGone:
		return nil
	}
	mctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	err = k.store.MarkDone(mctx, w)
	cancel()
	if err != nil && !errors.Is(err, ErrWorkerAlive) && !errors.Is(err, ErrWorkerNotFound) {
		return fmt.Errorf("mark %s done: %w", w, err)
	}
	return nil
}

// sweepDone appends the sessions DONE workers still own: every
// DoneSweepEvery it lists the DONE records and takes those rendezvous
// hashing over the alive workers gives this Keeper (one sweeper each);
// each is queried every pass until its by_owner answer is empty. This is
// the fallback for an index that lagged beyond IndexLagBound when the
// record moved to DONE: such a session is found within a sweep period of
// appearing in the index, as long as the record has not expired.
func (k *Keeper) sweepDone(ctx context.Context, out []Candidate, limit int) ([]Candidate, error) {
	now := k.clk.Now()
	k.lmu.Lock()
	alive := k.aliveIDs
	k.lmu.Unlock()
	k.gmu.Lock()
	due := len(alive) > 0 && !now.Before(k.nextSweep)
	if due {
		k.nextSweep = now.Add(k.cfg.DoneSweepEvery())
	}
	k.gmu.Unlock()
	if due {
		done, err := rpc(ctx, k.cfg.listTimeout(), func(ctx context.Context) ([]string, error) {
			return k.store.ListWorkers(ctx, schema.WorkerListDone, 0)
		})
		if err != nil {
			return out, fmt.Errorf("done workers: %w", err)
		}
		k.gmu.Lock()
		for _, w := range done {
			if ws := Watchers(w, alive, 1); len(ws) == 1 && ws[0] == k.cfg.Owner {
				k.late[w] = true
			}
		}
		k.gmu.Unlock()
	}
	k.gmu.Lock()
	late := slices.Sorted(maps.Keys(k.late))
	k.gmu.Unlock()
	for _, w := range late {
		if len(out) >= limit {
			break
		}
		owned, err := k.ownedBy(ctx, w) // all: see Orphans
		if err != nil {
			return out, fmt.Errorf("sessions of done worker %s: %w", w, err)
		}
		if len(owned) == 0 {
			k.gmu.Lock()
			delete(k.late, w)
			k.gmu.Unlock()
			continue
		}
		k.markGone(w)
		out = appendStarted(out, owned)
		if err := k.disownStopped(ctx, owned); err != nil {
			return out, err
		}
	}
	return out, nil
}

// TakeoverOf lists the STARTED sessions of worker id (dead or left), each
// with the tenure to take over. It reads by_owner right after the death:
// a session the worker acquired just before is missing while the index
// lags; Orphans finds it (the record stays GONE for IndexLagBound at least).
func (k *Keeper) TakeoverOf(ctx context.Context, id string) ([]Candidate, error) {
	owned, err := k.ownedBy(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("sessions of %s: %w", id, err)
	}
	return appendStarted(nil, owned), nil
}

// Audit lists the sessions the table says this worker owns (by_owner): the
// owner's check for stops and new generations whose mailbox entry was lost,
// and for tenures it does not hold (an acquire whose reply was lost). The
// index may lag: an entry may be missing (found on a later pass) or stale
// (a session released or taken since); what the caller does with an entry
// is a conditional write the table decides, so a stale one costs a write,
// never safety. Entries of tenures this Keeper ended itself are dropped
// (ended.go): they are stale whatever the index says.
//
// The listing goes into buf's array when the store can list into one
// (OwnedByAppender) and it has the room: the caller passes its previous
// pass's listing back, so that a steady audit allocates no array (the
// caller owns buf; nothing else of the Keeper keeps it).
func (k *Keeper) Audit(ctx context.Context, buf []Owned) ([]Owned, error) {
	owned, err := k.auditListing(ctx, buf[:0])
	if err != nil {
		clear(owned)
		return owned[:0], fmt.Errorf("audit: %w", err)
	}
	return k.ended.live(owned, k.clk.Now()), nil
}

// auditListing is ownedBy(k.cfg.Owner), into dst when the store allows.
func (k *Keeper) auditListing(ctx context.Context, dst []Owned) ([]Owned, error) {
	ctx, cancel := context.WithTimeout(ctx, k.cfg.listTimeout())
	defer cancel()
	return AppendOwnedBy(ctx, k.store, dst, k.cfg.Owner)
}

// ownedBy lists every session by_owner gives worker w (limit 0: by_owner
// has no sort key, so a limited page may hold only stopped entries and
// never reach a STARTED one behind them), within the listing timeout.
func (k *Keeper) ownedBy(ctx context.Context, w string) ([]Owned, error) {
	return rpc(ctx, k.cfg.listTimeout(), func(ctx context.Context) ([]Owned, error) { return k.store.OwnedBy(ctx, w, 0) })
}

// rpc runs one store call with a deadline of timeout (every call to the
// table has one: a listing left without it hangs as long as the table
// does not answer, and the reconcile pass that made it with it).
//
// A listing's deadline is Config.listTimeout, longer than a single
// request's RPCTimeout: a listing is several pages (the 16 by_unowned
// shards, a big by_owner), and the SDK retries a throttled page after a
// backoff (up to 2 s, then 4 s: aws/retry's exponential jitter with 3
// attempts); cut at RPCTimeout, a throttled listing would find nothing and
// its sessions would wait a whole reconcile pass more.
func rpc[T any](ctx context.Context, timeout time.Duration, call func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return call(ctx)
}

// inGoneGrace reports whether gone worker w's sessions are left to its
// takeover: GoneGraceHolds for how long it is known gone, with the work
// queue flowing (Config.Flowing) or announcing (Config.Announcing), and no
// EndGoneGrace for it.
func (k *Keeper) inGoneGrace(w string, known time.Duration) bool {
	flowing := k.cfg.Flowing == nil || k.cfg.Flowing()
	announcing := k.cfg.Announcing != nil && k.cfg.Announcing()
	if !GoneGraceHolds(known, k.cfg.GoneGrace, k.cfg.GoneGraceMax, flowing, announcing) {
		return false
	}
	k.gmu.Lock()
	defer k.gmu.Unlock()
	return !k.graceEnded[w]
}

// EndGoneGrace says that the takeover of gone worker w could not place
// every session (its listing failed, a start notification was not sent):
// this Keeper's listings show w's sessions at once, whatever
// Config.GoneGrace. Other workers' listings show them once the grace
// ends.
func (k *Keeper) EndGoneGrace(w string) {
	k.gmu.Lock()
	defer k.gmu.Unlock()
	if len(k.graceEnded) >= MaxGoneRemembered {
		// Forgotten: their sessions wait for the grace's end at most.
		clear(k.graceEnded)
	}
	k.graceEnded[w] = true
}
