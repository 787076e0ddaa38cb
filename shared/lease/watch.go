// The view of other workers: who is alive, reading the records this worker
// watches, and declaring a silent one dead.

package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// NotAlive reports whether worker id is not alive, as this Keeper has seen
// it (the GONE workers' listing, then its record, checked when not seen
// alive within the last heartbeat period; a worker seen DEAD or LEFT, or
// missing, stays so): the check a takeover of id's tenures needs when
// another worker reports id dead.
func (k *Keeper) NotAlive(ctx context.Context, id string) bool {
	return k.notAliveWaiting(ctx, id, true)
}

// NotAliveNow is NotAlive for a caller that must not wait for the shared
// listing of the GONE workers (a standby's promotion: every millisecond
// is a dark one): a listing due now is sent as NotAlive's is, else the
// record is read at once.
func (k *Keeper) NotAliveNow(ctx context.Context, id string) bool {
	return k.notAliveWaiting(ctx, id, false)
}

// notAliveWaiting reports whether worker id is known not alive: remembered
// gone, else shown by the Keeper's shared listing of the GONE workers
// (listedGone; patient: waiting for the next one when one is not due
// now), else read from its record, when this Keeper has not seen it alive
// within the last heartbeat period.
func (k *Keeper) notAliveWaiting(ctx context.Context, id string, patient bool) bool {
	now := k.clk.Now()
	k.gmu.Lock()
	if k.goneLocked(id, now) {
		k.gmu.Unlock()
		return true
	}
	if at, ok := k.aliveSeen[id]; ok && now.Sub(at) < k.cfg.HeartbeatEvery {
		k.gmu.Unlock()
		return false
	}
	k.gmu.Unlock()
	if k.listedGone(ctx, id, now, patient) {
		return true
	}
	if _, gone, ok := k.readWorker(ctx, id); gone || !ok {
		return gone
	}
	k.gmu.Lock()
	k.aliveSeen[id] = k.clk.Now()
	k.gmu.Unlock()
	return false
}

// KnownGone reports whether this Keeper has received, within GoneMemory, a
// read showing worker id DEAD or LEFT: such a worker never comes back. No
// I/O.
func (k *Keeper) KnownGone(id string) bool {
	k.gmu.Lock()
	defer k.gmu.Unlock()
	return k.goneLocked(id, k.clk.Now())
}

// GoneMemory is how long a Keeper remembers a worker it read DEAD or LEFT
// without reading its record again, and MaxGoneRemembered how many it
// remembers. The memory is well below the day an ended record lives
// (schema.EndedRecordTTLSeconds): while a worker is remembered its record
// exists, so Register refuses its id to any other process, and a worker id
// registered again after the record expired is never taken for the old,
// gone one. A missing record is not remembered at all (a worker id that
// never registered, a record long expired, a name in a hand-off request):
// each such check reads again, and a flood of unknown names grows nothing.
const (
	GoneMemory        = time.Hour
	MaxGoneRemembered = 4096
)

// goneLocked reports whether id is remembered gone at now, forgetting it
// when its memory ended. k.gmu is held.
func (k *Keeper) goneLocked(id string, now time.Time) bool {
	at, ok := k.gone[id]
	if ok && now.Sub(at) >= GoneMemory {
		delete(k.gone, id)
		return false
	}
	return ok
}

// readWorker reads worker id's record: gone when it is missing or not
// ALIVE (a DEAD or LEFT one remembered: it never comes back), ok false
// when the read failed.
func (k *Keeper) readWorker(ctx context.Context, id string) (rec WorkerRecord, gone, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	rec, err := k.store.GetWorker(ctx, id)
	switch {
	case errors.Is(err, ErrWorkerNotFound):
		return rec, true, true
	case err != nil:
		return rec, false, false
	case !rec.Alive():
		k.markGone(id)
		return rec, true, true
	}
	return rec, false, true
}

// notTaking reports whether worker id will not take a session reserved
// for it: not alive, or draining (shutting down: it claims nothing more,
// so waiting out the hand-off bound would only keep the session dark).
// Reservations are a liveness matter only, so a stale read costs at most
// the bound.
func (k *Keeper) notTaking(ctx context.Context, id string) bool {
	k.gmu.Lock()
	gone := k.goneLocked(id, k.clk.Now())
	k.gmu.Unlock()
	if gone {
		return true
	}
	rec, gone, ok := k.readWorker(ctx, id)
	return gone || (ok && rec.Draining)
}

// markGone notes that a read showing worker id DEAD or LEFT was received
// now, and returns when the first such read this Keeper remembers was. At
// MaxGoneRemembered it forgets the entries past GoneMemory, then the
// oldest.
func (k *Keeper) markGone(id string) time.Time {
	now := k.clk.Now()
	k.gmu.Lock()
	defer k.gmu.Unlock()
	delete(k.aliveSeen, id)
	if k.goneLocked(id, now) {
		return k.gone[id]
	}
	if len(k.gone) >= MaxGoneRemembered {
		oldest, oldestAt := "", now
		for w, at := range k.gone {
			if now.Sub(at) >= GoneMemory {
				delete(k.gone, w)
			} else if at.Before(oldestAt) || oldest == "" {
				oldest, oldestAt = w, at
			}
		}
		if len(k.gone) >= MaxGoneRemembered {
			delete(k.gone, oldest)
		}
	}
	k.gone[id] = now
	k.goneSeen.Add(1)
	return now
}

// Fleet reads the records of the alive workers (eventually consistent):
// the load and capacity rebalancing works from.
func (k *Keeper) Fleet(ctx context.Context) ([]WorkerRecord, error) {
	ids, err := k.listAlive(ctx)
	if err != nil {
		return nil, err
	}
	return k.records(ctx, ids)
}

// FleetSampleSize bounds the worker records a takeover or a drain reads
// (FleetSample, FleetSampleListed): 64 records are 32 read units
// eventually consistent, one BatchGetItem, and the sessions of a dead
// worker holding 1,000 (1,000,000 over 1,000 workers) spread about 15 to
// each receiver of its sample.
const FleetSampleSize = 64

// FleetSample reads the records of the alive workers that a takeover of
// key's sessions (key a worker declared dead) spreads them over: every
// alive worker's, listed afresh, while the fleet (the membership of this
// Keeper's last refresh) has at most n others; above that, n of them
// (SampleOf: by rendezvous score with key) from that membership, without
// listing. Every worker's takeover reading every alive record is O(N)
// reads each, O(N²) for an AZ's worth of takeovers at once. A worker that
// joined since the last refresh (RefreshEvery) is not in a sample yet.
func (k *Keeper) FleetSample(ctx context.Context, key string, n int) ([]WorkerRecord, error) {
	k.lmu.Lock()
	ids := k.aliveIDs // replaced by a refresh, never modified: others copies it
	k.lmu.Unlock()
	others := k.others(ids, key)
	if len(others) <= n {
		return k.Fleet(ctx)
	}
	return k.records(ctx, SampleOf(key, others, n))
}

// FleetSampleListed is FleetSample from a listing of the alive workers
// made now (their ids: one query of the by_worker_list index) instead of
// the last refresh's membership: what a drain spreads this worker's
// sessions over, as a rolling deploy's replacements registered moments
// before its SIGTERM (ECS stops the old tasks once the new ones are
// healthy) and the membership is up to two refreshes behind.
func (k *Keeper) FleetSampleListed(ctx context.Context, key string, n int) ([]WorkerRecord, error) {
	ids, err := k.listAlive(ctx)
	if err != nil {
		return nil, err
	}
	return k.records(ctx, SampleOf(key, k.others(ids, key), n))
}

// others are ids but key and this worker (a new slice).
func (k *Keeper) others(ids []string, key string) []string {
	return slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == key || id == k.cfg.Owner })
}

// records reads the records of ids (eventually consistent).
func (k *Keeper) records(ctx context.Context, ids []string) ([]WorkerRecord, error) {
	recs, err := k.store.GetWorkers(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("worker records: %w", err)
	}
	return recs, nil
}

// RefreshWorkers reads the alive workers (the fleet summary's membership,
// aliveList) and recomputes the watch targets (Run does it every
// RefreshEvery).
func (k *Keeper) RefreshWorkers(ctx context.Context) error { return k.refreshWorkers(ctx) }

func (k *Keeper) refreshWorkers(ctx context.Context) error {
	listed, err := k.aliveList(ctx)
	if err != nil {
		return err
	}
	alive := AliveView(k.cfg.Owner, listed, k.KnownGone)
	targets := Targets(k.cfg.Owner, alive, k.cfg.Watchers)
	k.lmu.Lock()
	k.alive, k.aliveIDs = len(alive), alive
	k.aliveNow, k.aliveAt = len(alive), k.goneSeen.Load()
	k.targets = targets
	keep := map[string]*watch{}
	for _, t := range targets {
		if w, ok := k.watching[t]; ok {
			keep[t] = w
		} else {
			keep[t] = &watch{}
		}
	}
	k.watching = keep
	k.lmu.Unlock()
	return nil
}

// Targets are the workers this Keeper watches.
func (k *Keeper) Targets() []string {
	k.lmu.Lock()
	defer k.lmu.Unlock()
	return append([]string(nil), k.targets...)
}

// watchPass reads every watched record and declares dead those whose
// counter has not moved for the TTL (DeathAllowedAt).
func (k *Keeper) watchPass(ctx context.Context) {
	for _, t := range k.Targets() {
		rctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
		rec, err := k.store.GetWorker(rctx, t)
		cancel()
		receivedAt := k.clk.Now()
		if errors.Is(err, ErrWorkerNotFound) || (err == nil && !rec.Alive()) {
			k.markGone(t)
			k.unwatch(t)
			continue
		}
		if err != nil {
			// The wait counts only reads that answered: after an outage
			// that also stopped t's heartbeats, the first answer starts a
			// new wait instead of finding t's counter "still" unmoved.
			k.lmu.Lock()
			if w, ok := k.watching[t]; ok {
				*w = watch{}
			}
			k.lmu.Unlock()
			continue
		}
		k.lmu.Lock()
		w, ok := k.watching[t]
		if ok {
			w.observe(rec, receivedAt)
		}
		due := ok && w.deathAllowed(receivedAt, k.cfg.TTL)
		var epoch, seq int64
		if ok {
			epoch, seq = w.epoch, w.seq
		}
		k.scheduleDeathCheckLocked()
		k.lmu.Unlock()
		if !due {
			continue
		}
		k.declareDead(ctx, t, epoch, seq)
	}
}

// declareDead declares worker id dead at the epoch and heartbeat counter
// this Keeper saw unmoved (a watcher's pass, the summarizer's backstop),
// and reports whether it is gone now (declared, by this Keeper or another,
// or its record gone); the takeover of its sessions follows a declaration
// of this Keeper's (Observer.WorkerDied).
func (k *Keeper) declareDead(ctx context.Context, id string, epoch, seq int64) bool {
	rctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	err := k.store.DeclareDead(rctx, id, epoch, seq, k.cfg.Owner, k.clk.Now().UnixMilli())
	cancel()
	if err != nil && !errors.Is(err, ErrWorkerDead) && !errors.Is(err, ErrWorkerNotFound) {
		return false
	}
	k.markGone(id)
	k.unwatch(id)
	if err == nil {
		k.obs.WorkerDied(id)
	}
	return true
}

// deathDue reports (once) whether a watched worker's death became allowed
// by now, so that it is declared within a Tick of that instant.
func (k *Keeper) deathDue(now time.Time) bool {
	k.lmu.Lock()
	defer k.lmu.Unlock()
	if k.deathCheck.IsZero() || now.Before(k.deathCheck) {
		return false
	}
	k.deathCheck = time.Time{}
	return true
}

// scheduleDeathCheckLocked sets deathCheck to the earliest death-allowed
// instant among the watches; the caller holds lmu.
func (k *Keeper) scheduleDeathCheckLocked() {
	var next time.Time
	for _, w := range k.watching {
		if w.firstSeen.IsZero() {
			continue
		}
		if at := DeathAllowedAt(w.firstSeen, k.cfg.TTL, w.ttl); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	k.deathCheck = next
}

func (k *Keeper) unwatch(id string) {
	k.lmu.Lock()
	delete(k.watching, id)
	k.lmu.Unlock()
}
