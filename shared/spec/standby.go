package spec

import (
	"time"

	"github.com/wsfleet/wsfleet/shared/source"
)

// Standby is the start field standby: whether the session gets a hot
// standby (a second, non-delivering connection held by another worker,
// which takes over with no dial when the owner dies) and the bounds of the
// window of received messages the standby keeps. Its fields are pointers
// so that an omitted key tells from a given one: enabled is required,
// window and window_bytes default. Once checked it is nil unless enabled,
// with its spelled-out defaults dropped (see Check).
type Standby struct {
	Enabled *bool `json:"enabled"`
	// Window is the age bound of what the standby keeps, a Go duration
	// (MinStandbyWindow..MaxStandbyWindow); nil: DefaultStandbyWindow.
	Window *string `json:"window,omitempty"`
	// WindowBytes is the size bound of what it keeps, charged to the
	// worker's memory budget (MinStandbyWindowBytes..MaxStandbyWindowBytes);
	// nil: DefaultStandbyWindowBytes.
	WindowBytes *int64 `json:"window_bytes,omitempty"`
}

// Defaults and bounds of standby.window and standby.window_bytes.
// DefaultStandbyWindow covers a crash's takeover with room to spare: the
// death declaration (the liveness TTL, 10 s by default, plus the
// watcher's read interval) and the claim, so that the messages received
// since the owner's last delivery are still in the window when the standby
// delivers them.
const (
	DefaultStandbyWindow      = 30 * time.Second
	MinStandbyWindow          = 5 * time.Second
	MaxStandbyWindow          = 10 * time.Minute
	DefaultStandbyWindowBytes = 1 << 20
	MinStandbyWindowBytes     = 64 << 10
	MaxStandbyWindowBytes     = 16 << 20
)

// StandbyEnabled reports whether the session asks for a hot standby.
func (s Spec) StandbyEnabled() bool {
	return s.Standby != nil && s.Standby.Enabled != nil && *s.Standby.Enabled
}

// StandbyWindow is the age and size bounds of the standby's window, the
// defaults applied.
func (s Spec) StandbyWindow() (age time.Duration, bytes int64) {
	age, bytes = DefaultStandbyWindow, DefaultStandbyWindowBytes
	if s.Standby == nil {
		return age, bytes
	}
	if w := s.Standby.Window; w != nil {
		age = source.Duration(*w)
	}
	if b := s.Standby.WindowBytes; b != nil {
		bytes = *b
	}
	return age, bytes
}

// checkStandby checks standby and makes it canonical: nil when not
// enabled (a start with {"enabled": false} is the same configuration as
// one without standby), the defaults dropped, the window in Go's form. It
// builds a new Standby: the one checked may be shared with a caller's spec.
func (s *Spec) checkStandby() *source.FieldError {
	in := s.Standby
	if in == nil {
		return nil
	}
	if in.Enabled == nil {
		return bad("standby", "standby.enabled: is required (true for a standby, false for none)")
	}
	out := Standby{Enabled: new(true)}
	if w := in.Window; w != nil {
		d, err := source.ParseDuration(*w, MinStandbyWindow, MaxStandbyWindow)
		if err != nil {
			return bad("standby", "standby.window: %v", err)
		}
		if d != DefaultStandbyWindow {
			out.Window = new(d.String())
		}
	}
	if b := in.WindowBytes; b != nil {
		if *b < MinStandbyWindowBytes || *b > MaxStandbyWindowBytes {
			return bad("standby", "standby.window_bytes: must be %d..%d (64 KiB to 16 MiB)", MinStandbyWindowBytes, MaxStandbyWindowBytes)
		}
		if *b != DefaultStandbyWindowBytes {
			out.WindowBytes = new(*b)
		}
	}
	s.Standby = nil
	if *in.Enabled {
		s.Standby = &out
	}
	return nil
}

// StandbyView is standby as GET shows it: every default spelled out.
type StandbyView struct {
	Enabled     bool   `json:"enabled"`
	Window      string `json:"window"`
	WindowBytes int64  `json:"window_bytes"`
}

// standbyView is s's standby for View (nil: none).
func (s Spec) standbyView() *StandbyView {
	if !s.StandbyEnabled() {
		return nil
	}
	age, bytes := s.StandbyWindow()
	return &StandbyView{Enabled: true, Window: age.String(), WindowBytes: bytes}
}
