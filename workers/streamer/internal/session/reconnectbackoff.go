// A session's reconnect back-off: the one place a wait before a redial is
// read from (the session's connections, its planned reconnects and its
// standby).

package session

import "github.com/wsfleet/wsfleet/workers/streamer/internal/backoff"

// reconnectBackoff is the back-off of a session whose connection is
// compiled as p (nil: none compiled yet): the worker's (Config.Backoff).
// Every wait before a redial reads it here and nowhere else, so that a
// session setting of the back-off (p.settings) is one change in this
// function (docs/guides/start-field.md).
func (s *Session) reconnectBackoff(p *proto) backoff.Policy {
	return s.env.Config.Backoff
}
