package feed

// Hot standby connections: which tenure names one, the switch that admits
// them beside the owner's connection, and their overlaps (the package doc).

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// StandbyTenurePart is what a standby connection's tenure holds between its
// worker id and its standby epoch: "<worker id>/standby/<standby epoch>".
const StandbyTenurePart = "/standby/"

// IsStandbyTenure reports whether tenure names a standby connection:
// "<anything non-empty>/standby/<n>", n a non-negative integer.
func IsStandbyTenure(tenure string) bool {
	i := strings.LastIndex(tenure, StandbyTenurePart)
	if i <= 0 {
		return false
	}
	n := tenure[i+len(StandbyTenurePart):]
	if n == "" {
		return false
	}
	v, err := strconv.ParseInt(n, 10, 64)
	return err == nil && v >= 0 && strconv.FormatInt(v, 10) == n
}

// SetAllowStandby admits (on) or no longer admits standby connections
// (Config.AllowStandby) from the next connection on; a connection keeps
// what it was admitted as.
func (s *Server) SetAllowStandby(on bool) {
	s.mu.Lock()
	s.allowSB = on
	s.mu.Unlock()
}

// serveSetAllowStandby is POST /control/standby?allow=1|0.
func (s *Server) serveSetAllowStandby(w http.ResponseWriter, r *http.Request) {
	on, err := strconv.ParseBool(r.URL.Query().Get("allow"))
	if err != nil {
		http.Error(w, "allow: want true or false", http.StatusBadRequest)
		return
	}
	if on && s.cfg.TenureHeader == "" {
		http.Error(w, "allow standby: the feed reads no tenure header", http.StatusBadRequest)
		return
	}
	s.SetAllowStandby(on)
	writeJSON(w, map[string]bool{"allow_standby": on})
}

// openKinds counts ss's open connections: owners (every connection not
// admitted as a standby) and admitted standbys.
func openKinds(ss *session) (owners, standbys int) {
	for _, c := range ss.open {
		if c.rec.Standby {
			standbys++
		} else {
			owners++
		}
	}
	return owners, standbys
}

// standbyOverlapLocked starts, extends or ends ss's standby overlap (an
// admitted standby open beside an owner connection) after a connection
// opened or closed.
func (s *Server) standbyOverlapLocked(ss *session, name string, now time.Time) {
	owners, standbys := openKinds(ss)
	switch {
	case owners > 0 && standbys > 0:
		if ss.standby == nil {
			ss.standby = &Overlap{Session: name, Start: now}
			s.standbys = append(s.standbys, ss.standby)
		}
		ss.standby.Max = max(ss.standby.Max, owners+standbys)
	case ss.standby != nil:
		ss.standby.End = now
		ss.standby = nil
	}
}
