package feed

// A Server's configuration: the one-connection modes, the defaults and
// Validate.

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"time"
)

// Mode says how the feed enforces one connection per session.
type Mode string

// Modes.
const (
	ModeKickOlder   Mode = "kick-older"   // a new connection closes the older one
	ModeRefuseNewer Mode = "refuse-newer" // a new connection is refused (HTTP 409) while one is open
	ModeAllow       Mode = "allow"        // both are kept (the overlap is still counted)
)

// ParseMode parses a mode name.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case ModeKickOlder, ModeRefuseNewer, ModeAllow:
		return Mode(s), nil
	}
	return "", fmt.Errorf("feed mode %q: want %s, %s or %s", s, ModeKickOlder, ModeRefuseNewer, ModeAllow)
}

// Defaults of the zero fields of a Config.
const (
	DefaultRate         = 5.0
	DefaultMode         = ModeKickOlder
	DefaultResumeParam  = "from"
	DefaultWriteTimeout = 5 * time.Second
	DefaultCloseTimeout = 2 * time.Second
	DefaultPingTimeout  = 2 * time.Second
)

// Config configures a Server. Zero fields take the defaults above.
type Config struct {
	// Rate is each session's message rate, in messages per second.
	Rate float64
	// Mode is the one-connection-per-session policy.
	Mode Mode
	// ResumeParam is the query parameter carrying the first seq to send.
	ResumeParam string
	// PayloadBytes pads every message with a "pad" string of that length.
	PayloadBytes int
	// RequireHeaders are headers a handshake must carry (else HTTP 401).
	RequireHeaders map[string]string
	// WriteTimeout bounds one message write; a slower client is closed.
	WriteTimeout time.Duration
	// CloseTimeout bounds a close handshake the server starts.
	CloseTimeout time.Duration
	// PingEvery, when > 0, pings every connection that often; one that does
	// not answer within PingTimeout is closed (ReasonPingLost). 0 never pings.
	PingEvery   time.Duration
	PingTimeout time.Duration
	// TLS, when set, makes the feed serve wss:// (and its controls over
	// https) with this configuration (testkit/tlsca makes one from a
	// per-run CA).
	TLS *tls.Config
	// OnClose, when set, is called once with the final record of every
	// connection (and of every refused attempt). It must not block for long.
	OnClose func(ConnRecord)

	// Real sources' behaviours (docs/sources.md; off when zero).
	//
	// Shape is the messages' shape (ShapeFlat by default).
	Shape Shape
	// SubscribeWithin, when > 0, is how long a connection has to send a
	// text message holding "op":"subscribe" (Coinbase-style); one that does
	// not is closed (ReasonNoSubscribe). The feed acks {"event":"subscribed"}
	// and sends from the message's "from":"K" as from=K would (from empty:
	// the live messages only).
	SubscribeWithin time.Duration
	// KeepaliveEvery, when > 0, sends {"msg_type":"KEEP_ALIVE_REQ"} that
	// often (Zoom RTMS-style); a connection that has not answered a request
	// with a text message holding KEEP_ALIVE_RESP within 2 × KeepaliveEvery
	// is closed (ReasonKeepaliveLost).
	KeepaliveEvery time.Duration
	// MaxConnAge, when > 0, closes every connection when it reaches that age
	// (from its OpenedAt), with close status 1001 (ReasonMaxAge), as Binance
	// ends a connection after 24 hours. SetSchedule changes it at run time.
	MaxConnAge time.Duration
	// ShutdownNotice, when > 0 (only with MaxConnAge, and shorter), is how
	// long before closing a connection at its age the feed sends it the
	// text message {"e":"serverShutdown","E":MS}; the stream goes on until
	// the close.
	ShutdownNotice time.Duration

	// TenureHeader, when set, is a handshake header naming the client's
	// tenure (a worker and its lease epoch, "<worker_id>/<lease_epoch>").
	// Its value is recorded (ConnRecord.Tenure), and a connection opened
	// while only connections of the same non-empty tenure are open is a
	// planned overlap (a make-before-break reconnect), not a violation.
	TenureHeader string
	// AllowStandby admits standby connections (a TenureHeader value
	// "<anything>/standby/<n>") beside the session's owner connection:
	// neither a violation nor kicked or refused, and kicking or refusing
	// nobody (standby.go). Off: a standby connection is like any other.
	// SetAllowStandby switches it at run time. Needs TenureHeader.
	AllowStandby bool

	// ConnLimit refuses a client IP's attempts beyond a connection rate
	// (HTTP 429; connlimit.go). Zero: off.
	ConnLimit ConnLimit
}

func (c Config) withDefaults() Config {
	c.Rate, c.Mode = cmp.Or(c.Rate, DefaultRate), cmp.Or(c.Mode, DefaultMode)
	c.ResumeParam, c.PingTimeout = cmp.Or(c.ResumeParam, DefaultResumeParam), cmp.Or(c.PingTimeout, DefaultPingTimeout)
	c.WriteTimeout, c.CloseTimeout = cmp.Or(c.WriteTimeout, DefaultWriteTimeout), cmp.Or(c.CloseTimeout, DefaultCloseTimeout)
	return c
}

// Validate reports every invalid setting (zero fields take their defaults).
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if !(c.Rate > 0 && c.Rate <= 100000) {
		errs = append(errs, fmt.Errorf("feed rate %v: want 0 < rate <= 100000 messages/s", c.Rate))
	}
	if _, err := ParseMode(string(c.Mode)); err != nil {
		errs = append(errs, err)
	}
	if c.PayloadBytes < 0 || c.PayloadBytes > 1<<20 {
		errs = append(errs, fmt.Errorf("feed payload bytes %d: want 0..1MiB", c.PayloadBytes))
	}
	if c.WriteTimeout < 0 || c.CloseTimeout < 0 || c.PingEvery < 0 || c.PingTimeout < 0 || c.SubscribeWithin < 0 || c.KeepaliveEvery < 0 {
		errs = append(errs, errors.New("feed write, close, ping, subscribe and keep-alive durations: want >= 0"))
	}
	if _, err := ParseShape(string(c.Shape)); err != nil {
		errs = append(errs, err)
	}
	if err := validSchedule(c.MaxConnAge, c.ShutdownNotice); err != nil {
		errs = append(errs, err)
	}
	if err := c.ConnLimit.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.AllowStandby && c.TenureHeader == "" {
		errs = append(errs, errors.New("feed allow standby: needs a tenure header (a standby connection is told by its tenure)"))
	}
	return errors.Join(errs...)
}

// validSchedule checks a max connection age and its shutdown notice.
func validSchedule(maxAge, notice time.Duration) error {
	switch {
	case maxAge < 0 || notice < 0:
		return fmt.Errorf("feed max connection age %s, shutdown notice %s: want >= 0", maxAge, notice)
	case notice > 0 && maxAge == 0:
		return fmt.Errorf("feed shutdown notice %s: needs a max connection age", notice)
	case notice > 0 && notice >= maxAge:
		return fmt.Errorf("feed shutdown notice %s: want less than the max connection age %s", notice, maxAge)
	}
	return nil
}
