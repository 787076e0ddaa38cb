package batch

import (
	"fmt"
	"time"
)

// This file owns packing: grouping queued messages of one pack group (one
// session's, or many sessions') into one wire record (a pack) for a Sender
// that is a Packer, and the estimate of the packs the queued messages make.

// Packer is implemented by a Sender whose wire record can carry several
// messages (a pack): consecutive messages of one tenure of each session in
// it, of one or many sessions.
type Packer interface {
	// PackLimit is the largest Size a pack may have; 0 turns packing off.
	PackLimit() int
	// PackGrow is the Size of a pack of size bytes once r is added to it
	// (size 0: the empty pack, so PackGrow(0, r) is the size of a pack of r alone).
	PackGrow(size int, r Record) int
	// PackGroup is the group of r: records of equal groups may share a
	// pack. r.ConnectionID keeps packs to one session; "" lets any
	// sessions share. A session's records are of one group.
	PackGroup(r Record) string
	// Pack builds one wire record from recs (len >= 1, of one group): each
	// session's records consecutive, in order and of one Epoch. A pack of
	// one message may be the message's own record.
	Pack(recs []Record) (Record, error)
}

// pack is one wire record of a request: the entries it carries, each
// session's in order. A plain pack is its one entry's own record. A pack of
// one session that failed is pinned to its entries (entry.pinned) and sent
// again as the same wire record; a pack of several sessions is not: its
// entries go back to their sessions' queues and are packed again.
type pack struct {
	entries []*entry
	size    int     // what it counts against Config.MaxBytes (PackGrow, or the entry's size when plain)
	plain   bool    // send entries[0].rec as it is
	wire    *Record // the wire record once built (a retry sends it again)
	at      int     // its place in the request being gathered (nextLocked)
}

// plainPack is e's own record as a wire record.
func plainPack(e *entry) *pack { return &pack{entries: []*entry{e}, size: e.size, plain: true} }

// packLimit is the bound of a pack: the Packer's, within a record and a
// request (0: no packing).
func packLimit(snd Sender, cfg Config, l Limits) (Packer, int) {
	p, ok := snd.(Packer)
	if !ok || p.PackLimit() <= 0 {
		return nil, 0
	}
	return p, min(p.PackLimit(), l.MaxRecordBytes, cfg.MaxBytes)
}

// startPackLocked is the wire record e begins: a pack that later entries of
// its group may join, or e's own record (packing off, e sent alone or
// unpackable, or e alone larger than a pack may be).
func (b *Batcher) startPackLocked(e *entry) *pack {
	if b.packer == nil || e.alone || e.unpacked {
		return plainPack(e)
	}
	size := b.packer.PackGrow(0, e.rec)
	if size > b.packLimit {
		return plainPack(e)
	}
	return &pack{entries: []*entry{e}, size: size}
}

// growPackLocked adds e to p when the pack stays within its bound and the
// request within room bytes more; it returns the bytes p grew by.
func (b *Batcher) growPackLocked(p *pack, e *entry, room int) (int, bool) {
	if p == nil || p.plain || e.alone || e.unpacked || e.pinned != nil {
		return 0, false
	}
	size := b.packer.PackGrow(p.size, e.rec)
	if size > b.packLimit || size-p.size > room {
		return 0, false
	}
	grew := size - p.size
	p.entries = append(p.entries, e)
	p.size = size
	return grew, true
}

// pinnedAt is the pack q[0] is pinned to, and whether it lies whole at q's
// head, in order; a pack that does not (it cannot, but a retry must never
// carry other messages under the same identity) is unpinned and its
// entries go out as plain records.
func pinnedAt(q []*entry) (*pack, bool) {
	p := q[0].pinned
	ok := len(q) >= len(p.entries)
	for i := 0; ok && i < len(p.entries); i++ {
		ok = q[i] == p.entries[i]
	}
	if !ok {
		for _, e := range p.entries {
			e.pinned, e.unpacked = nil, true
		}
	}
	return p, ok
}

// wireRecord builds p's wire record (once: a retry reuses it). An error:
// the pack is not fit to send (Pack failed, or built a record over the
// bound); its entries must go out as plain records.
func (b *Batcher) wireRecord(p *pack) (Record, error) {
	if p.wire != nil {
		return *p.wire, nil
	}
	if p.plain {
		return p.entries[0].rec, nil
	}
	recs := make([]Record, len(p.entries))
	for i, e := range p.entries {
		recs[i] = e.rec
	}
	r, err := b.packer.Pack(recs)
	if err == nil && b.snd.Size(r) > b.packLimit && (len(recs) > 1 || b.snd.Size(r) > b.limits.MaxRecordBytes) {
		err = errPackTooLarge{size: b.snd.Size(r), limit: b.packLimit}
	}
	if err != nil {
		return Record{}, err
	}
	p.wire = &r
	return r, nil
}

type errPackTooLarge struct{ size, limit int }

func (e errPackTooLarge) Error() string {
	return fmt.Sprintf("pack encoded to %d bytes, over its bound of %d", e.size, e.limit)
}

// sessions are the sessions whose entries p carries, in the order of p.
func (p *pack) sessions() []string {
	var ids []string
	for _, e := range p.entries {
		if n := len(ids); n == 0 || ids[n-1] != e.rec.ConnectionID {
			ids = append(ids, e.rec.ConnectionID)
		}
	}
	return ids
}

// joinable is the open pack of e's group (open) when e's session may join
// it after its entries so far in the request, the last of them in mine
// (nil: none yet): a later wire record than mine (a session's entries never
// go to an earlier record of the request), and on an ordered sink mine
// itself once the session has one (one wire record per session).
func (b *Batcher) joinable(open, mine *pack) *pack {
	if open == nil || mine == nil {
		return open
	}
	if open.at < mine.at || (b.onePack && open != mine) {
		return nil
	}
	return open
}

// packsOf is how many packs of at most limit bytes n bytes make (an
// estimate: it leaves out the packs' own bytes).
func packsOf(n, limit int) int { return (n + limit - 1) / limit }

// countGroupLocked adds e's bytes to (sign 1) or takes them from (sign -1)
// its group's queued bytes, and keeps queuedPacks, the packs the queued
// entries would make, current.
func (b *Batcher) countGroupLocked(e *entry, sign int) {
	if b.packer == nil {
		return
	}
	n := b.groupBytes[e.group]
	b.queuedPacks -= packsOf(n, b.packLimit)
	n += sign * e.size
	b.queuedPacks += packsOf(n, b.packLimit)
	if n == 0 {
		delete(b.groupBytes, e.group)
		return
	}
	b.groupBytes[e.group] = n
}

// The pack wait (Config.PackWait). A message whose pack group is shared
// with other sessions may wait longer than MaxDelay for their messages to
// fill its pack, in proportion to how rarely its own session sends: a
// quarter of the session's smoothed time between messages, at most
// PackWait, never less than MaxDelay. A session at 1 message a second
// waits PackWait (40 ms: 4 % of its spacing); one at 50 a second waits
// MaxDelay, as without packing; a session's first message waits MaxDelay.
// The request goes when its first entry is due and carries every queued
// message, due or not, so the messages of slow sessions share packs with
// what the fast ones send meanwhile. A pack group of one session waits
// MaxDelay only: no other session's message can join it.
const (
	// DefaultPackWait bounds the wait by default: what it adds to the
	// delivery latency stays within the 50 ms budget at 1 message a
	// second (issue 38's goal), and the KPL's RecordMaxBufferedTime
	// default is 100 ms.
	DefaultPackWait = 40 * time.Millisecond
	// MaxPackWait bounds the setting.
	MaxPackWait = time.Second
	// gapSmoothing: the gap is an exponential average, each new gap
	// weighing 1/gapSmoothing.
	gapSmoothing = 8
)

// pace is a session's message spacing: when its last message was queued
// and the smoothed time between its messages. It outlives the session's
// stream, which goes once nothing of it is queued or in flight (a session
// at 1 message a second has none most of the time).
type pace struct {
	last time.Time
	gap  time.Duration
}

// paceForget: a session quiet for this long is forgotten (its next message
// waits MaxDelay, as a first one does); the paces are swept as often.
const paceForget = 10 * time.Second

// waitLocked is how long e, queued at now, waits for a request (the pack
// wait above); it updates its session's pace.
func (b *Batcher) waitLocked(e *entry, now time.Time) time.Duration {
	if b.packer == nil || b.cfg.PackWait <= b.cfg.MaxDelay || e.group == e.rec.ConnectionID {
		return b.cfg.MaxDelay
	}
	if b.paces == nil {
		b.paces, b.sweptAt = map[string]pace{}, now
	}
	if now.Sub(b.sweptAt) >= paceForget {
		for id, p := range b.paces {
			if now.Sub(p.last) >= paceForget {
				delete(b.paces, id)
			}
		}
		b.sweptAt = now
	}
	id := e.rec.ConnectionID
	p, known := b.paces[id]
	if known {
		gap := now.Sub(p.last)
		if p.gap == 0 {
			p.gap = gap
		} else {
			p.gap += (gap - p.gap) / gapSmoothing
		}
	}
	p.last = now
	b.paces[id] = p
	if p.gap == 0 {
		return b.cfg.MaxDelay
	}
	return max(b.cfg.MaxDelay, min(b.cfg.PackWait, p.gap/4))
}

// A full pack goes at once. On an unordered sink that packs (an SQS
// standard queue), a request is due as soon as the sendable messages of a
// pack group fill a pack, whatever their wait: SQS bills a request per 64
// KB chunk of its payload, so a full pack costs least per message, and
// waiting longer only adds latency. (On an ordered sink a session with a
// request in flight holds its group's messages back, so a full group
// there says nothing about what may go now; it waits as it did.)

// packFilledLocked reports whether the queued bytes, size of them just
// added, crossed a pack's bound: a pack may be ready, so the dispatcher
// looks (packReadyLocked).
func (b *Batcher) packFilledLocked(size int) bool {
	if b.packer == nil || b.snd.Ordered() {
		return false
	}
	return b.queuedBytes/b.packLimit > (b.queuedBytes-size)/b.packLimit
}

// packReadyLocked reports whether, on an unordered sink that packs, the
// messages that may be sent now of one pack group fill a pack.
func (b *Batcher) packReadyLocked(now time.Time) bool {
	if b.packer == nil || b.snd.Ordered() || b.queuedBytes < b.packLimit {
		return false
	}
	if b.ready == nil {
		b.ready = map[string]int{}
	}
	defer clear(b.ready)
	for _, st := range b.active {
		if !b.sendable(st, now) {
			continue
		}
		for _, e := range st.queue {
			if e.notBefore.After(now) || e.alone || e.unpacked || e.pinned != nil || e.t != st.queue[0].t {
				break
			}
			n := b.ready[e.group] + e.size
			if n >= b.packLimit {
				return true
			}
			b.ready[e.group] = n
		}
	}
	return false
}
