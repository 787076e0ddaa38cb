package session

import (
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/source"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/shared/spec/spectest"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// silentAfterOne is a source that sends seq 1 and then nothing.
func silentAfterOne(t *testing.T) (*scripted, string) {
	t.Helper()
	return newScripted(t, func(l *link) {
		if l.send(websocket.MessageText, `{"seq":1}`) != nil {
			return
		}
		l.drain()
	})
}

// A session with nothing due for a while is not Ticked every pass: Tick
// schedules its next duty (at most TickCeiling away), and a Poke makes it
// due at once.
func TestTickSchedulesTheNextDuty(t *testing.T) {
	_, url := silentAfterOne(t)
	cfg := testConfig()
	cfg.PingEvery, cfg.PingTimeout = 10*time.Second, time.Second // far beyond the ceiling
	h := newHarness(t, cfg)
	h.put("s1", url, nil)
	s, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "seq 1 delivered", func() bool { return h.rec.count() >= 1 })

	// An hour on: past anything the harness's loop (real time) scheduled.
	// That loop may Tick between this Tick and the checks (and schedule
	// from its own, earlier, now): hence the retries.
	now := time.Now().Add(time.Hour)
	testwait.Eventually(t, 5*time.Second, "after a Tick with no duty of its own, due at the ceiling and not before", func() bool {
		s.Tick(now)
		return !s.Due(now.Add(TickCeiling-time.Millisecond)) && s.Due(now.Add(TickCeiling))
	})
	s.Poke()
	if !s.Due(now) {
		t.Fatal("a Poke did not make the session due")
	}
	s.Interrupt(ErrStopRequested)
	_ = wait(t, done, 5*time.Second)
}

// A duty sooner than the ceiling is when the session is due: the idle
// deadline (from the last message) and the app ping.
func TestTickIsDueAtItsOwnDuties(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  source.Config
		// within: the session is due no later than this after a Tick
		within time.Duration
	}{
		{"idle timeout", source.Config{IdleTimeout: "1s"}, time.Second},
		{"app ping", source.Config{AppPing: &source.AppPing{Message: "ping", Every: "1s"}}, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, url := silentAfterOne(t)
			h := newHarness(t, testConfig())
			raw := sourceJSON(t, tc.cfg)
			h.put("s1", url, func(it *lease.Item) { spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.Config = raw }) })
			s, done := h.start("s1")
			testwait.Eventually(t, 5*time.Second, "seq 1 delivered", func() bool { return h.rec.count() >= 1 })
			// Right after a Tick at now, the session is due by the duty's
			// time, well before the ceiling (the harness's loop, which
			// ticks every 20 ms, may have scheduled an app ping a little
			// after now: hence the retries).
			testwait.Eventually(t, 5*time.Second, "due by the duty's time after a Tick", func() bool {
				now := time.Now()
				s.Tick(now)
				return s.Due(now.Add(tc.within))
			})
			s.Interrupt(ErrStopRequested)
			_ = wait(t, done, 5*time.Second)
		})
	}
}

// A Poke is reported once to the loop that keeps due times of its own.
func TestSchedulePokedReportsEachPokeOnce(t *testing.T) {
	sc := &Schedule{}
	s := &Session{env: &Env{Schedule: sc}}
	s.due.Store(time.Now().Add(time.Hour).UnixNano())
	if sc.Poked() {
		t.Fatal("poked before any Poke")
	}
	s.Poke()
	if s.NextDue() != 0 {
		t.Fatalf("NextDue %d after a Poke, want 0 (at the next pass)", s.NextDue())
	}
	if !sc.Poked() {
		t.Fatal("a Poke not reported")
	}
	if sc.Poked() {
		t.Fatal("one Poke reported twice")
	}
}
