package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/source"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/shared/spec/spectest"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// plannedSpec is a feed session resuming through ?from=, with c's source
// protocol.
func (h *harness) putPlanned(id, wsURL string, c source.Config) {
	h.store.Put(lease.Item{ConnectionID: id, DesiredState: schema.StateStarted, Generation: 1, LastSeq: lease.NoSeq,
		Spec: spectest.Stored(h.t, spec.Spec{WSURL: wsURL, Resume: &spec.Resume{QueryParam: "from"}, Config: sourceJSON(h.t, c)})})
}

// streamed is a scripted source that streams {"seq":N} from ?from= (1
// without it) every 2 ms, as a source with history does; per connection
// (1-based n) it may first wait, stay silent, send a notice after some
// messages, or close after some messages. It records how each connection
// ended: the client's close code, or -1.
type streamed struct {
	mu    sync.Mutex
	codes map[int]int
	src   *scripted
	url   string
}

type connPlan struct {
	silent      bool          // send nothing (a new connection that never catches up)
	delay       time.Duration // wait before the first message
	noticeAfter int           // send {"e":"serverShutdown"} after this many messages (0: never)
	closeAfter  int           // close (1001) after this many messages (0: never)
	seqless     bool          // messages without a seq
}

func newStreamed(t *testing.T, plan func(n int) connPlan) *streamed {
	t.Helper()
	st := &streamed{codes: map[int]int{}}
	st.src, st.url = newScripted(t, func(l *link) {
		cp := plan(l.n)
		q, _ := url.ParseQuery(st.src.query(l.n - 1))
		from, err := strconv.ParseInt(q.Get("from"), 10, 64)
		if err != nil || from < 1 {
			from = 1
		}
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			for {
				if _, err := l.read(); err != nil {
					st.mu.Lock()
					st.codes[l.n] = int(websocket.CloseStatus(err))
					st.mu.Unlock()
					return
				}
			}
		}()
		if cp.silent {
			<-ended
			return
		}
		select {
		case <-time.After(cp.delay):
		case <-ended:
			return
		}
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for i := 1; ; i++ {
			msg := fmt.Sprintf(`{"seq":%d}`, from+int64(i)-1)
			if cp.seqless {
				msg = fmt.Sprintf(`{"n":%d}`, i)
			}
			if l.send(websocket.MessageText, msg) != nil {
				return
			}
			if i == cp.noticeAfter && l.send(websocket.MessageText, `{"e":"serverShutdown"}`) != nil {
				return
			}
			if i == cp.closeAfter {
				_ = l.c.Close(websocket.StatusGoingAway, "max age")
				return
			}
			select {
			case <-tick.C:
			case <-ended:
				return
			}
		}
	})
	return st
}

// code is how connection n ended for the source (-1: no close code; absent: open).
func (st *streamed) code(n int) (int, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	c, ok := st.codes[n]
	return c, ok
}

func notice() *source.ReconnectOn {
	return &source.ReconnectOn{Match: source.Match{Path: "e", Equals: json.RawMessage(`"serverShutdown"`)}}
}

// TestPlannedReconnectByAgeHasNoGap: with max_connection_age, each
// connection's successor opens while it still delivers (the feed sees
// both open at once), the old one closes with 1000 once the new one caught
// up, and the sink gets every seq once, in order, at 50 and at 1,000
// messages a second. No reconnect in the usual sense happens.
func TestPlannedReconnectByAgeHasNoGap(t *testing.T) {
	for _, rate := range []float64{50, 1000} {
		t.Run(fmt.Sprintf("%v/s", rate), func(t *testing.T) {
			f := newFeed(t, feed.Config{Rate: rate})
			h := newHarness(t, testConfig())
			h.putPlanned("s1", f.URL("s1"), source.Config{MaxConnectionAge: "1s", SwitchTimeout: "5s"})
			s, done := h.start("s1")
			testwait.Eventually(t, 20*time.Second, "3 planned reconnects", func() bool { return s.Status().PlannedReconnects >= 3 })
			last := s.LastSeq()
			testwait.Eventually(t, 5*time.Second, "deliveries after the switches", func() bool { return s.LastSeq() > last+10 })
			s.Interrupt(ErrStopRequested)
			_ = wait(t, done, 5*time.Second)
			seqs := h.rec.seqs()
			if len(seqs) == 0 || seqs[0] != 1 {
				t.Fatalf("delivered from %v", seqs[:min(len(seqs), 3)])
			}
			contiguous(t, seqs)
			recs := f.Records("s1")
			if len(recs) < 4 {
				t.Fatalf("%d connections, want 4 or more", len(recs))
			}
			for i := 0; i+1 < len(recs); i++ {
				a, b := recs[i], recs[i+1]
				if !b.OpenedAt.Before(a.ClosedAt) {
					t.Errorf("connection %d opened at %s, after connection %d closed at %s: the source was dark between them",
						b.ID, b.OpenedAt.Format(time.StampMicro), a.ID, a.ClosedAt.Format(time.StampMicro))
				}
				if a.ClientCode != int(websocket.StatusNormalClosure) {
					t.Errorf("connection %d closed by the client with %d, want 1000", a.ID, a.ClientCode)
				}
			}
			st := s.Status()
			if st.Reconnects != 0 || st.PlannedFailed != 0 || st.GapSavedMs <= 0 {
				t.Fatalf("status %+v: want no reconnect, no failed plan, some gap saved", st)
			}
			c := h.env.Counters
			if c.PlannedReconnects.Load() != st.PlannedReconnects || c.GapSavedMs.Load() != st.GapSavedMs {
				t.Fatalf("counters %d planned, %d ms saved; status %+v", c.PlannedReconnects.Load(), c.GapSavedMs.Load(), st)
			}
		})
	}
}

// TestReconnectOnNoticeSwitchesAtOnce: a message matching reconnect_on
// starts the next connection at once (long before the source would close
// the old one), and is not delivered unless asked.
func TestReconnectOnNoticeSwitchesAtOnce(t *testing.T) {
	for _, deliver := range []bool{false, true} {
		t.Run(fmt.Sprintf("deliver=%v", deliver), func(t *testing.T) {
			src := newStreamed(t, func(n int) connPlan {
				if n == 1 {
					return connPlan{noticeAfter: 30, closeAfter: 30 + 5000} // the source would close 10 s later
				}
				return connPlan{}
			})
			h := newHarness(t, testConfig())
			on := notice()
			on.Deliver = deliver
			h.putPlanned("s1", src.url, source.Config{ReconnectOn: on, OnMissingSeq: source.MissingDeliver})
			s, done := h.start("s1")
			testwait.Eventually(t, 8*time.Second, "the planned reconnect", func() bool { return s.Status().PlannedReconnects == 1 })
			last := s.LastSeq()
			testwait.Eventually(t, 5*time.Second, "deliveries from the new connection", func() bool { return s.LastSeq() > last+20 })
			s.Interrupt(ErrStopRequested)
			_ = wait(t, done, 5*time.Second)
			if code, ok := src.code(1); !ok || code != int(websocket.StatusNormalClosure) {
				t.Fatalf("the first connection ended with %d (%v), want the client's 1000", code, ok)
			}
			notices := 0
			var seqs []int64
			h.rec.mu.Lock()
			for _, m := range h.rec.msgs {
				if strings.Contains(string(m.Data), "serverShutdown") {
					notices++
				} else {
					seqs = append(seqs, m.Seq)
				}
			}
			h.rec.mu.Unlock()
			if want := map[bool]int{false: 0, true: 1}[deliver]; notices != want {
				t.Fatalf("%d notices delivered, want %d", notices, want)
			}
			contiguous(t, seqs)
			if seqs[0] != 1 || src.src.conns() != 2 {
				t.Fatalf("first seq %d, %d connections", seqs[0], src.src.conns())
			}
		})
	}
}

// TestPlannedReconnectGivesUpAndRetries: a new connection that does not
// catch up within switch_timeout is given up (a failed connect: last_error,
// counted), the old one keeps delivering without a gap, and the next
// attempt (after the backoff) switches.
func TestPlannedReconnectGivesUpAndRetries(t *testing.T) {
	src := newStreamed(t, func(n int) connPlan { return connPlan{silent: n == 2} })
	h := newHarness(t, testConfig())
	h.putPlanned("s1", src.url, source.Config{MaxConnectionAge: "1s", SwitchTimeout: "1s"})
	s, done := h.start("s1")
	testwait.Eventually(t, 10*time.Second, "a given-up attempt", func() bool { return s.Status().PlannedFailed == 1 })
	if st := s.Status(); !strings.Contains(st.LastError, "did not catch up within 1s") || st.PlannedReconnects != 0 {
		t.Fatalf("status %+v", st)
	}
	testwait.Eventually(t, 5*time.Second, "the silent connection closed", func() bool { _, ok := src.code(2); return ok })
	testwait.Eventually(t, 10*time.Second, "the retry's switch", func() bool { return s.Status().PlannedReconnects >= 1 })
	s.Interrupt(ErrStopRequested)
	_ = wait(t, done, 5*time.Second)
	contiguous(t, h.rec.seqs())
	if code, _ := src.code(2); code != int(websocket.StatusNormalClosure) {
		t.Fatalf("the given-up connection ended with %d, want 1000", code)
	}
	if s.Status().Reconnects != 0 {
		t.Fatalf("reconnects %d: the first connection should have stayed", s.Status().Reconnects)
	}
}

// TestEndOfTenureClosesBothConnections: a stop closes the current
// connection and the one a planned reconnect is opening (both with 1000);
// a lapse of the tenure's trust closes both at once.
func TestEndOfTenureClosesBothConnections(t *testing.T) {
	for _, lapse := range []bool{false, true} {
		t.Run(fmt.Sprintf("lapse=%v", lapse), func(t *testing.T) {
			src := newStreamed(t, func(n int) connPlan { return connPlan{silent: n > 1} })
			h := newHarness(t, testConfig())
			h.putPlanned("s1", src.url, source.Config{MaxConnectionAge: "1s", SwitchTimeout: "1m"})
			s, done := h.start("s1")
			// The new connection dialed, not only accepted by the source: a
			// stop while its handshake is still in flight drops it without
			// a close handshake (there is no connection to close yet).
			testwait.Eventually(t, 10*time.Second, "a planned reconnect under way, its connection open", func() bool {
				s.mu.Lock()
				defer s.mu.Unlock()
				return s.next != nil && s.next.conn != nil && src.src.conns() == 2
			})
			var err error
			if lapse {
				h.down.Store(true)
				err = wait(t, done, 10*time.Second)
			} else {
				s.Interrupt(ErrStopRequested)
				err = wait(t, done, 5*time.Second)
			}
			testwait.Eventually(t, 5*time.Second, "both connections closed", func() bool {
				_, a := src.code(1)
				_, b := src.code(2)
				return a && b
			})
			c1, _ := src.code(1)
			c2, _ := src.code(2)
			if lapse {
				if !errors.Is(err, lease.ErrUntrusted) && !errors.Is(err, lease.ErrLeaseLost) {
					t.Fatalf("Run = %v, want the tenure's end", err)
				}
				if c1 != -1 || c2 != -1 {
					t.Fatalf("close codes %d, %d: want both closed at once (no handshake)", c1, c2)
				}
			} else {
				if !errors.Is(err, ErrStopRequested) || c1 != 1000 || c2 != 1000 {
					t.Fatalf("Run = %v, close codes %d, %d: want a stop closing both with 1000", err, c1, c2)
				}
			}
			contiguous(t, h.rec.seqs())
		})
	}
}

// TestSeqlessSwitchesAtTheFirstMessage: under seq_mode none the new
// connection takes over at its first message (the worker's numbering runs
// on without a gap or a repeat).
func TestSeqlessSwitchesAtTheFirstMessage(t *testing.T) {
	src := newStreamed(t, func(int) connPlan { return connPlan{seqless: true} })
	h := newHarness(t, testConfig())
	h.store.Put(lease.Item{ConnectionID: "s1", DesiredState: schema.StateStarted, Generation: 1, LastSeq: lease.NoSeq,
		Spec: spectest.Stored(t, spec.Spec{WSURL: src.url, Config: sourceJSON(t, source.Config{SeqMode: source.SeqNone, MaxConnectionAge: "1s"})})})
	s, done := h.start("s1")
	testwait.Eventually(t, 10*time.Second, "2 planned reconnects", func() bool { return s.Status().PlannedReconnects >= 2 })
	s.Interrupt(ErrStopRequested)
	_ = wait(t, done, 5*time.Second)
	contiguous(t, h.rec.seqs())
	if st := s.Status(); st.SwitchOverlap != 0 || st.Reconnects != 0 {
		t.Fatalf("status %+v: no overlap is dropped without seqs", st)
	}
}

// TestOldConnectionEndingFirstHandsOver: when the source ends the old
// connection before the new one caught up (a notice followed at once by
// the close), the new one, already under way, takes over at its first
// message: no dial after the close.
func TestOldConnectionEndingFirstHandsOver(t *testing.T) {
	src := newStreamed(t, func(n int) connPlan {
		if n == 1 {
			return connPlan{noticeAfter: 40, closeAfter: 40}
		}
		return connPlan{delay: 300 * time.Millisecond}
	})
	h := newHarness(t, testConfig())
	h.putPlanned("s1", src.url, source.Config{ReconnectOn: notice()})
	s, done := h.start("s1")
	testwait.Eventually(t, 8*time.Second, "the hand-over", func() bool { return s.Status().PlannedReconnects == 1 })
	last := s.LastSeq()
	testwait.Eventually(t, 5*time.Second, "deliveries from the new connection", func() bool { return s.LastSeq() > last+20 })
	s.Interrupt(ErrStopRequested)
	_ = wait(t, done, 5*time.Second)
	contiguous(t, h.rec.seqs())
	if n := src.src.conns(); n != 2 {
		t.Fatalf("%d connections, want 2 (no dial after the close)", n)
	}
	if code, _ := src.code(1); code == int(websocket.StatusNormalClosure) {
		t.Fatalf("the first connection was closed by the client; the source was to close it")
	}
}

// TestTenureHeader: with Config.TenureHeader every dial names the tenure,
// so that a source sees a planned reconnect's two connections as one
// owner's.
func TestTenureHeader(t *testing.T) {
	src := newStreamed(t, func(int) connPlan { return connPlan{} })
	cfg := testConfig()
	cfg.TenureHeader = "X-Wsfleet-Tenure"
	h := newHarness(t, cfg)
	h.putPlanned("s1", src.url, source.Config{MaxConnectionAge: "1s"})
	s, done := h.start("s1")
	testwait.Eventually(t, 10*time.Second, "a planned reconnect", func() bool { return s.Status().PlannedReconnects >= 1 })
	s.Interrupt(ErrStopRequested)
	_ = wait(t, done, 5*time.Second)
	want := "w1/" + strconv.FormatInt(s.Held().Epoch(), 10)
	src.src.mu.Lock()
	defer src.src.mu.Unlock()
	for i, hd := range src.src.headers {
		if got := hd.Get("X-Wsfleet-Tenure"); got != want {
			t.Fatalf("connection %d: tenure header %q, want %q", i+1, got, want)
		}
	}
}

// TestTakeKeepsWhatTheOldConnectionHasNotDelivered: the catch-up rule, as
// a table: what a new connection keeps, drops as overlap, and when it is
// caught up.
func TestTakeKeepsWhatTheOldConnectionHasNotDelivered(t *testing.T) {
	p := &proto{seqPath: []string{"seq"}}
	msg := func(seq int64) []byte { return []byte(fmt.Sprintf(`{"seq":%d}`, seq)) }
	cases := []struct {
		name    string
		seqs    []int64 // the new connection's messages (-1: one without a seq)
		last    []int64 // the session's last delivered seq as each arrives
		ready   []bool
		kept    string
		overlap int64
	}{
		{"resumes at the next", []int64{11, 12}, []int64{10, 10}, []bool{true}, "[11]", 0},
		{"replays delivered ones", []int64{8, 9, 10}, []int64{10, 10, 10}, []bool{true}, "[]", 1},
		{"starts ahead, the old one catches up", []int64{15, 16, 17}, []int64{10, 12, 15}, []bool{false, false, true}, "[16 17]", 1},
		{"seq-less before any seq is overlap", []int64{-1, 20, -1, 21}, []int64{10, 10, 15, 19}, []bool{false, false, false, true}, "[20 -1 21]", 1},
		{"nothing delivered yet", []int64{1}, []int64{lease.NoSeq}, []bool{true}, "[1]", 0},
	}
	for _, c := range cases {
		nx := &successor{p: p, first: lease.NoSeq}
		for i, sq := range c.seqs {
			data := msg(sq)
			if sq == -1 {
				data = []byte(`{"other":1}`)
			}
			ready, err := nx.take(websocket.MessageText, data, c.last[i])
			if err != nil {
				t.Fatal(err)
			}
			want := i < len(c.ready) && c.ready[i]
			if ready != want {
				t.Fatalf("%s: message %d ready %v, want %v", c.name, i, ready, want)
			}
			if ready {
				break
			}
		}
		var kept []int64
		for _, m := range nx.buf[nx.head:] {
			kept = append(kept, m.seq)
		}
		if got := fmt.Sprint(kept); got != c.kept && !(c.kept == "[]" && kept == nil) || nx.overlap != c.overlap {
			t.Fatalf("%s: kept %s, overlap %d; want %s, %d", c.name, got, nx.overlap, c.kept, c.overlap)
		}
	}
}

// TestPlannedAttemptsPerConnectionAreBounded: a source that never lets a
// second connection catch up is tried MaxPlanAttempts times per
// connection, then left to end on its own schedule (no dialing it again and
// again).
func TestPlannedAttemptsPerConnectionAreBounded(t *testing.T) {
	src := newStreamed(t, func(n int) connPlan { return connPlan{silent: n > 1} })
	h := newHarness(t, testConfig())
	h.putPlanned("s1", src.url, source.Config{MaxConnectionAge: "1s", SwitchTimeout: "1s"})
	s, done := h.start("s1")
	testwait.Eventually(t, 20*time.Second, "the attempts given up", func() bool { return s.Status().PlannedFailed == MaxPlanAttempts })
	testwait.Holds(t, 3*time.Second, "no further attempt on this connection", func() bool {
		return src.src.conns() == 1+MaxPlanAttempts && !s.Status().Switching
	})
	s.Interrupt(ErrStopRequested)
	_ = wait(t, done, 5*time.Second)
	contiguous(t, h.rec.seqs())
}

// TestNewGenerationDropsTheSwitchWithoutAFailure: a new generation during a
// planned reconnect drops the new connection (dialed for the old
// configuration) and reconnects with the new one; that is not a failed
// attempt.
func TestNewGenerationDropsTheSwitchWithoutAFailure(t *testing.T) {
	src := newStreamed(t, func(n int) connPlan { return connPlan{silent: n == 2} })
	h := newHarness(t, testConfig())
	h.putPlanned("s1", src.url, source.Config{MaxConnectionAge: "1s", SwitchTimeout: "1m"})
	s, done := h.start("s1")
	testwait.Eventually(t, 10*time.Second, "a planned reconnect under way", func() bool {
		return s.Status().Switching && src.src.conns() == 2
	})
	it, err := h.store.Get(context.Background(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	it.Generation = 2
	h.store.Put(it)
	h.notify("s1")
	testwait.Eventually(t, 10*time.Second, "the new generation's connection", func() bool { return src.src.conns() >= 3 && s.Status().Generation == 2 })
	testwait.Eventually(t, 5*time.Second, "the dropped connection closed", func() bool { _, ok := src.code(2); return ok })
	if st := s.Status(); st.PlannedFailed != 0 || st.LastError != "" {
		t.Fatalf("status %+v: a dropped switch is not a failure", st)
	}
	s.Interrupt(ErrStopRequested)
	_ = wait(t, done, 5*time.Second)
}

// aheadSource is a source whose first connection sends seqs 1..20 and a
// reconnect_on notice, then nothing more (it stays open), and whose later
// connections stream seqs from 1000 on, 32 KiB each, as fast as the client
// reads: a live source whose new connection starts far ahead of what the
// current one delivered, as when the current one waits for sink room.
func aheadSource(t *testing.T) string {
	t.Helper()
	pad := strings.Repeat("x", 32<<10)
	_, url := newScripted(t, func(l *link) {
		if l.n == 1 {
			for i := 1; i <= 20; i++ {
				if l.send(websocket.MessageText, fmt.Sprintf(`{"seq":%d}`, i)) != nil {
					return
				}
			}
			if l.send(websocket.MessageText, `{"e":"serverShutdown"}`) != nil {
				return
			}
			l.drain()
			return
		}
		go l.drain()
		for i := int64(1000); ; i++ {
			if l.send(websocket.MessageText, fmt.Sprintf(`{"seq":%d,"pad":%q}`, i, pad)) != nil {
				return
			}
		}
	})
	return url
}

// TestSwitchBuffersAreChargedToTheWorkersBudget: new connections that run
// ahead of their sessions' current ones hold at most the worker's switch
// budget together, not MaxSwitchBytes each: one that finds the budget full
// is given up (a failed attempt, named so), the current connection stays,
// and every byte goes back to the budget.
func TestSwitchBuffersAreChargedToTheWorkersBudget(t *testing.T) {
	const budget = 256 << 10
	urls := []string{aheadSource(t), aheadSource(t)} // before the harness: its cleanup ends the sessions first
	h := newHarness(t, testConfig())
	h.env.Switch = NewSwitchBudget(budget)
	var runs running
	for i, id := range []string{"s1", "s2"} {
		h.putPlanned(id, urls[i], source.Config{ReconnectOn: notice(), SwitchTimeout: "30s", OnMissingSeq: source.MissingDeliver})
		s, done := h.start(id)
		runs.sessions, runs.dones = append(runs.sessions, s), append(runs.dones, done)
	}
	for _, s := range runs.sessions {
		testwait.Eventually(t, 10*time.Second, "a planned reconnect given up for the budget", func() bool {
			return s.Status().PlannedFailed >= 1 && strings.Contains(s.Status().LastError, "switch buffer budget")
		})
		if st := s.Status(); !st.Connected || st.Reconnects != 0 || st.PlannedReconnects != 0 || s.LastSeq() != 20 {
			t.Fatalf("status %+v, last seq %d: the current connection should have stayed", st, s.LastSeq())
		}
	}
	testwait.Eventually(t, 10*time.Second, "every attempt over, the budget given back", func() bool {
		for _, s := range runs.sessions {
			if s.Status().Switching {
				return false
			}
		}
		return h.env.Switch.Used() == 0
	})
	runs.stop(t)
}
