// A standby's window: the messages its connection read, oldest first,
// bounded by age and bytes and charged to the worker's standby budget, and
// the message fingerprint both a standby and an owner compute.

package session

import (
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/shared/lease"
)

// Window bounds what a standby keeps: messages older than MaxAge (by their
// receive time) and the oldest beyond MaxBytes are evicted, and counted as
// dropped (a takeover would lose them). Zero: no bound of that kind.
type Window struct {
	MaxAge   time.Duration
	MaxBytes int64
}

// Fingerprint is the FNV-1a 64 hash of a message's bytes: the owner's last
// delivered message's (Session.LastFingerprint) and every kept message of a
// standby under seq_mode none (AlignAfter).
func Fingerprint(data []byte) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for _, b := range data {
		h ^= uint64(b)
		h *= prime
	}
	return h
}

// entry is one kept message.
type entry struct {
	at   int64  // receive time, Unix ns
	seq  int64  // lease.NoSeq: none (or seq_mode none)
	fp   uint64 // Fingerprint of data (seq_mode none only)
	typ  websocket.MessageType
	data []byte // the standby's own copy
}

// window is a FIFO of entries (not safe for concurrent use: the standby's
// mu guards it). Every kept entry's bytes are reserved from budget.
type window struct {
	buf     []entry
	head    int   // buf[:head] are gone
	bytes   int64 // of buf[head:], all reserved from budget
	dropped int64 // evicted by the bounds or not kept: a takeover would lose them
	budget  *SwitchBudget
}

func (w *window) len() int { return len(w.buf) - w.head }

// push keeps e under the bounds at now (Unix ns): the aged out and, until
// e fits MaxBytes and the budget, the oldest are evicted; e itself is
// dropped when it cannot fit an empty window.
func (w *window) push(e entry, lim Window, now int64) {
	w.evictAged(lim.MaxAge, now)
	n := int64(len(e.data))
	if lim.MaxBytes > 0 && n > lim.MaxBytes {
		w.dropped++
		return
	}
	for lim.MaxBytes > 0 && w.bytes+n > lim.MaxBytes && w.len() > 0 {
		w.evict()
	}
	for !w.budget.reserve(n) {
		if w.len() == 0 {
			w.dropped++
			return
		}
		w.evict()
	}
	w.buf = append(w.buf, e)
	w.bytes += n
}

// evictAged evicts the entries received more than maxAge before now.
func (w *window) evictAged(maxAge time.Duration, now int64) {
	if maxAge <= 0 {
		return
	}
	for w.len() > 0 && now-w.buf[w.head].at > int64(maxAge) {
		w.evict()
	}
}

// evict drops the oldest entry, counted as dropped.
func (w *window) evict() {
	w.dropped++
	w.pop()
}

// windowKeepCap is the most entries an emptied window keeps room for: a
// steady window (the messages of about a second, the owner's positions
// trimming it every second: at 1 msg/s, the kept one, the next, and the
// one after before the trim moves them to the front) reuses it; a larger
// array, grown by a burst or by the time before the owner's first
// positions, goes. 4 entries are 224 B, a size class (8 were 448 B: every
// standby kept it).
const windowKeepCap = 4

// pop forgets the oldest entry and gives its bytes back. The array holds
// at most about twice the kept entries (or windowKeepCap): the kept ones
// move to the front once the gone ones outnumber them (each entry moves
// at most once per pass through the array), and an array four times
// larger than they need is replaced by one that fits.
func (w *window) pop() {
	n := int64(len(w.buf[w.head].data))
	w.buf[w.head] = entry{}
	w.head++
	w.bytes -= n
	w.budget.release(n)
	kept := len(w.buf) - w.head
	switch {
	case kept == 0 && cap(w.buf) > windowKeepCap:
		w.buf, w.head = nil, 0
	case kept == 0:
		w.buf, w.head = w.buf[:0], 0
	case w.head <= kept:
	case cap(w.buf) > windowKeepCap && 4*kept <= cap(w.buf):
		buf := make([]entry, kept, max(2*kept, windowKeepCap))
		copy(buf, w.buf[w.head:])
		w.buf, w.head = buf, 0
	default:
		k := copy(w.buf, w.buf[w.head:])
		clear(w.buf[k:])
		w.buf, w.head = w.buf[:k], 0
	}
}

// trim forgets the entries the owner delivered (seq <= last) and the
// seq-less ones before them; not dropped: they were delivered.
func (w *window) trim(last int64) {
	if last == lease.NoSeq {
		return
	}
	drop := -1
	for j := w.head; j < len(w.buf); j++ {
		if sq := w.buf[j].seq; sq != lease.NoSeq {
			if sq > last {
				break
			}
			drop = j - w.head
		}
	}
	for ; drop >= 0; drop-- {
		w.pop()
	}
}

// alignAfter forgets the entries up to and including the earliest whose
// fingerprint is fp; false (nothing forgotten) when none has it.
func (w *window) alignAfter(fp uint64) bool {
	for j := w.head; j < len(w.buf); j++ {
		if w.buf[j].fp == fp {
			for k := j - w.head; k >= 0; k-- {
				w.pop()
			}
			return true
		}
	}
	return false
}

// takeAll hands every entry over (an adoption) and gives their bytes back
// to the budget: the adopting session delivers them at once.
func (w *window) takeAll() []entry {
	out := w.buf[w.head:]
	w.budget.release(w.bytes)
	w.buf, w.head, w.bytes = nil, 0, 0
	return out
}

// release gives the window's bytes back and forgets it (the standby ended).
func (w *window) release() {
	w.budget.release(w.bytes)
	w.buf, w.head, w.bytes = nil, 0, 0
}

// lastSeq is the seq of the newest entry that has one (lease.NoSeq: none).
func (w *window) lastSeq() int64 {
	for j := len(w.buf) - 1; j >= w.head; j-- {
		if w.buf[j].seq != lease.NoSeq {
			return w.buf[j].seq
		}
	}
	return lease.NoSeq
}
