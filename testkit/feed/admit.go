package feed

// Admitting a connection: the handshake's checks, the one-connection policy
// (conflicts, planned overlaps, standbys), refusals and kicks, then the
// upgrade.

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/coder/websocket"
)

var sessionPattern = regexp.MustCompile(`^[A-Za-z0-9._~-]{1,200}$`)

func (s *Server) serveFeed(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	name := r.PathValue("session")
	if !sessionPattern.MatchString(name) {
		http.Error(w, "session: want [A-Za-z0-9._~-]{1,200}", http.StatusBadRequest)
		return
	}
	rec := ConnRecord{Session: name, Remote: r.RemoteAddr, RequestURI: r.RequestURI, Header: r.Header.Clone(), OpenedAt: now, ClientCode: -1,
		AuthDigest: AuthDigest(r.Header.Get("Authorization"))}
	if s.cfg.TenureHeader != "" {
		rec.Tenure = r.Header.Get(s.cfg.TenureHeader)
	}
	reason, by, status := "", "", 0
	for k, v := range s.cfg.RequireHeaders {
		if r.Header.Get(k) != v {
			reason, by, status = ReasonBadReq, "missing header "+k, http.StatusUnauthorized
		}
	}
	if v := r.URL.Query().Get(s.cfg.ResumeParam); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			reason, by, status = ReasonBadReq, "bad "+s.cfg.ResumeParam, http.StatusBadRequest
		} else {
			rec.From = n
		}
	}

	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	ss := s.sessionLocked(name)
	// The open connections of another (or no) tenure conflict with this
	// one; those of its own non-empty tenure are a planned overlap. An
	// admitted standby conflicts with nothing, nothing with it.
	rec.Standby = s.allowSB && IsStandbyTenure(rec.Tenure)
	var conflicting []*conn
	planned := false
	for _, o := range ss.open {
		switch {
		case rec.Standby || o.rec.Standby:
		case sameTenure(o.rec, rec):
			planned = true
		default:
			conflicting = append(conflicting, o)
		}
	}
	if reason == "" && len(conflicting) > 0 {
		ss.stats.Violations++
	}
	switch {
	case reason != "":
	case s.refuseAll || s.refuse[name]:
		reason, by, status = ReasonRefused, "control", http.StatusServiceUnavailable
	case s.mode == ModeRefuseNewer && len(conflicting) > 0:
		reason, by, status = ReasonRefused, string(ModeRefuseNewer), http.StatusConflict
	}
	if s.overLimitLocked(r, now) && reason == "" {
		reason, by, status = ReasonRefused, RefusedByConnRate, http.StatusTooManyRequests
	}
	s.nextID++
	rec.ID = s.nextID
	if reason != "" {
		rec.ClosedAt, rec.Reason, rec.RefusedBy = now, reason, by
		s.records = append(s.records, &conn{rec: rec})
		if reason == ReasonRefused {
			ss.stats.Refused++
		}
		s.mu.Unlock()
		s.notify(rec)
		http.Error(w, "feed refused the connection: "+by, status)
		return
	}
	if ss.t0.IsZero() {
		// A session first seen resuming at K (the feed restarted under a
		// running stream) has already produced K-1 messages.
		ss.t0 = StartOf(now, s.cfg.Rate, rec.From)
	}
	start := s.statsLocked(ss, now).Produced + 1
	if rec.From > 0 {
		start = rec.From
	}
	t0 := ss.t0
	rec.FirstSeq, rec.LastSeq = start, start-1
	ctx, stop := context.WithCancelCause(context.Background())
	c := &conn{rec: rec, ctx: ctx, stop: stop, maxAge: s.maxAge, notice: s.notice}
	s.records = append(s.records, c)
	var older []*conn
	if s.mode == ModeKickOlder {
		older = conflicting
	}
	ss.open[rec.ID] = c
	ss.pending++
	ss.stats.Connections++
	ss.stats.Kicks += int64(len(older))
	if planned {
		ss.stats.PlannedOverlaps++
	}
	owners, standbys := openKinds(ss)
	if rec.Standby {
		ss.stats.StandbyConns++
	}
	ss.stats.MaxConcurrent = max(ss.stats.MaxConcurrent, owners)
	ss.stats.MaxStandby = max(ss.stats.MaxStandby, standbys)
	s.overlapsLocked(ss, name, now)
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer stop(nil)
	defer s.finish(c)
	for _, o := range older {
		o.stop(errKicked)
	}

	if s.beforeAccept != nil {
		s.beforeAccept(name)
	}
	ws, err := websocket.Accept(closeWatcher{ResponseWriter: w, closing: func() { s.closed(c, ReasonOpen) }}, r,
		&websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		s.closed(c, ReasonUpgrade)
		s.ended(c, -1)
		return
	}
	ws.SetReadLimit(64 << 10)
	s.pump(c, ws, t0, start)
}
