package session

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/shared/spec/spectest"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// A spec stored under an older, looser rule, which today's admission
// (spec.Check, at ingest) refuses, still runs: the worker decodes a stored
// spec (spec.Decode) and never admits it again.
func TestStoredSpecUnderAnOlderRuleRuns(t *testing.T) {
	seqs := []string{`{"seq":1}`, `{"seq":2}`, `{"seq":3}`}
	for _, tc := range []struct {
		name, fields string
		msgs         []string
	}{
		{"checkpoint_every below today's minimum", `"checkpoint_every":"500ms"`, seqs},
		{"follow_redirects above today's maximum", `"follow_redirects":9`, seqs},
		{"a header value longer than today's maximum", `"headers":{"X-Key":"` + strings.Repeat("k", spec.MaxHeaderValueLen+1) + `"}`, seqs},
		// Only the folded alias finds these messages' seqs.
		{"a seq_field alias an older ingest kept", `"seq_field":"data.u"`, []string{`{"data":{"u":1}}`, `{"data":{"u":2}}`, `{"data":{"u":3}}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := replayServer(t, tc.msgs)
			u, _ := json.Marshal(url)
			stored := `{"ws_url":` + string(u) + `,` + tc.fields + `}`
			if !strings.Contains(tc.name, "alias") {
				var s spec.Spec
				if err := json.Unmarshal([]byte(stored), &s); err != nil {
					t.Fatal(err)
				}
				if fe := s.Check(nil); fe == nil {
					t.Fatalf("today's Check accepts %s: the case tests nothing", tc.fields)
				}
			}
			h := newHarness(t, testConfig())
			h.put("s1", url, func(it *lease.Item) { it.Spec = stored })
			s, done := h.start("s1")
			testwait.Eventually(t, 5*time.Second, "the seq 3 message", func() bool {
				seqs := h.rec.seqs()
				return len(seqs) > 0 && seqs[len(seqs)-1] == 3
			})
			s.Interrupt(ErrStopRequested)
			if err := wait(t, done, 5*time.Second); errors.Is(err, ErrSourceFailed) {
				t.Fatalf("Run = %v, want the session run", err)
			}
			contiguous(t, h.rec.seqs())
		})
	}
}

// What a worker cannot run fails the session before any dial, the error
// naming the field: a field this build does not know (spec.ErrUnknownField:
// the rollout rule, workers first), no ws_url, a seq_mode it does not know.
func TestStoredSpecTheWorkerCannotRunFails(t *testing.T) {
	src, url := newScripted(t, func(l *link) { l.drain() })
	u, _ := json.Marshal(url)
	for _, tc := range []struct {
		name, stored, names string
		unknown             bool
	}{
		{"an unknown field", `{"ws_url":` + string(u) + `,"` + spectest.NewerField + `":5000}`, `"` + spectest.NewerField + `"`, true},
		{"an unknown nested field", `{"ws_url":` + string(u) + `,"app_ping":{"message":"p","every":"5s","` + spectest.NewerField + `":"1s"}}`, `"app_ping.` + spectest.NewerField + `"`, true},
		{"no ws_url", `{"seq_mode":"none"}`, "(ws_url)", false},
		{"an unknown seq_mode", `{"ws_url":` + string(u) + `,"seq_mode":"sometimes"}`, "(seq_mode)", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testConfig())
			h.put("s1", url, func(it *lease.Item) { it.Spec = tc.stored })
			_, done := h.start("s1")
			err := wait(t, done, 5*time.Second)
			if !errors.Is(err, ErrSourceFailed) || errors.Is(err, spec.ErrUnknownField) != tc.unknown || !strings.Contains(err.Error(), tc.names) {
				t.Fatalf("Run = %v, want ErrSourceFailed naming %s (unknown field: %v)", err, tc.names, tc.unknown)
			}
		})
	}
	if n := src.conns(); n != 0 {
		t.Errorf("the source got %d connections, want none", n)
	}
}
