// The faults and their draws: latency spikes, refusals and freezes as the
// harness sets them, each sink request's plan drawn from them, and the holds
// (a freeze, a latency) before a request is forwarded or its answer given.

package sinkfault

import (
	"context"
	"slices"
	"time"
)

// Latency is a latency spike: each sink request is delayed with
// probability Share by a duration drawn in [Min, Max]; with probability
// AnswerShare (of the delayed ones) the answer is held instead of the
// request (the destination stores the entries at once, the worker hears
// late: a timeout whose outcome is success).
type Latency struct {
	Share       float64
	Min, Max    time.Duration
	AnswerShare float64
}

// Refuse refuses entries: each entry of a sink request is refused with
// probability Share; a refused entry is permanent with probability
// Permanent (a permanently refused record is refused at every attempt,
// as a real permanent error is), transient otherwise.
type Refuse struct {
	Share     float64
	Permanent float64
}

// SetLatency sets (zero value: clears) the latency spikes.
func (p *Proxy) SetLatency(l Latency) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = l
}

// SetRefuse sets (zero value: clears) the refusals. Records already
// refused permanently stay refused.
func (p *Proxy) SetRefuse(r Refuse) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = r
}

// Freeze holds every sink request (of the given workers only, when any are
// named) until Thaw.
func (p *Proxy) Freeze(workers ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.frozen {
		p.thaw = make(chan struct{})
	}
	p.frozen = true
	for _, w := range workers {
		p.frozenFor[w] = true
	}
}

// Thaw forwards held requests (those whose client still waits) and ends the
// freeze.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen {
		close(p.thaw)
	}
	p.frozen = false
	clear(p.frozenFor)
}

// Clear lifts every fault.
func (p *Proxy) Clear() {
	p.SetLatency(Latency{})
	p.SetRefuse(Refuse{})
	p.Thaw()
}

// plan is what the faults do to one sink request.
type plan struct {
	holdReq, holdAnswer time.Duration
	refused             map[int]refusal // entry index → refusal
}

type refusal struct{ permanent bool }

// draw decides a request's latency and each entry's refusal; an entry
// (an SQS pack) holds the keys of every record in it: it is refused
// permanently at every attempt once one of them was, and a permanent
// refusal marks all of them.
func (p *Proxy) draw(entries [][]Key, perRecordPermanent bool) plan {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Requests++
	var pl plan
	l := p.latency
	if l.Share > 0 && p.rng.Float64() < l.Share {
		d := l.Min
		if l.Max > l.Min {
			d += time.Duration(p.rng.Int64N(int64(l.Max - l.Min)))
		}
		if p.rng.Float64() < l.AnswerShare {
			pl.holdAnswer = d
			p.stats.AnswerHeld++
		} else {
			pl.holdReq = d
			p.stats.Delayed++
		}
	}
	pl.refused = map[int]refusal{}
	rf := p.refuse
	for i, keys := range entries {
		if slices.ContainsFunc(keys, func(k Key) bool { return p.permanent[permanentKey(k)] }) {
			pl.refused[i] = refusal{permanent: true}
			continue
		}
		if rf.Share <= 0 || p.rng.Float64() >= rf.Share {
			continue
		}
		perm := perRecordPermanent && rf.Permanent > 0 && p.rng.Float64() < rf.Permanent
		if perm {
			for _, k := range keys {
				p.permanent[permanentKey(k)] = true
			}
		}
		pl.refused[i] = refusal{permanent: perm}
	}
	return pl
}

// frozenNow reports whether a request of worker is held by a freeze, and
// the channel closed at the thaw.
func (p *Proxy) frozenNow(worker string) (bool, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.frozen {
		return false, nil
	}
	return len(p.frozenFor) == 0 || p.frozenFor[worker], p.thaw
}

// hold holds a request before it is forwarded: by a freeze (until thawed)
// and by its planned latency. It returns false when the client gave up
// meanwhile (the request is then never forwarded).
func (p *Proxy) hold(ctx context.Context, worker string, d time.Duration) bool {
	for {
		frozen, thaw := p.frozenNow(worker)
		if !frozen {
			break
		}
		p.count(func(s *Stats) { s.Frozen++ })
		select {
		case <-thaw:
		case <-ctx.Done():
			p.count(func(s *Stats) { s.Abandoned++ })
			return false
		}
	}
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		p.count(func(s *Stats) { s.Abandoned++ })
		return false
	}
}

// waitAnswer holds an answer for d (the client may be gone: nothing to do
// then).
func waitAnswer(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
