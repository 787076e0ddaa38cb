package feed

// The feed's controls: the HTTP endpoints under /control/ and the methods
// they call to switch the mode, the schedule and refusals and to drop
// connections.

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/coder/websocket"
)

// Handler serves the feed at PathPrefix + <session> and the controls:
//
//	GET  /healthz
//	GET  /control/stats                      Stats
//	GET  /control/records[?session=S]        []ConnRecord
//	POST /control/mode?mode=kick-older|refuse-newer|allow
//	POST /control/drop[?session=S][&abort=1] {"dropped":N}
//	POST /control/refuse?on=1|0[&session=S]
//	POST /control/schedule?max_age=D[&notice=D]  {"max_age":D,"notice":D}
//	POST /control/poison?session=S&kind=K[&every=N]  PoisonSpan
//	POST /control/standby?allow=1|0          {"allow_standby":B}
//
// D is a Go duration ("3s"); empty or 0 is off (see SetSchedule). K is
// invalid-utf8, forbidden or off, N a count (default 1; see SetPoison).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /control/stats", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.Stats()) })
	mux.HandleFunc("GET /control/records", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, s.Records(r.URL.Query().Get("session")))
	})
	mux.HandleFunc("POST /control/mode", func(w http.ResponseWriter, r *http.Request) {
		m, err := ParseMode(r.URL.Query().Get("mode"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.SetMode(m)
		writeJSON(w, map[string]string{"mode": string(m)})
	})
	mux.HandleFunc("POST /control/drop", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		code := websocket.StatusGoingAway
		if q.Get("abort") == "1" || q.Get("abort") == "true" {
			code = 0
		}
		writeJSON(w, map[string]int{"dropped": s.Drop(q.Get("session"), code)})
	})
	mux.HandleFunc("POST /control/refuse", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		on, err := strconv.ParseBool(q.Get("on"))
		if err != nil {
			http.Error(w, "on: want true or false", http.StatusBadRequest)
			return
		}
		s.SetRefuse(q.Get("session"), on)
		writeJSON(w, map[string]bool{"refusing": on})
	})
	mux.HandleFunc("POST /control/schedule", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var d [2]time.Duration
		for i, k := range []string{"max_age", "notice"} {
			if v := q.Get(k); v != "" {
				var err error
				if d[i], err = time.ParseDuration(v); err != nil {
					http.Error(w, k+": want a duration such as 3s", http.StatusBadRequest)
					return
				}
			}
		}
		if err := s.SetSchedule(d[0], d[1]); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, map[string]string{"max_age": d[0].String(), "notice": d[1].String()})
	})
	mux.HandleFunc("POST /control/poison", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		kind, err := ParsePoison(q.Get("kind"))
		every := int64(1)
		if v := q.Get("every"); v != "" && err == nil {
			if every, err = strconv.ParseInt(v, 10, 64); err != nil {
				err = errors.New("every: want a count such as 2")
			}
		}
		var span PoisonSpan
		if err == nil {
			span, err = s.SetPoison(q.Get("session"), kind, every)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, span)
	})
	mux.HandleFunc("POST /control/standby", s.serveSetAllowStandby)
	mux.HandleFunc("GET "+PathPrefix+"{session}", s.serveFeed)
	return mux
}

// SetMode switches the one-connection policy for new connections.
func (s *Server) SetMode(m Mode) {
	s.mu.Lock()
	s.mode = m
	s.mu.Unlock()
}

// SetSchedule sets Config.MaxConnAge and Config.ShutdownNotice (0: off) for
// the connections opened from now on; those already open keep theirs.
func (s *Server) SetSchedule(maxAge, notice time.Duration) error {
	if err := validSchedule(maxAge, notice); err != nil {
		return err
	}
	s.mu.Lock()
	s.maxAge, s.notice = maxAge, notice
	s.mu.Unlock()
	return nil
}

// SetRefuse makes the feed refuse (HTTP 503) new connections for session, or
// for every session when session is "". Turning "" off clears every refusal.
func (s *Server) SetRefuse(session string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if session == "" {
		s.refuseAll = on
		if !on {
			clear(s.refuse)
		}
		return
	}
	if on {
		s.refuse[session] = true
	} else {
		delete(s.refuse, session)
	}
}

// Drop closes the open connections of session (every session when ""),
// those still in their handshake included: with a close frame of code, or
// when code is 0 by closing the TCP connection without one. It returns how
// many it dropped.
func (s *Server) Drop(session string, code websocket.StatusCode) int {
	var cause error = dropped{code}
	if code == 0 {
		cause = errAborted
	}
	s.mu.Lock()
	var victims []*conn
	for name, ss := range s.sessions {
		if session == "" || name == session {
			for _, c := range ss.open {
				victims = append(victims, c)
			}
		}
	}
	s.mu.Unlock()
	for _, c := range victims {
		c.stop(cause)
	}
	return len(victims)
}
