package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/source"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/shared/spec/spectest"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// scripted is a WebSocket source whose every connection runs script (n
// counts connections from 1) and which records the text frames the
// client sent on each.
type scripted struct {
	mu       sync.Mutex
	received [][]string // per connection
	queries  []string   // per connection: the handshake's query
	headers  []http.Header
}

// header is connection conn's (0-based) handshake header.
func (s *scripted) header(conn int) http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.headers[conn]
}

func (s *scripted) query(conn int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[conn]
}

func (s *scripted) conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.received)
}

func (s *scripted) got(conn int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if conn >= len(s.received) {
		return nil
	}
	return append([]string(nil), s.received[conn]...)
}

// link is one server-side connection of a scripted source.
type link struct {
	t   *testing.T
	s   *scripted
	n   int // 1-based connection number
	c   *websocket.Conn
	ctx context.Context
}

// read returns the next frame the client sent (recorded).
func (l *link) read() (string, error) {
	_, b, err := l.c.Read(l.ctx)
	if err == nil {
		l.s.mu.Lock()
		l.s.received[l.n-1] = append(l.s.received[l.n-1], string(b))
		l.s.mu.Unlock()
	}
	return string(b), err
}

func (l *link) send(typ websocket.MessageType, m string) error {
	return l.c.Write(l.ctx, typ, []byte(m))
}

// drain records what the client sends until the connection ends.
func (l *link) drain() {
	for {
		if _, err := l.read(); err != nil {
			return
		}
	}
}

func newScripted(t *testing.T, script func(l *link)) (*scripted, string) {
	t.Helper()
	s := &scripted{}
	var wg sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wg.Add(1)
		defer wg.Done()
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		s.mu.Lock()
		s.received = append(s.received, nil)
		s.queries = append(s.queries, r.URL.RawQuery)
		s.headers = append(s.headers, r.Header.Clone())
		n := len(s.received)
		s.mu.Unlock()
		script(&link{t: t, s: s, n: n, c: c, ctx: r.Context()})
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close(); wg.Wait() })
	return s, "ws" + strings.TrimPrefix(srv.URL, "http")
}

// sourceJSON is c, checked.
func sourceJSON(t *testing.T, c source.Config) source.Config {
	t.Helper()
	if fe := c.Validate(); fe != nil {
		t.Fatal(fe)
	}
	return c
}

func text(s string) *string { return &s }

// A Coinbase-style source: subscribe first (the resume point inside), get
// an ack, then data. Every connect re-sends the open messages with the
// current {{resume_from}}; the ack is not delivered.
func TestOpenMessagesOnEveryConnectWithResumeFrom(t *testing.T) {
	src, url := newScripted(t, func(l *link) {
		auth, err := l.read()
		if err != nil || auth != `{"op":"auth","key":"k3y"}` {
			return
		}
		sub, err := l.read()
		if err != nil {
			return
		}
		var req struct{ From, ID string }
		if json.Unmarshal([]byte(sub), &req) != nil {
			return
		}
		from := int64(1)
		fmt.Sscan(req.From, &from)
		if l.send(websocket.MessageText, `{"type":"subscriptions"}`) != nil {
			return
		}
		for i := from; i < from+5; i++ {
			if l.send(websocket.MessageText, fmt.Sprintf(`{"type":"tick","seq":%d}`, i)) != nil {
				return
			}
		}
		if l.n == 1 {
			return // the source drops the first connection
		}
		l.drain()
	})
	h := newHarness(t, testConfig())
	cfg := sourceJSON(t, source.Config{OpenMessages: []source.OpenMessage{
		{Text: text(`{"op":"auth","key":"k3y"}`)},
		{Text: text(`{"op":"subscribe","from":"{{resume_from}}","id":"{{connection_id}}"}`),
			WaitFor: &source.Match{Path: "type", Equals: json.RawMessage(`"subscriptions"`), Timeout: "2s"}},
	}})
	h.put("s1", url, func(it *lease.Item) { spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.Config, s.Resume = cfg, nil }) })
	s, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "10 messages over two connections", func() bool { return h.rec.count() >= 10 })
	s.Interrupt(ErrStopRequested)
	_ = wait(t, done, 5*time.Second)
	seqs := h.rec.seqs()
	contiguous(t, seqs)
	if seqs[0] != 1 {
		t.Fatalf("first seq %d, want 1", seqs[0])
	}
	for _, m := range h.rec.msgs {
		if strings.Contains(string(m.Data), "subscriptions") {
			t.Fatal("the subscribe ack was delivered")
		}
	}
	if got := src.got(0); len(got) < 2 || got[1] != `{"op":"subscribe","from":"","id":"s1"}` {
		t.Fatalf("first connection got %q: want the subscribe with an empty resume_from (nothing delivered yet)", got)
	}
	if got := src.got(1); len(got) < 2 || got[0] != `{"op":"auth","key":"k3y"}` || got[1] != `{"op":"subscribe","from":"6","id":"s1"}` {
		t.Fatalf("reconnect got %q: want auth then subscribe from 6", got)
	}
}

// A wait_for that is not met (no ack) ends the connection: nothing is
// delivered, and the session reconnects.
func TestWaitForTimeoutReconnectsWithoutDelivering(t *testing.T) {
	src, url := newScripted(t, func(l *link) { l.drain() }) // never acknowledges
	h := newHarness(t, testConfig())
	cfg := sourceJSON(t, source.Config{OpenMessages: []source.OpenMessage{
		{Text: text("subscribe"), WaitFor: &source.Match{Path: "ok", Equals: json.RawMessage(`true`), Timeout: "200ms"}},
		{Text: text("second")},
	}})
	h.put("s1", url, func(it *lease.Item) { spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.Config = cfg }) })
	s, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "a reconnect after the wait_for timeout", func() bool { return src.conns() >= 2 })
	s.Interrupt(ErrStopRequested)
	_ = wait(t, done, 5*time.Second)
	if got := src.got(0); len(got) != 1 || got[0] != "subscribe" {
		t.Fatalf("first connection got %q: the second open message must wait for the ack", got)
	}
	if h.rec.count() != 0 {
		t.Fatalf("%d messages delivered", h.rec.count())
	}
}

// A Zoom-style keep-alive (answered, not delivered) and an OKX-style text
// ping whose "pong" is not delivered either; a source that is then silent
// for longer than idle_timeout is reconnected.
func TestKeepaliveAppPingAndIdleTimeout(t *testing.T) {
	src, url := newScripted(t, func(l *link) {
		if l.send(websocket.MessageText, `{"msg_type":"KEEP_ALIVE_REQ","timestamp":1}`) != nil {
			return
		}
		if r, err := l.read(); err != nil || r != `{"msg_type":"KEEP_ALIVE_RESP","id":"s1"}` {
			return // an unanswered keep-alive: the source drops the client
		}
		if l.send(websocket.MessageText, `{"seq":1,"event":"media"}`) != nil {
			return
		}
		for {
			r, err := l.read()
			if err != nil {
				return
			}
			if r == "ping" && l.send(websocket.MessageText, "pong") != nil {
				return
			}
		}
	})
	h := newHarness(t, testConfig())
	cfg := sourceJSON(t, source.Config{
		KeepaliveReply: &source.KeepaliveReply{Match: source.Match{Path: "msg_type", Equals: json.RawMessage(`"KEEP_ALIVE_REQ"`)},
			Reply: `{"msg_type":"KEEP_ALIVE_RESP","id":"{{connection_id}}"}`},
		AppPing:     &source.AppPing{Message: "ping", Every: "1s", Pong: "pong"},
		IdleTimeout: "2500ms",
	})
	h.put("s1", url, func(it *lease.Item) { spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.Config, s.Resume = cfg, nil }) })
	s, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "two app pings on the first connection", func() bool {
		return strings.Count(strings.Join(src.got(0), "\n"), "ping") >= 2
	})
	// The source got the second ping; its pong may still be on its way.
	testwait.Eventually(t, 5*time.Second, "the keep-alive and two pongs read as control messages", func() bool {
		return s.Status().Controls >= 3
	})
	// The pongs are traffic: the idle timeout does not fire while they flow.
	if src.conns() != 1 {
		t.Fatalf("%d connections while pongs flow", src.conns())
	}
	s.Interrupt(ErrStopRequested)
	_ = wait(t, done, 5*time.Second)
	if got := h.rec.seqs(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("delivered %v, want only seq 1 (keep-alives and pongs are not delivered)", got)
	}
	if st := s.Status(); st.Controls < 3 {
		t.Fatalf("control messages %d, want the keep-alive and the pongs", st.Controls)
	}
}

// A source that keeps TCP open but sends nothing is reconnected after
// idle_timeout.
func TestIdleTimeoutReconnects(t *testing.T) {
	src, url := newScripted(t, func(l *link) {
		if l.send(websocket.MessageText, fmt.Sprintf(`{"seq":%d}`, l.n)) != nil {
			return
		}
		l.drain() // then silence
	})
	h := newHarness(t, testConfig())
	cfg := sourceJSON(t, source.Config{IdleTimeout: "1s"})
	h.put("s1", url, func(it *lease.Item) { spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.Config = cfg }) })
	start := time.Now()
	s, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "a reconnect after 1 s of silence", func() bool { return src.conns() >= 2 })
	if d := time.Since(start); d < time.Second {
		t.Fatalf("reconnected after %v, before the idle timeout", d)
	}
	s.Interrupt(ErrStopRequested)
	_ = wait(t, done, 5*time.Second)
}

// Seq-less binary frames (audio) under seq_mode none: all delivered, as
// binary, numbered by the worker; a reconnect continues the numbering and
// sends no resume parameter.
func TestSeqModeNoneBinary(t *testing.T) {
	src, url := newScripted(t, func(l *link) {
		for i := 0; i < 3; i++ {
			if l.send(websocket.MessageBinary, string([]byte{0, byte(l.n), byte(i), 0xff})) != nil {
				return
			}
		}
		if l.n == 1 {
			return
		}
		l.drain()
	})
	h := newHarness(t, testConfig())
	cfg := sourceJSON(t, source.Config{SeqMode: source.SeqNone})
	h.put("s1", url+"/audio?k=v", func(it *lease.Item) { spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.Config, s.Resume = cfg, nil }) })
	s, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "6 frames over two connections", func() bool { return h.rec.count() >= 6 })
	s.Interrupt(ErrStopRequested)
	_ = wait(t, done, 5*time.Second)
	if q := src.query(1); q != "k=v" {
		t.Fatalf("reconnect query %q: seq_mode none sends no resume parameter", q)
	}
	seqs := h.rec.seqs()
	contiguous(t, seqs)
	if seqs[0] != 1 {
		t.Fatalf("first seq %d, want 1 (first tenure)", seqs[0])
	}
	for i, m := range h.rec.msgs[:6] {
		if !m.Binary || len(m.Data) != 4 || m.Data[3] != 0xff {
			t.Fatalf("message %d: binary %v data %x", i, m.Binary, m.Data)
		}
	}
	if h.keeper.Held()[0].LastSeq() != seqs[len(seqs)-1] {
		t.Fatalf("observed %d, want %d (checkpointed like a source seq)", h.keeper.Held()[0].LastSeq(), seqs[len(seqs)-1])
	}
}

// Under seq_mode none a later tenure numbers above everything an earlier
// one may have delivered, even past its last checkpoint.
func TestSeqModeNoneNextTenureNumbersAbove(t *testing.T) {
	_, url := newScripted(t, func(l *link) {
		for i := 0; i < 3; i++ {
			if l.send(websocket.MessageText, "frame") != nil {
				return
			}
		}
		l.drain()
	})
	h := newHarness(t, testConfig())
	cfg := sourceJSON(t, source.Config{SeqMode: source.SeqNone})
	// A checkpoint of 7 from an earlier tenure (epoch 1); this one is epoch 2.
	h.put("s1", url, func(it *lease.Item) {
		spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.Config, s.Resume = cfg, nil })
		it.LastSeq, it.Epoch = 7, 1
	})
	s, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "3 frames", func() bool { return h.rec.count() >= 3 })
	s.Interrupt(ErrStopRequested)
	_ = wait(t, done, 5*time.Second)
	seqs := h.rec.seqs()
	if s.Held().Epoch() != 2 || seqs[0] != 1<<32+1 {
		t.Fatalf("epoch %d first seq %d, want epoch 2 and 2^32+1", s.Held().Epoch(), seqs[0])
	}
	contiguous(t, seqs)
}

// Nested and string seqs (seq_path), and on_missing_seq: drop counts,
// deliver passes the message on with the last seq.
func TestSeqPathAndOnMissingSeq(t *testing.T) {
	msgs := []string{`{"data":{"u":"1"}}`, `{"event":"hello"}`, `{"data":{"u":2}}`, `{"data":{"u":"x"}}`, `{"data":{"u":3}}`}
	for _, tc := range []struct {
		missing string
		want    string
		subs    string
		dropped int64
	}{
		{source.MissingDrop, "[1 2 3]", "[0 0 0]", 2},
		{source.MissingDeliver, "[1 1 2 2 3]", "[0 1 0 1 0]", 0},
	} {
		t.Run(tc.missing, func(t *testing.T) {
			url := replayServer(t, msgs)
			h := newHarness(t, testConfig())
			cfg := sourceJSON(t, source.Config{OnMissingSeq: tc.missing})
			h.put("s1", url, func(it *lease.Item) {
				spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.SeqPath, s.Config = "data.u", cfg })
			})
			s, done := h.start("s1")
			testwait.Eventually(t, 5*time.Second, "the seq 3 message", func() bool {
				seqs := h.rec.seqs()
				return len(seqs) > 0 && seqs[len(seqs)-1] == 3
			})
			s.Interrupt(ErrStopRequested)
			_ = wait(t, done, 5*time.Second)
			if got := fmt.Sprint(h.rec.seqs()); got != tc.want {
				t.Fatalf("delivered seqs %s, want %s", got, tc.want)
			}
			var subs []int64
			for _, m := range h.rec.msgs {
				subs = append(subs, m.Sub)
			}
			if got := fmt.Sprint(subs); got != tc.subs {
				t.Fatalf("subs %s, want %s", got, tc.subs)
			}
			if d := s.Status().SeqMissingDropped; d != tc.dropped || h.env.Counters.SeqMissingDropped.Load() != tc.dropped {
				t.Fatalf("dropped %d (counter %d), want %d", d, h.env.Counters.SeqMissingDropped.Load(), tc.dropped)
			}
		})
	}
}

// A stored source_config that ingest would refuse (a hand-edited item)
// fails the session, and the error names the field without quoting it.
func TestInvalidStoredSourceFailsWithoutQuotingIt(t *testing.T) {
	h := newHarness(t, testConfig())
	h.put("s1", "ws://127.0.0.1:1/x", func(it *lease.Item) {
		it.Spec = `{"ws_url":"ws://127.0.0.1:1/x","open_messages":[{"text":"{{s3cret-token}}"}]}`
	})
	_, done := h.start("s1")
	err := wait(t, done, 5*time.Second)
	if !errors.Is(err, ErrSourceFailed) || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "open_messages") {
		t.Fatalf("run ended with %v: want ErrSourceFailed naming open_messages, quoting nothing", err)
	}
}
