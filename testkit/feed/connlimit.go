package feed

import (
	"fmt"
	"net"
	"net/http"
	"time"
)

// ConnLimit is a source's limit on new connections per client IP: at most
// Max connection attempts from one IP to one host within any Per. Binance
// states "a limit of 300 connections per attempt every 5 minutes per IP"
// for its spot WebSocket streams (quoted, with a link to
// https://developers.binance.com/docs/binance-spot-api-docs/web-socket-streams,
// by https://github.com/skip-mev/connect/blob/main/providers/websockets/binance/README.md;
// docs/references.md). The feed counts every attempt it answers, refused
// ones included (the limit is on attempts), and refuses one over the limit
// with HTTP 429 (ReasonRefused, RefusedBy RefusedByConnRate), the status
// Binance's API answers a request over a rate limit with (assumed for the
// handshake). The zero ConnLimit is off.
type ConnLimit struct {
	Max int
	Per time.Duration
}

// RefusedByConnRate is the RefusedBy of an attempt over Config.ConnLimit.
const RefusedByConnRate = "connection-rate"

// BinanceConnLimit is Binance's documented per-IP limit (see ConnLimit).
var BinanceConnLimit = ConnLimit{Max: 300, Per: 5 * time.Minute}

func (l ConnLimit) on() bool { return l.Max > 0 && l.Per > 0 }

func (l ConnLimit) validate() error {
	if l.Max < 0 || l.Per < 0 || (l.Max > 0) != (l.Per > 0) {
		return fmt.Errorf("feed connection limit %d per %s: want both positive, or both 0 (off)", l.Max, l.Per)
	}
	return nil
}

// connKey is the limit's key of r: the host it named and the client's IP
// (the address its connection came from, without the port).
func connKey(r *http.Request) string {
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		ip = r.RemoteAddr
	}
	return r.Host + " " + ip
}

// overLimitLocked counts an attempt of r at now and reports whether it is
// over Config.ConnLimit (off: never). Each key keeps the times of its
// attempts within the window, oldest first.
func (s *Server) overLimitLocked(r *http.Request, now time.Time) bool {
	l := s.cfg.ConnLimit
	if !l.on() {
		return false
	}
	if s.attempts == nil {
		s.attempts = map[string][]time.Time{}
	}
	k := connKey(r)
	ts, over := l.Count(s.attempts[k], now)
	s.attempts[k] = ts
	if over {
		s.rateLimited++
	}
	return over
}

// Count adds an attempt at now to ts, one key's attempts within the
// window (oldest first), dropping those the window left behind, and
// reports whether the attempt is over the limit (off: never).
func (l ConnLimit) Count(ts []time.Time, now time.Time) ([]time.Time, bool) {
	if !l.on() {
		return ts, false
	}
	i := 0
	for i < len(ts) && !ts[i].After(now.Add(-l.Per)) {
		i++
	}
	ts = append(ts[i:], now)
	return ts, len(ts) > l.Max
}
