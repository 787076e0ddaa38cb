// The checkpoint queue: the held tenures ordered by when their periodic
// checkpoint is next due, so that the Keeper's scan visits only the due
// ones instead of every tenure every scan.

package lease

import "time"

// ckptEntry is one tenure's place in the queue: at is when the scan looks
// at it next, gen which of its pushes this is (only the latest counts).
type ckptEntry struct {
	at  time.Time
	h   *Held
	gen uint64
}

// ckptQueue is a min-heap of ckptEntry by at (under the Keeper's mu). A
// tenure may have stale entries (pushed again since, forgotten, replaced):
// the scan drops them as they come up, so one push is all a caller does.
// Its push and pop are container/heap's sift up and down on the entries
// themselves: through heap.Interface every entry was boxed into an
// interface twice, 96 B of garbage per checkpoint (TestCheckpointQueueAllocatesNothing).
type ckptQueue []ckptEntry

// push adds e.
func (q *ckptQueue) push(e ckptEntry) {
	*q = append(*q, e)
	h := *q
	for j := len(h) - 1; j > 0; {
		i := (j - 1) / 2 // parent
		if !h[j].at.Before(h[i].at) {
			break
		}
		h[i], h[j] = h[j], h[i]
		j = i
	}
}

// pop removes and returns the earliest entry (the queue is not empty).
func (q *ckptQueue) pop() ckptEntry {
	h := *q
	n := len(h) - 1
	e := h[0]
	h[0] = h[n]
	h[n] = ckptEntry{} // no reference kept to a popped tenure
	h = h[:n]
	for i := 0; ; {
		j := 2*i + 1 // left child
		if j >= n {
			break
		}
		if r := j + 1; r < n && h[r].at.Before(h[j].at) {
			j = r
		}
		if !h[j].at.Before(h[i].at) {
			break
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
	*q = h
	return e
}

// queueLocked (under k.mu) makes at the time the scan next looks at h,
// superseding its earlier entries.
func (k *Keeper) queueLocked(h *Held, at time.Time) {
	h.qgen++
	k.ckpts.push(ckptEntry{at: at, h: h, gen: h.qgen})
}

// queue is queueLocked for a caller without k.mu.
func (k *Keeper) queue(h *Held, at time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.held[h.ID()] == h {
		k.queueLocked(h, at)
	}
}

// dueLocked (under k.mu) appends to out the tenures the scan looks at by
// now: those still held whose latest entry came up. The caller looks at
// each and queues it again (a checkpoint started, or not yet due).
func (k *Keeper) dueLocked(out []*Held, now time.Time) []*Held {
	for len(k.ckpts) > 0 && !now.Before(k.ckpts[0].at) {
		e := k.ckpts.pop()
		if e.gen != e.h.qgen || k.held[e.h.ID()] != e.h {
			continue // superseded, or no longer held
		}
		out = append(out, e.h)
	}
	return out
}
