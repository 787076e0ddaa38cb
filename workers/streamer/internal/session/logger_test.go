package session

import (
	"bufio"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// jsonLines are the JSON lines in b.
func jsonLines(b *lockedBuffer) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// The session's lines carry its connection_id and lease_epoch on the
// worker's logger (worker_id), though it keeps no logger of its own; debug
// lines cost nothing when debug is off.
func TestSessionLinesNameTheSessionAndTenure(t *testing.T) {
	_, url := newScripted(t, func(l *link) { l.drain() })
	h := newHarness(t, testConfig())
	buf := &lockedBuffer{}
	h.env.Log = zerolog.New(buf).Level(zerolog.InfoLevel).With().Str("worker_id", "w1").Logger()
	h.put("s-log", url, nil)
	s, done := h.start("s-log")
	var open map[string]any
	testwait.Eventually(t, 5*time.Second, "the session open line", func() bool {
		for _, m := range jsonLines(buf) {
			if m["message"] == "session open" {
				open = m
				return true
			}
		}
		return false
	})
	if open["connection_id"] != "s-log" || open["worker_id"] != "w1" || open["lease_epoch"] != float64(s.Held().Epoch()) {
		t.Fatalf("session open line %v: want connection_id s-log, worker_id w1, lease_epoch %d", open, s.Held().Epoch())
	}
	s.Interrupt(ErrStopRequested)
	if err := wait(t, done, 5*time.Second); !errors.Is(err, ErrStopRequested) {
		t.Fatalf("stop: %v", err)
	}
	// The session has ended: its logger may change under it now.
	if ev := s.debug(); ev != nil {
		t.Fatal("a debug event with debug off: the per-gap line would build a logger it drops")
	}
	h.env.Log = h.env.Log.Level(zerolog.DebugLevel)
	if ev := s.debug(); ev == nil {
		t.Fatal("no debug event with debug on")
	}
}
