package session

// What an owner's session keeps for its standby (made only for a session
// with one): the fingerprints of what it delivered and what the destination
// acknowledged, which align a promoted standby's window with the owner's
// last checkpoint.

import (
	"sync"
	"sync/atomic"
)

// sessionExt is what only some sessions keep (Session.ext).
type sessionExt struct {
	// standby: for a standby's own session (held nil), the standby it
	// dials for; for an adopting one, the standby it adopts (Run's
	// goroutine only, until the adoption).
	standby *Standby
	// fingerprints: offer keeps lastFP, the Fingerprint of the last
	// message delivered, and ackedFP that of the last one the sink
	// acknowledged (a pipelined sink's acknowledgements arrive later:
	// inflight holds the fingerprints of the messages submitted and not
	// acknowledged yet, by seq, under mu).
	fingerprints bool
	lastFP       atomic.Uint64
	ackedFP      atomic.Uint64
	mu           sync.Mutex
	inflight     []seqFP
}

// seqFP is a submitted message's seq and fingerprint.
type seqFP struct {
	seq int64
	fp  uint64
}

// delivered records the fingerprint of the message just delivered (seq:
// its seq; pipelined: the sink acknowledges it later, through acked).
func (x *sessionExt) delivered(seq int64, fp uint64, pipelined bool) {
	x.lastFP.Store(fp)
	if !pipelined {
		x.ackedFP.Store(fp)
		return
	}
	x.mu.Lock()
	x.inflight = append(x.inflight, seqFP{seq, fp})
	x.mu.Unlock()
}

// acked follows the sink's acknowledgement of every message up to seq.
func (x *sessionExt) acked(seq int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	for n < len(x.inflight) && x.inflight[n].seq <= seq {
		n++
	}
	if n == 0 {
		return
	}
	x.ackedFP.Store(x.inflight[n-1].fp)
	x.inflight = append(x.inflight[:0], x.inflight[n:]...)
}

// AckedFingerprint is the Fingerprint of the last message the sink
// acknowledged (0: none, or the session was not made with Fingerprints):
// the position an owner tells its standby (everything up to it is at the
// destination, so a standby's window may forget it).
func (s *Session) AckedFingerprint() uint64 {
	if s.ext == nil {
		return 0
	}
	return s.ext.ackedFP.Load()
}

// extension is s.ext, made when missing (before Run only).
func (s *Session) extension() *sessionExt {
	if s.ext == nil {
		s.ext = &sessionExt{}
	}
	return s.ext
}

// LastFingerprint is the Fingerprint of the last message the session
// delivered (0: none, or the session was not made with Fingerprints).
func (s *Session) LastFingerprint() uint64 {
	if s.ext == nil {
		return 0
	}
	return s.ext.lastFP.Load()
}
