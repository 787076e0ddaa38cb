package feed

import (
	"bytes"
	"fmt"
	"strconv"
	"time"
)

// Poison is a kind of text message a sink may fail to carry as it is: the
// feed sends it on demand (SetPoison, POST /control/poison), in place of
// some seqs' ordinary messages, each still {"seq":N,...} first so that a
// worker finds its seq. The bytes are in the "x" string of
// {"seq":N,"session":S,"ts":MS,"poison":KIND,"x":"<bytes>"} (PoisonBytes).
type Poison string

// Poison kinds.
const (
	PoisonOff Poison = "" // ordinary messages
	// PoisonUTF8: invalid UTF-8 inside a JSON string (a lone 0xff, a
	// truncated two-byte sequence, an encoded UTF-16 surrogate). Go's
	// json.Valid accepts it (its scanner does not check UTF-8); an SDK
	// that encodes the string rewrites each bad byte to U+FFFD.
	PoisonUTF8 Poison = "invalid-utf8"
	// PoisonForbidden: valid UTF-8 holding characters SQS refuses in a
	// message body (it takes #x9 | #xA | #xD | #x20–#xD7FF | #xE000–#xFFFD
	// | #x10000–#x10FFFF): by seq, U+FFFE or U+FFFF raw in a valid JSON
	// string, or raw C0 controls (0x01, 0x1f) in a string (the message is
	// then not valid JSON).
	PoisonForbidden Poison = "forbidden"
)

// ParsePoison parses a poison kind ("" and "off" are PoisonOff).
func ParsePoison(s string) (Poison, error) {
	switch p := Poison(s); p {
	case PoisonOff, PoisonUTF8, PoisonForbidden:
		return p, nil
	case "off":
		return PoisonOff, nil
	}
	return "", fmt.Errorf("feed poison %q: want %s, %s or off", s, PoisonUTF8, PoisonForbidden)
}

// PoisonBytes is what the "x" string of seq's poisoned message of kind
// holds, raw (nil for PoisonOff).
func PoisonBytes(kind Poison, seq int64) []byte {
	switch kind {
	case PoisonUTF8:
		return []byte("a\xffb\xc3(c\xed\xa0\x80d")
	case PoisonForbidden:
		switch seq % 3 {
		case 0:
			return []byte("a\uFFFEb") // valid JSON, refused by SQS
		case 1:
			return []byte("a\uFFFFb")
		default:
			return []byte("a\x01b\x1fc") // not valid JSON: raw controls in a string
		}
	}
	return nil
}

// PoisonSpan is one episode of a session's poisoned messages: every
// Every-th seq from From (From, From+Every, …) up to To (0: still going)
// is sent as a message of Kind, on every connection that carries it (a
// replay resends the same bytes).
type PoisonSpan struct {
	Session string    `json:"session"`
	Kind    Poison    `json:"kind"`
	From    int64     `json:"from"`
	To      int64     `json:"to"` // 0 while on
	Every   int64     `json:"every"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end,omitzero"`
}

// Has reports whether seq is one of the span's poisoned seqs.
func (p PoisonSpan) Has(seq int64) bool {
	return seq >= p.From && (p.To == 0 || seq <= p.To) && (seq-p.From)%max(p.Every, 1) == 0
}

// SetPoison starts (kind not PoisonOff) or ends (PoisonOff) the poisoning
// of session: from the next seq the session produces, every every-th one
// (1: each) is sent as a message of kind, until it is ended; a new kind
// ends the previous episode. It returns the episode started or ended (zero
// when none was on). Only the flat shape is poisoned.
func (s *Server) SetPoison(session string, kind Poison, every int64) (PoisonSpan, error) {
	if _, err := ParsePoison(string(kind)); err != nil {
		return PoisonSpan{}, err
	}
	if !sessionPattern.MatchString(session) {
		return PoisonSpan{}, fmt.Errorf("feed poison session %q: want [A-Za-z0-9._~-]{1,200}", session)
	}
	if kind != PoisonOff && s.cfg.Shape != ShapeFlat {
		return PoisonSpan{}, fmt.Errorf("feed poison: the %q shape is not poisoned (only flat)", s.cfg.Shape)
	}
	if every < 1 || every > 1000 {
		return PoisonSpan{}, fmt.Errorf("feed poison every %d: want 1..1000", every)
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessionLocked(session)
	next := int64(1)
	if !ss.t0.IsZero() {
		next = s.statsLocked(ss, now).Produced + 1
	}
	var out PoisonSpan
	if p := ss.poison; p != nil {
		p.To, p.End = max(next-1, p.From), now
		ss.poison, out = nil, *p
	}
	if kind != PoisonOff {
		if out.From > 0 {
			next = max(next, out.To+1) // episodes never share a seq
		}
		p := &PoisonSpan{Session: session, Kind: kind, From: next, Every: every, Start: now}
		ss.poison = p
		ss.poisons = append(ss.poisons, p)
		s.poisons = append(s.poisons, p)
		s.anyPoison.Store(true)
		out = *p
	}
	return out, nil
}

// poisonOf is the poison kind of session's seq (PoisonOff: an ordinary
// message).
func (s *Server) poisonOf(session string, seq int64) Poison {
	if !s.anyPoison.Load() {
		return PoisonOff
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[session]
	if ss == nil {
		return PoisonOff
	}
	for _, p := range ss.poisons {
		if p.Has(seq) {
			return p.Kind
		}
	}
	return PoisonOff
}

// appendPoisoned appends seq's poisoned message of kind:
// {"seq":N,"session":S,"ts":MS,"poison":KIND,"x":"<PoisonBytes>"}.
func appendPoisoned(b []byte, kind Poison, session string, seq, nowMs int64) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(append(append(b, `,"session":"`...), session...), `","ts":`...)
	b = strconv.AppendInt(b, nowMs, 10)
	b = append(append(append(b, poisonField...), kind...), poisonX...)
	return append(append(b, PoisonBytes(kind, seq)...), '"', '}')
}

var (
	poisonField = []byte(`,"poison":"`)
	poisonX     = []byte(`","x":"`)
)

// PoisonIn reads a message as it reached a destination: the poison kind
// it names (PoisonOff: none, an ordinary message) and whether it holds
// exactly the bytes the feed sends for that kind and seq (byte for byte,
// from its "x" string to its end).
func PoisonIn(msg []byte, seq int64) (kind Poison, intact bool) {
	i := bytes.Index(msg, poisonField)
	if i < 0 {
		return PoisonOff, false
	}
	rest := msg[i+len(poisonField):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return Poison("?"), false
	}
	kind = Poison(rest[:j])
	if _, err := ParsePoison(string(kind)); err != nil || kind == PoisonOff {
		return kind, false
	}
	want := append(append(append([]byte(nil), poisonX...), PoisonBytes(kind, seq)...), '"', '}')
	return kind, bytes.Equal(rest[j:], want)
}
