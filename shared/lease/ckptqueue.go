// The checkpoint queue: the held tenures ordered by when their periodic
// checkpoint is next due, so that the Keeper's scan visits only the due
// ones instead of every tenure every scan.

package lease

import (
	"container/heap"
	"time"
)

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
type ckptQueue []ckptEntry

func (q ckptQueue) Len() int           { return len(q) }
func (q ckptQueue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q ckptQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *ckptQueue) Push(x any)        { *q = append(*q, x.(ckptEntry)) }
func (q *ckptQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = ckptEntry{} // no reference kept to a popped tenure
	*q = old[:len(old)-1]
	return e
}

// queueLocked (under k.mu) makes at the time the scan next looks at h,
// superseding its earlier entries.
func (k *Keeper) queueLocked(h *Held, at time.Time) {
	h.qgen++
	heap.Push(&k.ckpts, ckptEntry{at: at, h: h, gen: h.qgen})
}

// queue is queueLocked for a caller without k.mu.
func (k *Keeper) queue(h *Held, at time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.held[h.ID()] == h {
		k.queueLocked(h, at)
	}
}

// dueLocked (under k.mu) pops the tenures the scan looks at by now: those
// still held whose latest entry came up. The caller looks at each and
// queues it again (a checkpoint started, or not yet due).
func (k *Keeper) dueLocked(now time.Time) []*Held {
	var out []*Held
	for len(k.ckpts) > 0 && !now.Before(k.ckpts[0].at) {
		e := heap.Pop(&k.ckpts).(ckptEntry)
		if e.gen != e.h.qgen || k.held[e.h.ID()] != e.h {
			continue // superseded, or no longer held
		}
		out = append(out, e.h)
	}
	return out
}
