//go:build fleetsim

package fleetsim

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
)

// watcher writes every ownership call that names one of its sessions
// (Config.Watch): the worker, the call, what it named and how it ended,
// at the fleet's virtual time. With Config.Watch = ["slowest"]
// (WatchSlowest) it watches every session from the first fault on, keeps
// the lines in memory, and writes those of each fault's slowest sessions
// once the run is judged (writeSlowest): a replay by id needs the same
// path, which a fleet of 1,000 workers does not take twice (fleetsim's
// doc: what it cannot make deterministic).
type watcher struct {
	ids map[string]bool // nil: every session (WatchSlowest)
	t0  time.Time
	mu  sync.Mutex
	to  io.Writer
	// keeping: WatchSlowest's lines are kept from now on (keep); kept
	// are each session's, at most keptPerSession.
	keeping bool
	kept    map[string][]string
	// claims are WatchSlowest's claims from the first fault on (claim),
	// in order: a slowest session's history says where its claimers'
	// claim paces went before they reached it.
	claims []claimRec
}

// claimRec is one claim: when it ended, of which session, by whom, its
// path and outcome.
type claimRec struct {
	at            float64 // seconds since the fleet's start
	id, who, what string
}

// WatchSlowest, as the only Config.Watch, watches every session from the
// first fault and writes the history of each fault's slowest sessions
// (Recovery.Slowest) after the judge.
const WatchSlowest = "slowest"

// keptPerSession bounds the lines WatchSlowest keeps of one session (its
// first ones: how the recovery began).
const keptPerSession = 400

// newWatcher watches ids, writing to to; nil when there is nothing to
// watch or nowhere to write.
func newWatcher(ids []string, to io.Writer, t0 time.Time) *watcher {
	if len(ids) == 0 || to == nil {
		return nil
	}
	if len(ids) == 1 && ids[0] == WatchSlowest {
		return &watcher{t0: t0, to: to, kept: map[string][]string{}}
	}
	w := &watcher{ids: map[string]bool{}, t0: t0, to: to}
	for _, id := range ids {
		w.ids[id] = true
	}
	return w
}

// keep starts keeping WatchSlowest's lines (the first fault).
func (w *watcher) keep() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.keeping = true
	w.mu.Unlock()
}

// note writes one call on id by worker who, when id is watched.
func (w *watcher) note(id, who, call string, err error, detail string, args ...any) {
	if w == nil {
		return
	}
	if w.ids != nil && !w.ids[id] {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ids == nil && (!w.keeping || len(w.kept[id]) >= keptPerSession) {
		return
	}
	line := fmt.Sprintf("+%.3fs %s %s %s: %v", time.Since(w.t0).Seconds(), who, call, fmt.Sprintf(detail, args...), err)
	if w.ids != nil {
		fmt.Fprintf(w.to, "watch %s %s\n", id, line)
		return
	}
	w.kept[id] = append(w.kept[id], line)
}

// claim notes a claim of id by worker who as it ended (its path and
// outcome) and, with WatchSlowest once keeping, keeps it for the claim
// summaries (writeSlowest).
func (w *watcher) claim(id, who, path, outcome string) {
	if w == nil {
		return
	}
	w.note(id, who, "claim", nil, "path %s: %s", path, outcome)
	if w.ids != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.keeping {
		return
	}
	w.claims = append(w.claims, claimRec{at: time.Since(w.t0).Seconds(), id: id, who: who, what: path + " " + outcome})
}

// listed notes each watched session of a listing's answer.
func (w *watcher) listed(who, call string, ids []string) {
	if w == nil {
		return
	}
	for _, id := range ids {
		w.note(id, who, call, nil, "listed")
	}
}

// writeSlowest writes the kept lines of each fault's slowest sessions
// (WatchSlowest; nothing otherwise).
func (w *watcher) writeSlowest(faults []Recovery) {
	if w == nil || w.ids != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range faults {
		for _, s := range r.Slowest {
			fmt.Fprintf(w.to, "watch %s fault %s at +%.3fs, delivering again %.3fs after it\n", s.ID, r.Kind, r.At, s.Seconds)
			for _, l := range w.kept[s.ID] {
				fmt.Fprintf(w.to, "watch %s %s\n", s.ID, l)
			}
			seen := map[string]bool{}
			for _, c := range w.claims {
				if c.id == s.ID && !seen[c.who] {
					seen[c.who] = true
					fmt.Fprintf(w.to, "watch %s +%.3fs %s claims %s\n", s.ID, c.at, c.who, claimSummary(w.claims, c.who, r.At, c.at))
				}
			}
		}
	}
}

// claimSummary sums worker who's claims of cs that ended from the fault
// (from, in seconds since the fleet's start) to its claim of a slow session
// (to): how many, by path and outcome (most first), and per 10 s from the
// fault.
func claimSummary(cs []claimRec, who string, from, to float64) string {
	byWhat := map[string]int{}
	var per []int
	n := 0
	for _, c := range cs {
		if c.who != who || c.at < from || c.at > to {
			continue
		}
		n++
		byWhat[c.what]++
		b := int((c.at - from) / 10)
		for len(per) <= b {
			per = append(per, 0)
		}
		per[b]++
	}
	whats := slices.Collect(maps.Keys(byWhat))
	slices.SortFunc(whats, func(a, b string) int {
		if c := cmp.Compare(byWhat[b], byWhat[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	parts := make([]string, len(whats))
	for i, k := range whats {
		parts[i] = fmt.Sprintf("%s %d", k, byWhat[k])
	}
	tens := make([]string, len(per))
	for i, k := range per {
		tens[i] = strconv.Itoa(k)
	}
	return fmt.Sprintf("from the fault to this claim: %d (%s); per 10 s: %s", n, strings.Join(parts, ", "), strings.Join(tens, " "))
}

// token is a tenure, briefly.
func token(t lease.Token) string { return fmt.Sprintf("%s@%d", t.Owner, t.Epoch) }
