// What the proxy saw: its counters (Stats) and, per record, when the
// destination's answer that stored it arrived (Stamps) or that it was
// refused for good (PermanentlyRefused).

package sinkfault

import "time"

// Stats count what the proxy did.
type Stats struct {
	Requests      int64 `json:"requests"`       // sink requests seen
	Forwarded     int64 `json:"forwarded"`      // sink requests forwarded
	Entries       int64 `json:"entries"`        // messages stored (successful answers): each of an SQS pack or an aggregated Kinesis record
	Delayed       int64 `json:"delayed"`        // requests held before forwarding (latency)
	AnswerHeld    int64 `json:"answer_held"`    // answers held (latency)
	Frozen        int64 `json:"frozen"`         // requests held by a freeze
	Abandoned     int64 `json:"abandoned"`      // held requests whose client gave up (never forwarded)
	Transient     int64 `json:"transient"`      // entries refused transiently
	Permanent     int64 `json:"permanent"`      // entries refused permanently
	PermanentReqs int64 `json:"permanent_reqs"` // whole requests refused permanently (kinesis)
	Other         int64 `json:"other"`          // requests that are not the sink's
	UpstreamErrs  int64 `json:"upstream_errors"`
}

// Stats is a copy of the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Stamps is, per record, the times (UnixNano, the harness's clock) the
// proxy received a successful answer of the destination that stored it.
func (p *Proxy) Stamps() map[Key][]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[Key][]int64, len(p.stamps))
	for k, v := range p.stamps {
		out[k] = append([]int64(nil), v...)
	}
	return out
}

// PermanentlyRefused lists the records refused permanently (at every
// attempt). A Kinesis record refused only because it shared a request with
// one is not among them: the request's 400 does not say which record it
// refused, so the worker must send the entries again alone before it gives
// one up.
func (p *Proxy) PermanentlyRefused() []Key {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Key, 0, len(p.permanent))
	for k := range p.permanent {
		out = append(out, k)
	}
	return out
}

func (p *Proxy) count(f func(s *Stats)) {
	p.mu.Lock()
	f(&p.stats)
	p.mu.Unlock()
}

func (p *Proxy) stamp(keys []Key) {
	now := time.Now().UnixNano()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range keys {
		p.stamps[k] = append(p.stamps[k], now)
	}
	p.stats.Entries += int64(len(keys))
}
