package memstore

import "github.com/wsfleet/wsfleet/shared/lease"

// Raw access: what the store holds under one key, copied out and written
// back whole. A store that wraps this one (testkit/simddb) reads the
// images a write turned into what and, when its model refuses the write
// after the rules applied it (throttled), puts them back.

// Checkpoint is a session's checkpoint item as stored: the tenure fenced
// on it and its last_seq (lease.NoSeq: none).
type Checkpoint struct {
	Owner string
	Epoch int64
	Seq   int64
}

// Session is a copy of session id's item (its LastSeq as stored by Put) and
// of its checkpoint item; nil for one that is absent.
func (s *Store) Session(id string) (*lease.Item, *Checkpoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var it *lease.Item
	if p := s.items[id]; p != nil {
		c := clone(p)
		it = &c
	}
	var ck *Checkpoint
	if p := s.ckpts[id]; p != nil {
		ck = &Checkpoint{Owner: p.owner, Epoch: p.epoch, Seq: p.seq}
	}
	return it, ck
}

// Worker is a copy of worker id's record (nil: absent).
func (s *Store) Worker(id string) *lease.WorkerRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.workers[id]; r != nil {
		c := cloneRec(r)
		return &c
	}
	return nil
}

// RestoreSession writes session id's item and checkpoint item back as
// Session returned them (nil: removed).
func (s *Store) RestoreSession(id string, it *lease.Item, ck *Checkpoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if it == nil {
		delete(s.items, id)
	} else {
		c := clone(it)
		s.items[id] = &c
	}
	if ck == nil {
		delete(s.ckpts, id)
	} else {
		s.ckpts[id] = &checkpoint{owner: ck.Owner, epoch: ck.Epoch, seq: ck.Seq}
	}
	s.recordLocked()
}

// RestoreWorker writes worker id's record back as Worker returned it (nil:
// removed).
func (s *Store) RestoreWorker(id string, r *lease.WorkerRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r == nil {
		delete(s.workers, id)
	} else {
		c := cloneRec(r)
		s.workers[id] = &c
	}
	s.recordLocked()
}
