//go:build fleetsim

package fleetsim

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// A fault's recovery names its slowest sessions (the slowest first), and a
// run of the same seed watching one of them writes that session's
// ownership calls: its dead owner's listing and the acquire that took it
// over, by another worker.
func TestWatchReplaysTheSlowestSession(t *testing.T) {
	sc := Scenarios(faultWorkers, faultSessions, faultFor)["crash-big"]
	r := faultOf(t, runT(t, sc, 1, nil), "kill")
	if len(r.Slowest) == 0 || len(r.Slowest) > slowestKept || r.Slowest[0].Seconds != r.Max {
		t.Fatalf("slowest %+v of a recovery with max %.3fs: want at most %d, the first at the max", r.Slowest, r.Max, slowestKept)
	}
	for i := 1; i < len(r.Slowest); i++ {
		if r.Slowest[i].Seconds > r.Slowest[i-1].Seconds {
			t.Fatalf("slowest not in order: %+v", r.Slowest)
		}
	}
	id, dead := r.Slowest[0].ID, r.Workers[0]
	var out bytes.Buffer
	sc.Fleet = withFleet(sc.Fleet, func(c *Config) { c.Watch, c.WatchTo = []string{id}, &out })
	runT(t, sc, 1, nil)
	var took, listed bool
	for line := range strings.Lines(out.String()) {
		if !strings.HasPrefix(line, "watch "+id+" ") {
			t.Fatalf("a line about another session: %q", line)
		}
		f := strings.Fields(line)
		if len(f) < 5 {
			t.Fatalf("line %q", line)
		}
		who, call := f[3], f[4]
		listed = listed || (call == "owned_by" && strings.Contains(line, " "+dead+"@"))
		took = took || (call == "acquire" && who != dead && strings.Contains(line, "prev "+dead+"@") && strings.HasSuffix(line, ": <nil>\n"))
	}
	if !took || !listed {
		t.Fatalf("the watch of %s (held by %s, which died) shows its listing as %s's %v and its takeover %v:\n%s", id, dead, dead, listed, took, out.String())
	}
}

// Watching the slowest (WatchSlowest) writes, once the run is judged, the
// history of each of that run's slowest sessions from the fault on: its
// dead owner's listing by the takeover and the acquire by another worker
// naming the dead tenure, each line after the fault.
func TestWatchSlowestWritesTheRunsOwnSlowest(t *testing.T) {
	sc := Scenarios(faultWorkers, faultSessions, faultFor)["crash-big"]
	var out bytes.Buffer
	sc.Fleet = withFleet(sc.Fleet, func(c *Config) { c.Watch, c.WatchTo = []string{WatchSlowest}, &out })
	r := faultOf(t, runT(t, sc, 1, nil), "kill")
	dead := r.Workers[0]
	if len(r.Slowest) == 0 {
		t.Fatal("no slowest session")
	}
	lines := map[string][]string{}
	for line := range strings.Lines(out.String()) {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "watch" {
			t.Fatalf("line %q", line)
		}
		lines[f[1]] = append(lines[f[1]], line)
	}
	for _, s := range r.Slowest {
		ls := lines[s.ID]
		if len(ls) == 0 || !strings.Contains(ls[0], fmt.Sprintf("delivering again %.3fs after it", s.Seconds)) {
			t.Fatalf("%s (%.3fs): no header first in %q", s.ID, s.Seconds, ls)
		}
		var took, listed, summed bool
		for _, line := range ls[1:] {
			f := strings.Fields(line)
			at, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(f[2], "+"), "s"), 64)
			if err != nil || at < r.At {
				t.Fatalf("%q: not a call after the fault at %.3fs", line, r.At)
			}
			who, call := f[3], f[4]
			listed = listed || (call == "owned_by" && who != dead && strings.Contains(line, " "+dead+"@"))
			took = took || (call == "acquire" && who != dead && strings.Contains(line, "prev "+dead+"@") && strings.HasSuffix(line, ": <nil>\n"))
			if call == "claims" {
				// A claimer's claims from the fault to its claim of this
				// session: that claim among them.
				var n int
				if _, err := fmt.Sscanf(strings.Join(f[5:], " "), "from the fault to this claim: %d", &n); err != nil || n < 1 || !strings.Contains(line, "; per 10 s: ") {
					t.Fatalf("%q: no claim summary (%v)", line, err)
				}
				summed = true
			}
		}
		if !took || !listed || !summed {
			t.Fatalf("%s (held by %s, which died): listing %v, takeover %v, claimers' summaries %v:\n%s", s.ID, dead, listed, took, summed, strings.Join(ls, ""))
		}
	}
	delete(lines, r.Slowest[0].ID)
	for _, s := range r.Slowest[1:] {
		delete(lines, s.ID)
	}
	if len(lines) > 0 {
		t.Fatalf("%d other sessions written, want only the slowest", len(lines))
	}
}
