//go:build fleetsim

package fleetsim

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/testkit/feed"
)

// Hot standbys in the simulator (issue 39): with Config.StandbyShare, every
// session's source cannot replay (the feed's seq field in the data, no
// resume parameter: a reconnect starts at the live edge), and that share
// of the sessions asks for a standby ("standby":{"enabled":true}). The
// feed admits a standby's connection beside the owner's (AllowStandby, by
// the tenure header every worker names on its dials), and the standby
// protocol between workers (POST /standby, /standby/owner-dead,
// /standby/positions) runs on the admin servers over the fleet's mesh
// (admin.go), as the hand-offs do. The others, the control, show what a
// takeover without a standby costs on such a source.
//
// The judge (StandbyFigures) counts each group's loss apart (the control's
// is expected: the messages sent while nobody was connected; Figures.Gaps
// counts the standby sessions' only), the promotions, and the time from
// the dead owner's declaration (the start of the first DeclareDead of its
// record that succeeded: when the declaring worker stamped its ended_at_ms,
// as the benchmark anchors it, in virtual time with no clock skew; the
// write's own latency is inside the figure) to the first delivery of each
// session it owned by another worker.

// standbyTenureHeader is the handshake header naming each dial's tenure
// (Config.TenureHeader): the feed tells a standby's connection from an
// owner's by it.
const standbyTenureHeader = "X-Wsfleet-Tenure"

// standbys are the fleet's standby sessions and the death declarations the
// workers wrote.
type standbys struct {
	mu     sync.Mutex
	with   map[string]bool      // sessions started with a standby
	deaths map[string]time.Time // worker id → its first declaration's start
	// acquires are every session's acquires (start, return), in the order
	// they returned: a standby run's only (a few per session).
	acquires map[string][][2]time.Time
}

// acquired records an acquire of session id, from start to end
// (memberStore.Acquire).
func (s *standbys) acquired(id string, start, end time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.acquires == nil {
		s.acquires = map[string][][2]time.Time{}
	}
	s.acquires[id] = append(s.acquires[id], [2]time.Time{start, end})
}

// acquireAfter is the first acquire of session id begun at or after t.
func (s *standbys) acquireAfter(id string, t time.Time) ([2]time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.acquires[id] {
		if !a[0].Before(t) {
			return a, true
		}
	}
	return [2]time.Time{}, false
}

// declared records that worker id was declared dead at at, if it was not
// already (memberStore.DeclareDead).
func (s *standbys) declared(id string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deaths == nil {
		s.deaths = map[string]time.Time{}
	}
	if _, ok := s.deaths[id]; !ok {
		s.deaths[id] = at
	}
}

// has reports whether session id was started with a standby.
func (s *standbys) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.with[id]
}

// declaredAt is when worker id was first declared dead (false: never).
func (s *standbys) declaredAt(id string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.deaths[id]
	return at, ok
}

// sessionSpec is the spec of the i-th session started, id, on host: the
// feed resuming from the checkpoint (from=K) by default; with
// Config.StandbyShare, no resume, and a standby for StandbyShare of them
// (spread evenly over the start order).
func (fl *Fleet) sessionSpec(id, host string, i int) spec.Spec {
	sp := spec.Spec{WSURL: "ws://" + host + feed.PathPrefix + id}
	share := fl.cfg.StandbyShare
	if share <= 0 {
		sp.Resume = &spec.Resume{QueryParam: feed.DefaultResumeParam}
		return sp
	}
	if math.Floor(float64(i+1)*share) > math.Floor(float64(i)*share) {
		on := true
		sp.Standby = &spec.Standby{Enabled: &on}
		fl.sb.mu.Lock()
		if fl.sb.with == nil {
			fl.sb.with = map[string]bool{}
		}
		fl.sb.with[id] = true
		fl.sb.mu.Unlock()
	}
	return sp
}

// StandbyFigures are a standby run's own figures (Config.StandbyShare).
type StandbyFigures struct {
	Share float64 `json:"share"`
	// Sessions started with a standby, and without (the control).
	Sessions int `json:"sessions"`
	Control  int `json:"control"`
	// Lost are the seqs the standby sessions never delivered between their
	// first and last delivered (Figures.Gaps); ControlLost the control's,
	// not in Figures.Gaps: a source that cannot replay loses what it sent
	// while the session had no connection (a takeover's TTL and dial).
	Lost        int64 `json:"lost"`
	ControlLost int64 `json:"control_lost"`
	// Promotions are the claims that adopted a standby's connection
	// (streamer Stats.StandbyPromotions, every worker's).
	Promotions int64 `json:"promotions"`
	// Takeover is, for each session a kill hit, the time from its owner's
	// death declaration to the session's first delivery by another worker
	// (virtual seconds), for the standby sessions; ControlTakeover the
	// control's. Unanchored are the hit sessions not measured: a fault of
	// several workers (which one owned a session is not kept), or an owner
	// never declared dead (a graceful stop).
	Takeover        Dark `json:"takeover"`
	ControlTakeover Dark `json:"control_takeover"`
	Unanchored      int  `json:"unanchored,omitempty"`
	// Path splits the standby sessions' Takeover at the new owner's
	// acquire (the first begun after the declaration), and ControlPath
	// the control's: where the time goes.
	Path        TakeoverPath `json:"path"`
	ControlPath TakeoverPath `json:"control_path"`
}

// TakeoverPath splits declared dead → first message at the new owner's
// acquire (lease.Store.Acquire: its conditional write, then the spec's
// read beside the checkpoint's fence): Notice is the declaration to the
// acquire's start (the death told, the dead worker's record read, the
// claim admitted), Acquire the call, Deliver its return to the first
// delivery (a standby's window drained; a dial and the source's next
// message without one).
type TakeoverPath struct {
	Notice  Dark `json:"notice"`
	Acquire Dark `json:"acquire"`
	Deliver Dark `json:"deliver"`
}

// takeoverSplit gathers one group's TakeoverPath, then summarizes it.
type takeoverSplit struct{ notice, acquire, deliver []float64 }

func (t *takeoverSplit) add(decl, first time.Time, acq [2]time.Time) {
	t.notice = append(t.notice, acq[0].Sub(decl).Seconds())
	t.acquire = append(t.acquire, acq[1].Sub(acq[0]).Seconds())
	t.deliver = append(t.deliver, first.Sub(acq[1]).Seconds())
}

func (t *takeoverSplit) path() TakeoverPath {
	for _, xs := range [][]float64{t.notice, t.acquire, t.deliver} {
		slices.Sort(xs)
	}
	return TakeoverPath{Notice: darkOf(t.notice), Acquire: darkOf(t.acquire), Deliver: darkOf(t.deliver)}
}

// standbyFigures are sf's takeover times and promotions, from the faults
// the Record logged (under r.mu) and the workers' counts. The losses are
// folded in by Judge.
func (fl *Fleet) standbyFigures(sf *StandbyFigures, faults []*faultLog) {
	var sb, ctl []float64
	var sbPath, ctlPath takeoverSplit
	for _, ft := range faults {
		if ft.Kind != "kill" {
			continue
		}
		var decl time.Time
		ok := len(ft.Workers) == 1
		if ok {
			decl, ok = fl.sb.declaredAt(ft.Workers[0])
		}
		for i, id := range ft.Sessions {
			switch {
			case math.IsNaN(ft.took[i]): // unrecovered: the fault's own figure
				continue
			case !ok:
				sf.Unanchored++
				continue
			}
			x := ft.took[i] - decl.Sub(ft.At).Seconds()
			times, split := &ctl, &ctlPath
			if fl.sb.has(id) {
				times, split = &sb, &sbPath
			}
			*times = append(*times, x)
			first := ft.At.Add(time.Duration(ft.took[i] * float64(time.Second)))
			if acq, ok := fl.sb.acquireAfter(id, decl); ok && !acq[1].After(first) {
				split.add(decl, first, acq)
			}
		}
	}
	slices.Sort(sb)
	slices.Sort(ctl)
	sf.Takeover, sf.ControlTakeover = darkOf(sb), darkOf(ctl)
	sf.Path, sf.ControlPath = sbPath.path(), ctlPath.path()
	for _, m := range fl.Members() {
		sf.Promotions += m.w.Stats().StandbyPromotions
	}
}
