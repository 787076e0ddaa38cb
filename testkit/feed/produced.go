package feed

import "time"

// ProducedAt is when seq of session is (or will be) produced: t0 +
// seq/Config.Rate, t0 being the session's first connection (the package
// doc), computed as the pump times its writes. A connection live at that
// instant is written seq then; a harness judging a destination reads a
// delivery's lateness against it. False while the session has had no
// connection (no t0 yet).
func (s *Server) ProducedAt(session string, seq int64) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[session]
	if ss == nil || ss.t0.IsZero() {
		return time.Time{}, false
	}
	return ss.t0.Add(s.seqDuration(seq)), true
}
