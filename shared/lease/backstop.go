package lease

import (
	"context"
	"sync"
	"time"
)

// The summarizer's backstop: the fleet summary's writer reads every alive
// worker's record once a refresh (summarize), so it also sees every
// heartbeat counter. It declares dead a worker whose counter it saw
// unmoved for BackstopAllowedAt (a refresh after the watchers may), with
// the same conditional write the watchers use (DeclareDead on the epoch
// and counter it saw: refused once the counter moved). Without it, a
// worker whose watchers died with it (a deploy's SIGKILLs at the stop
// timeout, an AZ) was declared only after one of them was, a TTL and a
// listing refresh later per link of the chain (the fleet simulator's
// TestDeployKilledAtStopTimeout: 25 s where a crash takes 10; docs/worker.md).
// It costs no read: the records are the summary's.
//
// Like a watcher's, its wait counts only reads that answered, one after
// the other: a failed read (of the head or of the records: an outage,
// which stops the heartbeats too) or a pass more than half a refresh late
// (a refresh without a pass: it was not the summarizer, or a read failed)
// starts every wait again, so that the workers are not all declared dead
// at the first read after an outage, before their first heartbeat.
type backstopState struct {
	mu       sync.Mutex // a leaf lock
	seen     map[string]*watch
	lastPass time.Time // the last read that answered (monotonic)
}

// backstopForget starts every wait again (a read of the records failed).
func (k *Keeper) backstopForget() {
	k.bs.mu.Lock()
	k.bs.seen, k.bs.lastPass = nil, time.Time{}
	k.bs.mu.Unlock()
}

// backstopDue records the summarizer's read of the alive records alive
// (received at receivedAt; this worker's own left out) and returns the
// workers that may be declared dead now, with the epoch and counter seen.
// Workers no longer listed are forgotten.
func (k *Keeper) backstopDue(alive []WorkerRecord, receivedAt time.Time) []watchedDue {
	k.bs.mu.Lock()
	defer k.bs.mu.Unlock()
	if k.bs.seen == nil || receivedAt.Sub(k.bs.lastPass) > k.cfg.RefreshEvery*3/2 {
		k.bs.seen = map[string]*watch{}
	}
	k.bs.lastPass = receivedAt
	listed := make(map[string]bool, len(alive))
	var due []watchedDue
	for _, r := range alive {
		if r.ID == k.cfg.Owner {
			continue
		}
		listed[r.ID] = true
		w := k.bs.seen[r.ID]
		if w == nil {
			w = &watch{}
			k.bs.seen[r.ID] = w
		}
		w.observe(r, receivedAt)
		if !receivedAt.Before(BackstopAllowedAt(w.firstSeen, k.cfg.TTL, w.ttl, k.cfg.RefreshEvery)) {
			due = append(due, watchedDue{id: r.ID, epoch: w.epoch, seq: w.seq})
		}
	}
	for id := range k.bs.seen {
		if !listed[id] {
			delete(k.bs.seen, id)
		}
	}
	return due
}

// watchedDue is a worker whose death is allowed, at the epoch and counter
// its observer saw.
type watchedDue struct {
	id         string
	epoch, seq int64
}

// backstopDeclare declares dead each of due, as a watcher does
// (declareDead).
func (k *Keeper) backstopDeclare(ctx context.Context, due []watchedDue) {
	for _, d := range due {
		if k.declareDead(ctx, d.id, d.epoch, d.seq) {
			k.bs.mu.Lock()
			delete(k.bs.seen, d.id)
			k.bs.mu.Unlock()
		}
	}
}
