package streamer

// Planned reconnects end to end (issue 26): sessions on sources that end
// their connections on a schedule (the shared feed's fixed-age closes and
// shutdown notices; websocketd running a script that does the same) switch
// to their next connection before the old one ends. Judged from the
// source's side: no seq lost or delivered twice, every connection opened
// before the one it replaced closed (the source is never without one), the
// worker closed the old one (1000) before the source had to, and the feed,
// which kicks a second connection of another owner, sees the two as one
// tenure's.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/source"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/shared/spec/spectest"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/session"
)

const tenureHeader = "X-Wsfleet-Tenure"

func shutdownNotice() *source.ReconnectOn {
	return &source.ReconnectOn{Match: source.Match{Path: "e", Equals: json.RawMessage(`"serverShutdown"`)}}
}

// plannedStatus is id's session status on w (ok: w holds it).
func plannedStatus(w *testWorker, id string) (st session.Status, ok bool) {
	for _, s := range w.Status().Sessions {
		if s.ConnectionID == id {
			return s, true
		}
	}
	return st, false
}

// checkSwitches judges a source's connection records of one session whose
// connections the worker replaced by planned reconnects: each later one
// opened before the earlier closed, and each earlier one was closed by the
// worker with 1000 (not by the source at its age).
func checkSwitches(t *testing.T, recs []feed.ConnRecord) {
	t.Helper()
	for i := 0; i+1 < len(recs); i++ {
		a, b := recs[i], recs[i+1]
		if !b.OpenedAt.Before(a.ClosedAt) {
			t.Errorf("connection %d opened %s after connection %d closed: the source was without a connection",
				b.ID, b.OpenedAt.Sub(a.ClosedAt), a.ID)
		}
		if a.ClientCode != 1000 {
			t.Errorf("connection %d: the worker's close code %d (reason %s), want 1000 before the source's close", a.ID, a.ClientCode, a.Reason)
		}
	}
}

func TestPlannedReconnectsOnTheFeed(t *testing.T) {
	for _, c := range []struct {
		name   string
		rate   float64
		notice bool
	}{
		{"fixed age, 50 msg/s", 50, false},
		{"shutdown notice, 50 msg/s", 50, true},
		{"fixed age, 1000 msg/s", 1000, false},
		{"shutdown notice, 1000 msg/s", 1000, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			// A source that closes every connection at 5 s (and, with the
			// notice, says so 3 s before), and kicks a second connection
			// of another owner. The margins leave a loaded machine
			// seconds to switch before the source's close.
			fc := feed.Config{Rate: c.rate, Mode: feed.ModeKickOlder, TenureHeader: tenureHeader, MaxConnAge: 5 * time.Second}
			sc := source.Config{MaxConnectionAge: "3s", SwitchTimeout: "5s"}
			if c.notice {
				fc.ShutdownNotice = 3 * time.Second
				sc = source.Config{ReconnectOn: shutdownNotice(), SwitchTimeout: "5s"}
			}
			f := feed.StartForTest(t, fc)
			w := e.worker(func(cfg *Config) { cfg.TenureHeader = tenureHeader })
			id := e.session(func(it *lease.Item) {
				spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.WSURL, s.Config = f.URL(it.ConnectionID), sc })
			})
			e.notify(schema.NotifyStart, id)
			testwait.Eventually(t, 30*time.Second, "3 planned reconnects", func() bool {
				st, ok := plannedStatus(w, id)
				return ok && st.PlannedReconnects >= 3
			})
			e.stop(id)
			testwait.Eventually(t, 10*time.Second, "the stop closes the last connection", func() bool {
				recs := f.Records(id)
				return len(recs) > 0 && !recs[len(recs)-1].EndedAt.IsZero()
			})
			ds := e.sink.get(id)
			if len(ds) == 0 || ds[0].seq != 1 {
				t.Fatalf("deliveries start at %v", ds[:min(1, len(ds))])
			}
			contiguous(t, ds)
			recs := f.Records(id)
			checkSwitches(t, recs)
			ss := f.Session(id)
			if ss.Violations != 0 || ss.Kicks != 0 || ss.PlannedOverlaps < 3 {
				t.Fatalf("feed stats %+v: want no violation or kick, 3 planned overlaps or more", ss)
			}
			if err := feed.NoOverlap(recs); err != nil {
				t.Fatal(err)
			}
			// Everything the feed wrote up to the last delivered seq was
			// delivered, once: contiguous from 1 says it. Report the sink's
			// longest wait between two messages, for the record.
			var longest time.Duration
			for i := 1; i < len(ds); i++ {
				longest = max(longest, ds[i].at.Sub(ds[i-1].at))
			}
			t.Logf("%d messages over %d connections, longest wait between two deliveries %v", len(ds), len(recs), longest)
		})
	}
}

// TestPlannedReconnectsOnWebsocketd: the same against Debian's websocketd
// running testdata/realsource.sh, which ends each connection at ?age= (and
// prints {"e":"serverShutdown"} ?notice= before), at 1,000 messages a
// second; the observer proxy records its connections as the feed does.
func TestPlannedReconnectsOnWebsocketd(t *testing.T) {
	for _, c := range []struct {
		name, query string
		sc          source.Config
	}{
		{"fixed age", "rate=1000&age=5", source.Config{MaxConnectionAge: "3s", SwitchTimeout: "5s"}},
		// docs/sources.md's Binance-style session, its age scaled down.
		{"shutdown notice, nested seq", "mode=nested&rate=1000&age=5&notice=3", source.Config{ReconnectOn: shutdownNotice(), SwitchTimeout: "5s"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			wsd := startWebsocketd(t)
			obs := newObserver(t, wsd.addr())
			w := e.worker(nil)
			id := e.session(func(it *lease.Item) {
				spectest.Edit(t, &it.Spec, func(s *spec.Spec) {
					s.WSURL, s.Headers, s.Config = obs.url()+"?"+c.query, nil, c.sc
					if strings.Contains(c.query, "nested") {
						s.SeqPath = "data.u"
					}
				})
			})
			e.notify(schema.NotifyStart, id)
			testwait.Eventually(t, 30*time.Second, "3 planned reconnects", func() bool {
				st, ok := plannedStatus(w, id)
				return ok && st.PlannedReconnects >= 3
			})
			e.stop(id)
			testwait.Eventually(t, 10*time.Second, "the stop closes the last connection", func() bool {
				recs := obs.records()
				return len(recs) > 0 && !recs[len(recs)-1].EndedAt.IsZero()
			})
			ds := e.sink.get(id)
			if len(ds) == 0 || ds[0].seq != 1 {
				t.Fatalf("deliveries start at %v", ds[:min(1, len(ds))])
			}
			contiguous(t, ds)
			recs := obs.records()
			// The observer sees the client's close only as the end of the
			// TCP connection: judge the overlap, not the close code.
			for i := 0; i+1 < len(recs); i++ {
				if !recs[i+1].OpenedAt.Before(recs[i].ClosedAt) {
					t.Errorf("connection %d opened after connection %d ended", recs[i+1].ID, recs[i].ID)
				}
				if d := recs[i].EndedAt.Sub(recs[i].OpenedAt); d >= 5*time.Second {
					t.Errorf("connection %d lasted %v: the script's age (5 s) ended it, not the switch", recs[i].ID, d)
				}
			}
			st, _ := plannedStatus(w, id)
			t.Logf("%d messages over %d connections; %s", len(ds), len(recs), fmt.Sprintf("%+v", st))
		})
	}
}
