// Tests of the poisoned source's checks (source-poison) on the destination
// scenario.

package chaos

import (
	"slices"
	"testing"

	"github.com/wsfleet/wsfleet/scripts/sinkfault"
	"github.com/wsfleet/wsfleet/testkit/feed"
)

// poisoned adds a source-poison episode from 20 s to 22 s: b's source sent
// every second seq from 96 to 105 (96, 98, …, 104) as invalid UTF-8, and
// each reached the destination byte for byte in form.
func (s *scenario) poisoned(form string) {
	s.ev.Faults = append(s.ev.Faults, Fault{N: 2, Kind: KindSourcePoison, Start: at(20), End: at(22), Sessions: []string{"b"}})
	sp := feed.PoisonSpan{Session: "b", Kind: feed.PoisonUTF8, From: 96, To: 105, Every: 2, Start: at(20), End: at(22)}
	s.ev.FeedStats.Poisons = []feed.PoisonSpan{sp}
	for _, d := range s.ev.Deliveries {
		if d.Session == "b" && sp.Has(d.Seq) {
			s.ev.Poisoned = append(s.ev.Poisoned, PoisonArrival{Session: "b", Seq: d.Seq, Epoch: d.Epoch, Worker: d.Worker, Kind: feed.PoisonUTF8, Intact: true, Form: form, AtNs: d.AtNs})
		}
	}
}

// copies adds n more copies of b's seq q (same tenure, same payload).
func (s *scenario) copies(q int64, n int) {
	i := slices.IndexFunc(s.ev.Deliveries, func(d Delivery) bool { return d.Session == "b" && d.Seq == q })
	a := slices.IndexFunc(s.ev.Poisoned, func(p PoisonArrival) bool { return p.Session == "b" && p.Seq == q })
	for k := 1; k <= n; k++ {
		d := s.ev.Deliveries[i]
		d.AtNs += int64(k) * 300e6
		s.ev.Deliveries = append(s.ev.Deliveries, d)
		if a >= 0 {
			s.ev.Poisoned = append(s.ev.Poisoned, s.ev.Poisoned[a])
		}
	}
}

// An episode whose poisoned messages all reach the destination byte for
// byte (as JSON, as a string or in base64), each session delivering on,
// is clean; its figures count them; up to 3 copies of one record are the
// sink's attempts.
func TestPoisonEpisodeRiddenOut(t *testing.T) {
	for _, form := range []string{sinkfault.FormJSON, sinkfault.FormString, sinkfault.FormB64} {
		s := destScenario()
		s.poisoned(form)
		res := s.judge()
		if !res.OK() {
			t.Fatalf("%s: %v", form, res.Violations)
		}
		if p := res.Poison; p.Sent != 5 || p.Delivered != 5 || p.Intact != 5 || p.Altered != 0 || p.Forms[form] != 5 || p.MaxCopies != 1 {
			t.Fatalf("%s: poison %+v", form, p)
		}
		for _, k := range res.Kinds {
			if k.Kind == KindSourcePoison && (k.Affected != 2 || k.Recovery.N != 2) {
				t.Fatalf("%s: kind %+v", form, k)
			}
		}
	}
	// Copies of a record first stored after the next fault began are that
	// fault's (a sink-latency's held answers).
	s := destScenario()
	s.poisoned(sinkfault.FormB64)
	s.ev.Faults = append(s.ev.Faults, Fault{N: 3, Kind: KindSinkLatency, Start: at(24), End: at(26)})
	s.ev.Deliveries = removeSeq(s.ev.Deliveries, "b", 116)
	s.ev.Deliveries = append(s.ev.Deliveries, tenureDels("b", "worker-2", 1, 116, 116, 24.1)...)
	s.copies(116, 5)
	if res := s.judge(); !res.OK() {
		t.Fatalf("copies after the next fault began: %v", res.Violations)
	}
	s = destScenario()
	s.poisoned(sinkfault.FormB64)
	s.copies(96, poisonCopiesMax-1)
	if res := s.judge(); !res.OK() || res.Poison.MaxCopies != poisonCopiesMax {
		t.Fatalf("%d copies: %v (max copies %d)", poisonCopiesMax, res.Violations, res.Poison.MaxCopies)
	}
}

// Every planted violation of a poisoned episode is found by the check
// that owns it.
func TestPlantedPoisonViolations(t *testing.T) {
	for _, tc := range []struct {
		name  string
		check string
		plant func(s *scenario)
	}{
		{"the session stuck behind its first poisoned seq (retried forever)", CheckSinkRecovery, func(s *scenario) {
			s.ev.Deliveries = removeAfter(s.ev.Deliveries, "b", at(20))
			s.ev.Poisoned = nil
		}},
		{"a session stuck behind a poisoned seq, though it delivered again once the episode began", CheckSinkRecovery, func(s *scenario) {
			// b delivers 96 (poisoned) and 97, then nothing: 98 (poisoned)
			// never arrives.
			var keep []Delivery
			for _, d := range s.ev.Deliveries {
				if d.Session != "b" || d.Seq <= 97 {
					keep = append(keep, d)
				}
			}
			s.ev.Deliveries = keep
			s.ev.Faults[1].End = at(19.5) // ended before: recovery-sink saw 96 as new
		}},
		{"the same record stored again and again within one tenure (an MD5 mismatch retried)", CheckRepeats, func(s *scenario) {
			s.copies(98, poisonCopiesMax)
		}},
		{"an innocent record of a poisoned batch stored again and again", CheckRepeats, func(s *scenario) {
			s.copies(97, 6)
		}},
		{"a poisoned message altered (U+FFFD in place of the bad bytes)", CheckSink, func(s *scenario) {
			s.ev.Poisoned[2].Intact, s.ev.Poisoned[2].Form = false, sinkfault.FormJSON
		}},
		{"a poisoned seq at the destination without its payload", CheckSink, func(s *scenario) {
			s.ev.Poisoned = s.ev.Poisoned[1:]
		}},
		{"one copy of a poisoned record altered, another intact", CheckSink, func(s *scenario) {
			s.copies(100, 1)
			s.ev.Poisoned[len(s.ev.Poisoned)-1].Intact = false
		}},
		{"a poisoned seq lost (later ones delivered)", CheckNoLoss, func(s *scenario) {
			s.ev.Deliveries = removeSeq(s.ev.Deliveries, "b", 98)
		}},
		{"a poisoned seq skipped as refused, though the sink fault proxy never refused it", CheckNoLoss, func(s *scenario) {
			s.ev.Deliveries = removeSeq(s.ev.Deliveries, "b", 98)
			s.ev.Skips = []Skip{{Session: "b", Seq: 98, Epoch: 1, Worker: "worker-2", AtNs: at(20.5).UnixNano()}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := destScenario()
			s.poisoned(sinkfault.FormJSON)
			tc.plant(s)
			res := s.judge()
			if len(violationsOf(res, tc.check)) == 0 {
				t.Fatalf("no %s violation; got %+v", tc.check, res.Violations)
			}
		})
	}
}
