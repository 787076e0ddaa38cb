package memstore

import "github.com/wsfleet/wsfleet/shared/lease"

// Raw access: what the store holds under one key, copied out and written
// back whole. A store that wraps this one (testkit/simddb) reads the
// images a write turned into what and, when its model refuses the write
// after the rules applied it (throttled), puts them back.

// Session is a copy of session id's item as stored (its LastSeq the
// checkpoint, last_seq, not the resume point); nil when absent.
func (s *Store) Session(id string) *lease.Item {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.items[id]; p != nil {
		c := clone(p)
		return &c
	}
	return nil
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

// RestoreSession writes session id's item back as Session returned it
// (nil: removed).
func (s *Store) RestoreSession(id string, it *lease.Item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if it == nil {
		delete(s.items, id)
	} else {
		c := clone(it)
		s.items[id] = &c
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
