package feed_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/wsfleet/wsfleet/scripts/feed"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type msg struct {
	Session string `json:"session"`
	Seq     int64  `json:"seq"`
}

func start(t *testing.T, mutate func(*feed.Config)) (*feed.Server, *feed.Client) {
	t.Helper()
	cfg := feed.DefaultConfig()
	cfg.Rate = 200
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := feed.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return srv, feed.NewClient("http://" + ln.Addr().String())
}

func dial(t *testing.T, c *feed.Client, session, query string) (*websocket.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, c.URL(session)+query, nil)
	return ws, err
}

func read(t *testing.T, ws *websocket.Conn, n int) []msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out []msg
	for len(out) < n {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("read after %d messages: %v", len(out), err)
		}
		var m msg
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("decode %q: %v", b, err)
		}
		out = append(out, m)
	}
	return out
}

func waitClosed(t *testing.T, srv *feed.Server, session string, n int) []feed.ConnRecord {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		recs := srv.Records(session)
		closed := 0
		for _, r := range recs {
			if !r.Open() {
				closed++
			}
		}
		if closed >= n {
			return recs
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %d closed records of %s, have %+v", n, session, recs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSeqResumeAndRecords(t *testing.T) {
	srv, c := start(t, nil)
	ws, err := dial(t, c, "s1", "")
	if err != nil {
		t.Fatal(err)
	}
	got := read(t, ws, 10)
	for i, m := range got {
		if m.Seq != int64(i+1) || m.Session != "s1" {
			t.Fatalf("message %d: %+v", i, m)
		}
	}
	_ = ws.Close(websocket.StatusNormalClosure, "")
	recs := waitClosed(t, srv, "s1", 1)
	r := recs[0]
	if r.Reason != feed.ReasonClient || r.FirstSeq != 1 || r.LastSeq < 10 || r.Sent != r.LastSeq-r.FirstSeq+1 {
		t.Fatalf("record %+v", r)
	}
	// Resume from 4: the feed replays from 4, contiguously.
	ws, err = dial(t, c, "s1", "?from=4")
	if err != nil {
		t.Fatal(err)
	}
	got = read(t, ws, 5)
	if got[0].Seq != 4 || got[4].Seq != 8 {
		t.Fatalf("resume: %+v", got)
	}
	_ = ws.Close(websocket.StatusNormalClosure, "")
	recs = waitClosed(t, srv, "s1", 2)
	if recs[1].From != 4 || recs[1].FirstSeq != 4 {
		t.Fatalf("resumed record %+v", recs[1])
	}
	// Without from the next connection starts live: after every seq produced
	// so far (production goes on while nobody is connected).
	head := srv.Stats().Sessions["s1"].Head
	ws, err = dial(t, c, "s1", "")
	if err != nil {
		t.Fatal(err)
	}
	if m := read(t, ws, 1)[0]; m.Seq <= head {
		t.Fatalf("live start: seq %d, head was %d", m.Seq, head)
	}
	_ = ws.Close(websocket.StatusNormalClosure, "")
	st := srv.Stats().Sessions["s1"]
	if st.MaxConcurrent != 1 || st.Connections != 3 || st.Kicks != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestKickOlder(t *testing.T) {
	srv, c := start(t, nil)
	a, err := dial(t, c, "k", "")
	if err != nil {
		t.Fatal(err)
	}
	read(t, a, 2)
	b, err := dial(t, c, "k", "?from=1")
	if err != nil {
		t.Fatal(err)
	}
	read(t, b, 2)
	// a is closed with StatusKicked.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		if _, _, err := a.Read(ctx); err != nil {
			if websocket.CloseStatus(err) != feed.StatusKicked {
				t.Fatalf("kicked connection: %v", err)
			}
			break
		}
	}
	_ = b.Close(websocket.StatusNormalClosure, "")
	recs := waitClosed(t, srv, "k", 2)
	if recs[0].Reason != feed.ReasonKicked {
		t.Fatalf("first record %+v", recs[0])
	}
	st := srv.Stats()
	if s := st.Sessions["k"]; s.MaxConcurrent != 2 || s.Kicks != 1 {
		t.Fatalf("stats %+v", s)
	}
	if len(st.Overlaps) != 1 || st.Overlaps[0].End.IsZero() || st.Overlaps[0].Max != 2 {
		t.Fatalf("overlaps %+v", st.Overlaps)
	}
}

func TestRefuseNewerAndControls(t *testing.T) {
	_, c := start(t, func(cfg *feed.Config) { cfg.Mode = feed.ModeRefuseNewer })
	a, err := dial(t, c, "r", "")
	if err != nil {
		t.Fatal(err)
	}
	read(t, a, 1)
	_, err = dial(t, c, "r", "")
	if err == nil {
		t.Fatal("second connection admitted in refuse-newer mode")
	}
	ctx := context.Background()
	if n, err := c.Drop(ctx, "r", true); err != nil || n != 1 {
		t.Fatalf("drop: %d %v", n, err)
	}
	if _, _, err := a.Read(ctx); err == nil {
		t.Fatal("dropped connection still readable")
	}
	a.CloseNow()
	if err := c.SetRefuse(ctx, "", true); err != nil {
		t.Fatal(err)
	}
	if _, err := dial(t, c, "r", ""); err == nil {
		t.Fatal("connection admitted while refusing")
	}
	if err := c.SetRefuse(ctx, "", false); err != nil {
		t.Fatal(err)
	}
	if err := c.SetMode(ctx, feed.ModeKickOlder); err != nil {
		t.Fatal(err)
	}
	b, err := dial(t, c, "r", "")
	if err != nil {
		t.Fatal(err)
	}
	read(t, b, 1)
	b.Close(websocket.StatusNormalClosure, "")
	recs, err := c.Records(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, r := range recs {
		reasons = append(reasons, r.Reason)
	}
	want := []string{feed.ReasonAborted, feed.ReasonRefused, feed.ReasonRefused}
	for i, w := range want {
		if i >= len(reasons) || reasons[i] != w {
			// The first record closes after the refused attempt is recorded.
			if !(i < 2 && len(reasons) > 1 && reasons[1-i] == w) {
				t.Fatalf("reasons %v, want %v first", reasons, want)
			}
		}
	}
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s := st.Sessions["r"]; s.Refused != 2 || s.MaxConcurrent != 1 || st.Mode != feed.ModeKickOlder {
		t.Fatalf("stats %+v", st)
	}
}

func TestBadRequests(t *testing.T) {
	_, c := start(t, nil)
	for _, path := range []string{"/feed/bad%20name", "/feed/x?from=-1", "/feed/x?from=abc"} {
		resp, err := http.Get(c.Base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %s", path, resp.Status)
		}
	}
	if err := c.SetMode(context.Background(), "nope"); err == nil {
		t.Error("bad mode accepted")
	}
}

func TestConfigValidate(t *testing.T) {
	if err := feed.DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := feed.Config{Rate: -1, Mode: "x", PathPrefix: "feed"}
	err := bad.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	if _, err := feed.New(bad); !errors.Is(err, err) || err == nil {
		t.Fatal("New accepted an invalid config")
	}
}

func TestAllowCountsOverlap(t *testing.T) {
	srv, c := start(t, func(cfg *feed.Config) {
		cfg.Mode = feed.ModeAllow
		cfg.RequireHeaders = map[string]string{"X-Key": "k"}
	})
	if _, err := dial(t, c, "a", ""); err == nil {
		t.Fatal("handshake without the required header admitted")
	}
	h := http.Header{"X-Key": {"k"}}
	ctx := context.Background()
	a, _, err := websocket.Dial(ctx, c.URL("a"), &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := websocket.Dial(ctx, c.URL("a"), &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	read(t, a, 1)
	read(t, b, 1)
	a.Close(websocket.StatusNormalClosure, "")
	b.Close(websocket.StatusNormalClosure, "")
	waitClosed(t, srv, "a", 3)
	st := srv.Stats()
	if s := st.Sessions["a"]; s.MaxConcurrent != 2 || s.Kicks != 0 || len(st.Overlaps) != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestResumeOnAFreshFeedDoesNotStall(t *testing.T) {
	_, c := start(t, func(cfg *feed.Config) { cfg.Rate = 2 })
	ws, err := dial(t, c, "old", "?from=500")
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if m := read(t, ws, 1)[0]; m.Seq != 500 {
		t.Fatalf("first seq %d", m.Seq)
	}
	if d := time.Since(began); d > 700*time.Millisecond {
		t.Fatalf("first message after %v: the stream stalled", d)
	}
	ws.Close(websocket.StatusNormalClosure, "")
}

// A client that stops reading (a frozen process) never answers pings: with
// PingEvery set the feed closes its connection; a reading client is kept.
func TestPingClosesUnresponsiveClients(t *testing.T) {
	bad := feed.DefaultConfig()
	bad.PingEvery = time.Second
	if bad.Validate() == nil {
		t.Fatal("pings without a timeout validated")
	}
	srv, c := start(t, func(cfg *feed.Config) {
		cfg.Rate = 20
		cfg.PingEvery = 100 * time.Millisecond
		cfg.PingTimeout = 200 * time.Millisecond
	})
	frozen, err := dial(t, c, "frozen", "")
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.CloseNow()
	alive, err := dial(t, c, "alive", "")
	if err != nil {
		t.Fatal(err)
	}
	// The reader answers pings (coder/websocket replies from its reader).
	readCtx, stopReading := context.WithCancel(context.Background())
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			if _, _, err := alive.Read(readCtx); err != nil {
				return
			}
		}
	}()
	recs := waitClosed(t, srv, "frozen", 1)
	if r := recs[0]; r.Reason != feed.ReasonPingLost || r.ClosedAt.Sub(r.OpenedAt) > 2*time.Second {
		t.Fatalf("frozen client's record %+v", r)
	}
	time.Sleep(500 * time.Millisecond)
	if recs := srv.Records("alive"); len(recs) != 1 || !recs[0].Open() {
		t.Fatalf("a reading client was dropped: %+v", recs)
	}
	stopReading()
	<-readDone
	alive.CloseNow()
	waitClosed(t, srv, "alive", 1)
}
