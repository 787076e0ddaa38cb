package spec

// A session's settings: the start fields that stand alone, each with its
// admission check and its run rule.

import (
	"regexp"
	"time"

	"github.com/wsfleet/wsfleet/shared/source"
)

// Settings are the start fields that stand alone: each is checked on its
// own (no other field changes what it may be), carries no credential, and
// GET shows it as stored (View embeds Settings). A new field of that kind
// is one field here, with its limits, its admission check (check), its run
// rule (runnable) and its accessor in this file, and the worker code that
// reads it (docs/guides/start-field.md). A field that depends on another,
// may carry a credential or is shown otherwise goes in Spec, in a file of
// its own (standby.go). Settings is embedded in Spec and View where these
// keys always were: the stored form's key order, and so the encoding of a
// stored spec, is unchanged.
type Settings struct {
	// Subprotocols are offered on the handshake, in order of preference.
	Subprotocols []string `json:"subprotocols,omitempty"`
	// FollowRedirects is how many handshake redirects the worker may follow
	// (0: none; each hop is checked against the allowlist and the address
	// policy, and credentials never go to another origin).
	FollowRedirects int `json:"follow_redirects,omitempty"`
	// CheckpointEvery is the session's checkpoint interval, a Go duration
	// (MinCheckpointEvery..MaxCheckpointEvery); "": the worker's default.
	// Ingest stores it again as the session item's checkpoint_every_ms, for
	// the ownership core (the reason: schema.AttrCheckpointEvery).
	CheckpointEvery string `json:"checkpoint_every,omitempty"`
	// ConnectTimeoutMS is the session's dial timeout in milliseconds
	// (1..MaxDialTimeout): TCP, TLS and the WebSocket handshake with its
	// redirects, from the moment the dial holds its handshake slot; 0: the
	// worker's WSFLEET_DIAL_TIMEOUT. A body's explicit 0 is refused.
	ConnectTimeoutMS int64 `json:"connect_timeout_ms,omitempty"`
	// ReconnectBackoffMaxMS caps the session's reconnect back-off, in
	// milliseconds (MinReconnectBackoff..MaxReconnectBackoff): the longest
	// wait before a redial (the step doubles from the worker's
	// WSFLEET_RECONNECT_MIN up to it, each wait drawn from [step/2, step]);
	// 0: the worker's WSFLEET_RECONNECT_MAX. A body's explicit 0 is refused.
	ReconnectBackoffMaxMS int64 `json:"reconnect_backoff_max_ms,omitempty"`
}

// Limits of the settings.
const (
	MaxFollowRedirects = 5
	MaxSubprotocols    = 8
	MinCheckpointEvery = time.Second
	MaxCheckpointEvery = 10 * time.Minute
	// MaxDialTimeout bounds any dial's deadline: a session's
	// connect_timeout_ms and the worker's WSFLEET_DIAL_TIMEOUT (the worker's
	// HTTP client holds its own timeouts at it, as ceilings).
	MaxDialTimeout = 5 * time.Minute
	// MinReconnectBackoff and MaxReconnectBackoff bound a session's
	// reconnect_backoff_max_ms: at least the worker's default first step
	// (WSFLEET_RECONNECT_MIN), so no wait is below half of it; at most 10
	// times the worker's default cap (WSFLEET_RECONNECT_MAX, 30 s).
	MinReconnectBackoff = 100 * time.Millisecond
	MaxReconnectBackoff = 5 * time.Minute
)

// subprotocolPattern is an RFC 6455 subprotocol: an HTTP token (RFC 7230
// tchar), at most 64 bytes here.
var subprotocolPattern = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")

// check is the settings' admission (Spec.Check): it refuses the first
// setting out of its limits and makes them canonical (an empty list nil, a
// duration in Go's form). A key given with its zero value is refused where
// the zero is not a valid value (given.has: an explicit value is never
// quietly the default).
func (s *Settings) check(given Keys) *source.FieldError {
	if e := checkSubprotocols(s.Subprotocols); e != nil {
		return e
	}
	if len(s.Subprotocols) == 0 {
		s.Subprotocols = nil
	}
	if n := s.FollowRedirects; n < 0 || n > MaxFollowRedirects {
		return bad("follow_redirects", "follow_redirects must be 0..%d", MaxFollowRedirects)
	}
	if given.has("checkpoint_every", s.CheckpointEvery != "") {
		d, e := checkCheckpointEvery(s.CheckpointEvery)
		if e != nil {
			return e
		}
		s.CheckpointEvery = d.String()
	}
	if given.has("connect_timeout_ms", s.ConnectTimeoutMS != 0) {
		if n := s.ConnectTimeoutMS; n < 1 || n > MaxDialTimeout.Milliseconds() {
			return bad("connect_timeout_ms", "connect_timeout_ms must be 1..%d (milliseconds); omit it for the worker's dial timeout", MaxDialTimeout.Milliseconds())
		}
	}
	if given.has("reconnect_backoff_max_ms", s.ReconnectBackoffMaxMS != 0) {
		if n := s.ReconnectBackoffMaxMS; n < MinReconnectBackoff.Milliseconds() || n > MaxReconnectBackoff.Milliseconds() {
			return bad("reconnect_backoff_max_ms", "reconnect_backoff_max_ms must be %d..%d (milliseconds); omit it for the worker's reconnect back-off",
				MinReconnectBackoff.Milliseconds(), MaxReconnectBackoff.Milliseconds())
		}
	}
	return nil
}

// runnable is the settings' run rules (Decode): it refuses only what a
// worker cannot run at all, never an admission limit (a limit tightened
// later fails no stored session), and makes them canonical as check does.
func (s *Settings) runnable() *source.FieldError {
	for i, p := range s.Subprotocols {
		if !subprotocolPattern.MatchString(p) {
			return bad("subprotocols", "subprotocols[%d] is not an HTTP token", i)
		}
	}
	if len(s.Subprotocols) == 0 {
		s.Subprotocols = nil
	}
	if s.FollowRedirects < 0 {
		return bad("follow_redirects", "follow_redirects is negative")
	}
	if s.CheckpointEvery != "" {
		d := s.CheckpointInterval()
		if d <= 0 {
			return bad("checkpoint_every", "checkpoint_every is not a positive duration")
		}
		s.CheckpointEvery = d.String()
	}
	if s.ConnectTimeoutMS < 0 {
		return bad("connect_timeout_ms", "connect_timeout_ms is negative")
	}
	if s.ReconnectBackoffMaxMS < 0 {
		return bad("reconnect_backoff_max_ms", "reconnect_backoff_max_ms is negative")
	}
	return nil
}

// checkSubprotocols allows at most MaxSubprotocols tokens, each once.
func checkSubprotocols(ps []string) *source.FieldError {
	if len(ps) > MaxSubprotocols {
		return bad("subprotocols", "subprotocols: at most %d", MaxSubprotocols)
	}
	seen := map[string]bool{}
	for i, p := range ps {
		if !subprotocolPattern.MatchString(p) {
			return bad("subprotocols", "subprotocols[%d] must match %s", i, subprotocolPattern)
		}
		if seen[p] {
			return bad("subprotocols", "subprotocols[%d] %q is given twice", i, p)
		}
		seen[p] = true
	}
	return nil
}

// checkCheckpointEvery parses checkpoint_every (a Go duration,
// MinCheckpointEvery..MaxCheckpointEvery).
func checkCheckpointEvery(v string) (time.Duration, *source.FieldError) {
	refused := bad("checkpoint_every", `checkpoint_every must be a duration from 1s to 10m, such as "30s" or "2m"`)
	if len(v) > 32 {
		return 0, refused
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < MinCheckpointEvery || d > MaxCheckpointEvery {
		return 0, refused
	}
	return d, nil
}

// CheckpointInterval is the session's checkpoint interval (0: the worker's
// default).
func (s Settings) CheckpointInterval() time.Duration {
	d, _ := time.ParseDuration(s.CheckpointEvery)
	return d
}

// ConnectTimeout is the session's dial timeout (0: the worker's), at most
// MaxDialTimeout: a value stored under a looser limit is capped, not
// refused.
func (s Settings) ConnectTimeout() time.Duration {
	return time.Duration(min(s.ConnectTimeoutMS, MaxDialTimeout.Milliseconds())) * time.Millisecond
}

// ReconnectBackoffMax is the cap of the session's reconnect back-off (0:
// the worker's), at most MaxReconnectBackoff: a value stored under a
// looser limit is capped, not refused.
func (s Settings) ReconnectBackoffMax() time.Duration {
	return time.Duration(min(s.ReconnectBackoffMaxMS, MaxReconnectBackoff.Milliseconds())) * time.Millisecond
}
