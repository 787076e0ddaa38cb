// A dial's timeouts: the one authority (the per-dial context's deadline)
// and the HTTP client's ceilings above it, computed here and nowhere else.

package session

import (
	"time"

	"github.com/wsfleet/wsfleet/shared/spec"
)

// MaxDialTimeout bounds a dial's deadline (Config.DialTimeout, and a
// session's connect_timeout_ms; defined with the spec's limits): the HTTP
// client's own timeouts sit at it, so that they never cut a dial its
// deadline still allows.
const MaxDialTimeout = spec.MaxDialTimeout

// dialTimeout is how long a dial of p may take, from the moment it holds
// its handshake slot: the deadline of the dial's context, the one timeout
// authority of a dial (TCP connect, TLS handshake, WebSocket handshake with
// its redirects, and the secrets expanded for it): the session's
// connect_timeout_ms (spec.Settings.ConnectTimeout, within MaxDialTimeout)
// when it has one, else the worker's DialTimeout. It is read here and
// nowhere else.
func (s *Session) dialTimeout(p *proto) time.Duration {
	if d := p.settings.ConnectTimeout(); d > 0 {
		return d
	}
	return s.env.Config.DialTimeout
}

// clientCeiling is the HTTP client's dialer, TLS handshake and
// response-header timeout (NewClient). These are ceilings, not the dial's
// timeout: at MaxDialTimeout they only end a phase a dial's context no
// longer bounds (a caller that gave none), and never cut a dial before its
// deadline (after coder/websocket's cloneWithDefaults, which moves an
// http.Client's Timeout into the dial's context).
const clientCeiling = MaxDialTimeout
