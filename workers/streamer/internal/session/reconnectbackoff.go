// A session's reconnect back-off: the one place a wait before a redial is
// read from (the session's connections, its planned reconnects and its
// standby).

package session

import "github.com/wsfleet/wsfleet/workers/streamer/internal/backoff"

// reconnectBackoff is the back-off of a session whose connection is
// compiled as p (nil: none compiled yet): the worker's (Config.Backoff),
// capped at the session's reconnect_backoff_max_ms when it has one
// (spec.Settings.ReconnectBackoffMax, above or below the worker's cap; a
// cap below the worker's first step is every step). Every wait before a
// redial reads it here and nowhere else (docs/guides/start-field.md).
func (s *Session) reconnectBackoff(p *proto) backoff.Policy {
	b := s.env.Config.Backoff
	if p == nil {
		return b
	}
	if m := p.settings.ReconnectBackoffMax(); m > 0 {
		b.Base, b.Max = min(b.Base, m), m
	}
	return b
}
