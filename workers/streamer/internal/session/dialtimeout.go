// A dial's timeouts: the one authority (the per-dial context's deadline)
// and the HTTP client's ceilings above it, computed here and nowhere else.

package session

import "time"

// MaxDialTimeout bounds a dial's deadline (Config.DialTimeout, and any
// per-session connect timeout a spec may carry one day): the HTTP client's
// own timeouts sit at it, so that they never cut a dial its deadline
// still allows.
const MaxDialTimeout = 5 * time.Minute

// dialTimeout is how long a dial of p may take, from the moment it holds
// its handshake slot: the deadline of the dial's context, the one timeout
// authority of a dial (TCP connect, TLS handshake, WebSocket handshake with
// its redirects, and the secrets expanded for it). The spec has no connect
// timeout of its own: every dial gets the worker's DialTimeout. A
// per-session value (a setting: p.settings) goes here and nowhere else,
// within MaxDialTimeout.
func (s *Session) dialTimeout(*proto) time.Duration { return s.env.Config.DialTimeout }

// clientCeiling is the HTTP client's dialer, TLS handshake and
// response-header timeout (NewClient). These are ceilings, not the dial's
// timeout: at MaxDialTimeout they only end a phase a dial's context no
// longer bounds (a caller that gave none), and never cut a dial before its
// deadline (after coder/websocket's cloneWithDefaults, which moves an
// http.Client's Timeout into the dial's context).
const clientCeiling = MaxDialTimeout
