package feed

// The feed's evidence: each connection's record, the per-session stats and
// overlaps, how a connection's record is kept, and NoOverlap over records.

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/coder/websocket"
)

// Close reasons of a ConnRecord.
const (
	ReasonOpen     = ""             // still open
	ReasonClient   = "client"       // the client closed or went away
	ReasonKicked   = "kicked"       // a newer connection for the session replaced it
	ReasonDropped  = "dropped"      // Drop with a close code
	ReasonAborted  = "aborted"      // Drop without one (TCP closed)
	ReasonShutdown = "shutdown"     // the server stopped
	ReasonWriteErr = "write-error"  // a write failed or timed out
	ReasonRefused  = "refused"      // refused before the upgrade (see RefusedBy)
	ReasonBadReq   = "bad-request"  // not a valid feed request
	ReasonUpgrade  = "upgrade-fail" // the WebSocket handshake failed
	ReasonPingLost = "ping-timeout" // no pong within Config.PingTimeout (Config.PingEvery > 0)

	ReasonNoSubscribe   = "no-subscribe"   // no subscribe within Config.SubscribeWithin
	ReasonKeepaliveLost = "keepalive-lost" // a KEEP_ALIVE_REQ not answered (Config.KeepaliveEvery)
	ReasonMaxAge        = "max-age"        // it reached Config.MaxConnAge (closed with 1001)
)

// ConnRecord is the feed's record of one connection (or refused attempt).
type ConnRecord struct {
	ID      int64  `json:"id"`
	Session string `json:"session"`
	Remote  string `json:"remote"`
	// RequestURI and Header are the handshake's; they may carry secrets,
	// so they stay in the process (never serialised).
	RequestURI string      `json:"-"`
	Header     http.Header `json:"-"`
	From       int64       `json:"from"` // the resume parameter; 0 when absent
	// Tenure is the handshake's Config.TenureHeader ("" when unset or absent).
	Tenure string `json:"tenure,omitempty"`
	// Standby: admitted as a standby connection (a standby tenure while
	// standbys were allowed); it conflicted with no other connection.
	Standby bool `json:"standby,omitempty"`
	// AuthDigest is AuthDigest of the handshake's Authorization header
	// ("" when absent): which credential dialled, not the credential.
	AuthDigest string    `json:"auth_digest,omitempty"`
	OpenedAt   time.Time `json:"opened_at"`
	// ClosedAt is when the connection ended for the source: the server sent
	// its close frame, or else the TCP connection ended. Zero while open.
	ClosedAt time.Time `json:"closed_at"`
	// EndedAt is when the server saw the TCP connection end; ClientCode is
	// final from then on. Zero before.
	EndedAt time.Time `json:"ended_at"`
	Reason  string    `json:"reason"` // ReasonOpen while open
	// NoticeAt is when the feed sent the shutdown notice (Config.
	// ShutdownNotice); zero when it did not.
	NoticeAt  time.Time `json:"notice_at,omitzero"`
	RefusedBy string    `json:"refused_by,omitempty"`
	// ClientCode is the close code the client sent; -1 when none.
	ClientCode int `json:"client_code"`
	// FirstSeq..LastSeq are the seqs written to this connection (none when
	// Sent is 0).
	FirstSeq int64 `json:"first_seq"`
	LastSeq  int64 `json:"last_seq"`
	Sent     int64 `json:"sent"`
}

// Open reports whether the connection was open when the record was taken.
func (r ConnRecord) Open() bool { return r.ClosedAt.IsZero() }

// Overlap is a time during which a session had more than one connection:
// in Stats.Overlaps, connections of different (or no) tenures (Max counts
// every connection open); in Stats.PlannedOverlaps, connections of one
// tenure, Tenure (Max counts those).
type Overlap struct {
	Session string    `json:"session"`
	Tenure  string    `json:"tenure,omitempty"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"` // zero while ongoing
	Max     int       `json:"max"`
}

// SessionStats summarises one session.
type SessionStats struct {
	Connections int64 `json:"connections"` // accepted connections
	Open        int   `json:"open"`
	// MaxConcurrent is the most connections open at once, planned overlaps
	// included, admitted standby connections (ConnRecord.Standby) not.
	MaxConcurrent int `json:"max_concurrent"`
	// StandbyConns counts the accepted standby connections (ConnRecord.
	// Standby), MaxStandby the most open at once.
	StandbyConns int64 `json:"standby_conns,omitempty"`
	MaxStandby   int   `json:"max_standby,omitempty"`
	// Violations counts the attempts (accepted or refused) made while
	// another connection of the session was open, one of the same
	// non-empty tenure and admitted standby connections excepted.
	Violations int64 `json:"violations"`
	// PlannedOverlaps counts the connections accepted while another one of
	// the session with the same non-empty tenure was open.
	PlannedOverlaps int64 `json:"planned_overlaps"`
	Kicks           int64 `json:"kicks"`
	Refused         int64 `json:"refused"`
	Head            int64 `json:"head"`     // highest seq sent on any connection
	Produced        int64 `json:"produced"` // highest seq produced so far
	Sent            int64 `json:"sent"`     // messages written, replays included
}

// Stats is the whole feed's state for a harness.
type Stats struct {
	Mode     Mode                    `json:"mode"`
	Rate     float64                 `json:"rate"`
	Refusing []string                `json:"refusing,omitempty"` // "*" = every session
	Sessions map[string]SessionStats `json:"sessions"`
	Overlaps []Overlap               `json:"overlaps,omitempty"`
	// PlannedOverlaps are the overlaps of connections of one tenure.
	PlannedOverlaps []Overlap `json:"planned_overlaps,omitempty"`
	// AllowStandby says whether standby connections are admitted now
	// (SetAllowStandby); StandbyOverlaps are the times a session had
	// admitted standby connections open beside an owner's (Max counts
	// every connection open).
	AllowStandby    bool      `json:"allow_standby,omitempty"`
	StandbyOverlaps []Overlap `json:"standby_overlaps,omitempty"`
	// MaxConnAgeMs and ShutdownNoticeMs are the schedule new connections
	// get (SetSchedule); 0 is off.
	MaxConnAgeMs     int64 `json:"max_conn_age_ms,omitempty"`
	ShutdownNoticeMs int64 `json:"shutdown_notice_ms,omitempty"`
	// Poisons are every session's poisoning episodes (SetPoison), in the
	// order they started.
	Poisons []PoisonSpan `json:"poisons,omitempty"`
	// RateLimited counts the attempts refused over Config.ConnLimit.
	RateLimited int64 `json:"rate_limited,omitempty"`
}

// Records returns a copy of every connection record (of session only when
// not ""), in the order the connections were attempted.
func (s *Server) Records(session string) []ConnRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ConnRecord, 0, len(s.records))
	for _, c := range s.records {
		if session == "" || c.rec.Session == session {
			out = append(out, c.rec)
		}
	}
	return out
}

// Session returns the stats of one session (zero for an unknown one).
func (s *Server) Session(name string) SessionStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.sessions[name]; ss != nil {
		return s.statsLocked(ss, time.Now())
	}
	return SessionStats{}
}

// Ended reports whether every connection session had has ended and its
// record is final (EndedAt, ClientCode, LastSeq). Session(..).Open can be 0 a
// moment before, once the close frames went out.
func (s *Server) Ended(session string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[session]
	return ss == nil || ss.pending == 0
}

// Stats returns the per-session counters and every overlap.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Mode: s.mode, Rate: s.cfg.Rate, Sessions: make(map[string]SessionStats, len(s.sessions)),
		MaxConnAgeMs: s.maxAge.Milliseconds(), ShutdownNoticeMs: s.notice.Milliseconds(), RateLimited: s.rateLimited, AllowStandby: s.allowSB}
	if s.refuseAll {
		st.Refusing = append(st.Refusing, "*")
	}
	for k := range s.refuse {
		st.Refusing = append(st.Refusing, k)
	}
	sort.Strings(st.Refusing)
	now := time.Now()
	for k, ss := range s.sessions {
		st.Sessions[k] = s.statsLocked(ss, now)
	}
	for _, o := range s.overlaps {
		st.Overlaps = append(st.Overlaps, *o)
	}
	for _, o := range s.planned {
		st.PlannedOverlaps = append(st.PlannedOverlaps, *o)
	}
	for _, o := range s.standbys {
		st.StandbyOverlaps = append(st.StandbyOverlaps, *o)
	}
	for _, p := range s.poisons {
		st.Poisons = append(st.Poisons, *p)
	}
	return st
}

func (s *Server) statsLocked(ss *session, now time.Time) SessionStats {
	v := ss.stats
	v.Open = len(ss.open)
	if !ss.t0.IsZero() {
		v.Produced = ProducedBy(ss.t0, now, s.cfg.Rate)
	}
	return v
}

func (s *Server) sent(c *conn, seq int64) {
	s.mu.Lock()
	c.rec.LastSeq = seq
	c.rec.Sent++
	ss := s.sessions[c.rec.Session]
	ss.stats.Sent++
	ss.stats.Head = max(ss.stats.Head, seq)
	s.mu.Unlock()
}

// closed ends c for the source, once: the server sent its close frame or
// the connection ended. reason is ReasonOpen to take it from c's cause.
func (s *Server) closed(c *conn, reason string) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !c.rec.ClosedAt.IsZero() {
		return
	}
	if reason == ReasonOpen {
		reason = ReasonClient
		if cause := context.Cause(c.ctx); cause != nil {
			reason = cause.Error()
		}
	}
	c.rec.ClosedAt, c.rec.Reason = now, reason
	ss := s.sessions[c.rec.Session]
	delete(ss.open, c.rec.ID)
	s.overlapsLocked(ss, c.rec.Session, now)
}

// sameTenure reports whether a and b are connections of one non-empty
// tenure: their overlap is planned.
func sameTenure(a, b ConnRecord) bool { return a.Tenure != "" && a.Tenure == b.Tenure }

// overlapsLocked starts, extends and ends ss's overlaps after a connection
// opened or closed: the overlap of connections of different tenures (a
// connection without one is its own) and those of each tenure.
func (s *Server) overlapsLocked(ss *session, name string, now time.Time) {
	s.standbyOverlapLocked(ss, name, now)
	perTenure := map[string]int{}
	var tenures []string
	for _, c := range ss.open {
		if c.rec.Standby {
			continue
		}
		tenures = append(tenures, c.rec.Tenure)
		if c.rec.Tenure != "" {
			perTenure[c.rec.Tenure]++
		}
	}
	switch groups := OwnerGroups(tenures); {
	case groups > 1:
		if ss.overlap == nil {
			ss.overlap = &Overlap{Session: name, Start: now}
			s.overlaps = append(s.overlaps, ss.overlap)
		}
		ss.overlap.Max = max(ss.overlap.Max, len(ss.open))
	case ss.overlap != nil:
		ss.overlap.End = now
		ss.overlap = nil
	}
	for t, n := range perTenure {
		if n < 2 {
			continue
		}
		o := ss.planned[t]
		if o == nil {
			o = &Overlap{Session: name, Tenure: t, Start: now}
			ss.planned[t] = o
			s.planned = append(s.planned, o)
		}
		o.Max = max(o.Max, n)
	}
	for t, o := range ss.planned {
		if perTenure[t] < 2 {
			o.End = now
			delete(ss.planned, t)
		}
	}
}

// OwnerGroups is how many owners the open connections of one session with
// these tenures are (a standby's left out: it conflicts with nothing):
// each distinct tenure one, each connection without a tenure one of its
// own. More than one is an overlap; one tenure's connections are a
// planned reconnect's.
func OwnerGroups(tenures []string) int {
	groups := 0
	for i, t := range tenures {
		if t == "" || !slices.Contains(tenures[:i], t) {
			groups++
		}
	}
	return groups
}

// ended records that the server saw c's connection end, once.
func (s *Server) ended(c *conn, code websocket.StatusCode) {
	s.closed(c, ReasonOpen)
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.rec.EndedAt.IsZero() {
		c.rec.EndedAt, c.rec.ClientCode = time.Now(), int(code)
	}
}

// finish makes c's record final, once its handler is done with it.
func (s *Server) finish(c *conn) {
	s.mu.Lock()
	s.sessions[c.rec.Session].pending--
	rec := c.rec
	s.mu.Unlock()
	s.notify(rec)
}

func (s *Server) notify(rec ConnRecord) {
	if s.cfg.OnClose != nil {
		s.cfg.OnClose(rec)
	}
}

// NoOverlap checks records of one session: it returns an error naming the
// first two accepted connections whose [OpenedAt, ClosedAt] intervals
// overlap (an open one lasts until now). Two connections of the same
// non-empty Tenure may overlap: that is a planned overlap, not an error; an
// admitted standby connection (ConnRecord.Standby) may overlap any.
func NoOverlap(recs []ConnRecord) error {
	end := func(r ConnRecord) time.Time {
		if r.ClosedAt.IsZero() {
			return time.Now()
		}
		return r.ClosedAt
	}
	for i, a := range recs {
		for _, b := range recs[i+1:] {
			if a.RefusedBy == "" && b.RefusedBy == "" && !a.Standby && !b.Standby && !sameTenure(a, b) && a.OpenedAt.Before(end(b)) && b.OpenedAt.Before(end(a)) {
				return fmt.Errorf("connections %d [%s, %s] and %d [%s, %s] of %s overlap", a.ID, a.OpenedAt.Format(time.StampMicro),
					end(a).Format(time.StampMicro), b.ID, b.OpenedAt.Format(time.StampMicro), end(b).Format(time.StampMicro), a.Session)
			}
		}
	}
	return nil
}
