package simddb

import (
	"container/heap"
	"sort"
	"time"

	"github.com/wsfleet/wsfleet/testkit/ddbrules"
)

// Index lag. Every global secondary index has a view of its own: the
// entries it shows, and the entry images on their way to it. A write that
// changes an item's entry in an index sends the new image (nil: the item
// left the index) to that index's view, due after a lag drawn for that
// index and item (Config.Lag), at least the index's lag episode while one
// is on, plus Config.ThrottledLag while the index has been throttled within
// Config.ThrottledFor: an index whose writes are throttled falls behind the
// others. Per item and index the images arrive in the order of the writes
// (an image is never due before an earlier one of the same item). A read
// of the index (Query) first takes in every image due by then; the base
// table's reads (Get, GetWorker, GetWorkers) are answered from the table.

type version struct {
	at    time.Time
	seq   uint64
	pk    string
	entry ddbrules.Item // nil: out of the index
	value string        // the entry's index key value (canonical)
}

type versionHeap []*version

func (h versionHeap) Len() int { return len(h) }
func (h versionHeap) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].seq < h[j].seq
	}
	return h[i].at.Before(h[j].at)
}
func (h versionHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *versionHeap) Push(x any)   { *h = append(*h, x.(*version)) }
func (h *versionHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type view struct {
	ix      *ddbrules.Index
	due     map[string]time.Time // per item: the latest time an image of it is due
	pending versionHeap
	byValue map[string]map[string]ddbrules.Item // key value → Pk → entry
	valueOf map[string]string                   // Pk → its entry's key value
	seq     uint64

	episodeLag   time.Duration
	episodeUntil time.Time
	throttledAt  time.Time // the last time a write was throttled on this index
}

func newView(ix *ddbrules.Index) *view {
	return &view{ix: ix, due: map[string]time.Time{}, byValue: map[string]map[string]ddbrules.Item{}, valueOf: map[string]string{}}
}

// send schedules pk's new entry (nil: gone) at at (no earlier than the
// item's images before it).
func (v *view) send(pk string, entry ddbrules.Item, value string, at time.Time) {
	if d, ok := v.due[pk]; ok && d.After(at) {
		at = d
	}
	v.due[pk] = at
	v.seq++
	heap.Push(&v.pending, &version{at: at, seq: v.seq, pk: pk, entry: entry, value: value})
}

// catchUp takes in the images due by now.
func (v *view) catchUp(now time.Time) {
	for len(v.pending) > 0 && !v.pending[0].at.After(now) {
		x := heap.Pop(&v.pending).(*version)
		if old, ok := v.valueOf[x.pk]; ok {
			delete(v.byValue[old], x.pk)
			if len(v.byValue[old]) == 0 {
				delete(v.byValue, old)
			}
			delete(v.valueOf, x.pk)
		}
		if x.entry != nil {
			m := v.byValue[x.value]
			if m == nil {
				m = map[string]ddbrules.Item{}
				v.byValue[x.value] = m
			}
			m[x.pk] = x.entry
			v.valueOf[x.pk] = x.value
		}
		if d, ok := v.due[x.pk]; ok && !d.After(x.at) {
			delete(v.due, x.pk)
		}
	}
}

// entries are the entries under key value (canonical) as the index shows
// them at now, in Pk order.
func (v *view) entries(now time.Time, value string) []ddbrules.Item {
	v.catchUp(now)
	m := v.byValue[value]
	pks := make([]string, 0, len(m))
	for pk := range m {
		pks = append(pks, pk)
	}
	sort.Strings(pks)
	out := make([]ddbrules.Item, len(pks))
	for i, pk := range pks {
		out[i] = m[pk]
	}
	return out
}

// pendingCount is how many images wait to reach the view.
func (v *view) pendingCount() int { return len(v.pending) }
