package feed_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// within bounds every wait of these tests: the machine may be loaded.
const within = 5 * time.Second

type msg struct {
	Session string `json:"session"`
	Seq     int64  `json:"seq"`
	Pad     string `json:"pad"`
	Auth    string `json:"auth"`
}

func start(t *testing.T, cfg feed.Config) (*feed.Server, *feed.Client) {
	t.Helper()
	if cfg.Rate == 0 {
		cfg.Rate = 200
	}
	srv := feed.StartForTest(t, cfg)
	return srv, feed.NewClient("http://" + srv.Addr())
}

func dial(t *testing.T, url string, h http.Header) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h})
}

func mustDial(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	ws, _, err := dial(t, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	return ws
}

func read(t *testing.T, ws *websocket.Conn, n int) []msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
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

// readToEnd reads ws until the connection ends (messages sent before the end
// are still buffered) and returns the error that ended it.
func readToEnd(t *testing.T, ws *websocket.Conn) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		if _, _, err := ws.Read(ctx); err != nil {
			if ctx.Err() != nil {
				t.Fatalf("connection still open after %s", within)
			}
			return err
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Eventually(t, within, what, cond)
}

// waitEnded waits until the feed saw every connection of session end (the
// records are final) and returns them.
func waitEnded(t *testing.T, srv *feed.Server, session string) []feed.ConnRecord {
	t.Helper()
	waitFor(t, "the feed sees every connection of "+session+" end", func() bool { return srv.Ended(session) })
	return srv.Records(session)
}

// A stream starts at 1, resumes from the asked seq and goes on producing
// while nobody is connected; a client that dials again as soon as its close
// handshake completed does not overlap its previous connection.
func TestSeqResumeAndRecords(t *testing.T) {
	srv, c := start(t, feed.Config{Mode: feed.ModeAllow, PayloadBytes: 3})
	ws := mustDial(t, c.URL("s1"))
	for i, m := range read(t, ws, 10) {
		if m.Seq != int64(i+1) || m.Session != "s1" || m.Pad != "xxx" {
			t.Fatalf("message %d: %+v", i, m)
		}
	}
	_ = ws.Close(websocket.StatusNormalClosure, "")
	// Resume from 4 (other query parameters ignored): the feed replays from
	// 4, contiguously.
	ws = mustDial(t, c.URL("s1")+"?from=4&x=1")
	if got := read(t, ws, 5); got[0].Seq != 4 || got[4].Seq != 8 {
		t.Fatalf("resume: %+v", got)
	}
	_ = ws.Close(websocket.StatusGoingAway, "")
	recs := waitEnded(t, srv, "s1")
	if len(recs) != 2 {
		t.Fatalf("records %+v", recs)
	}
	if r := recs[0]; r.Reason != feed.ReasonClient || r.ClientCode != 1000 || r.From != 0 || r.FirstSeq != 1 || r.LastSeq < 10 || r.Sent != r.LastSeq-r.FirstSeq+1 {
		t.Fatalf("first record %+v", r)
	}
	if r := recs[1]; r.ClientCode != 1001 || r.From != 4 || r.FirstSeq != 4 || !strings.Contains(r.RequestURI, "x=1") {
		t.Fatalf("resumed record %+v", r)
	}
	if err := feed.NoOverlap(recs); err != nil || srv.Session("s1").Violations != 0 {
		t.Fatalf("overlap %v, violations %d", err, srv.Session("s1").Violations)
	}
	// Without from the next connection starts live: after every seq produced
	// so far (production goes on while nobody is connected).
	head := srv.Session("s1").Head
	ws = mustDial(t, c.URL("s1"))
	if m := read(t, ws, 1)[0]; m.Seq <= head {
		t.Fatalf("live start: seq %d, head was %d", m.Seq, head)
	}
	if st := srv.Session("s1"); st.MaxConcurrent != 1 || st.Connections != 3 || st.Kicks != 0 || st.Produced < st.Head {
		t.Fatalf("stats %+v", st)
	}
}

// A connection attempted while another of its session is open is a
// violation in every mode; the mode says what happens to the two.
func TestOneConnectionPerSession(t *testing.T) {
	for _, mode := range []feed.Mode{feed.ModeAllow, feed.ModeKickOlder, feed.ModeRefuseNewer} {
		t.Run(string(mode), func(t *testing.T) {
			srv, c := start(t, feed.Config{Mode: mode})
			a := mustDial(t, c.URL("k"))
			read(t, a, 2)
			b, resp, err := dial(t, c.URL("k")+"?from=1", nil)
			if mode == feed.ModeRefuseNewer {
				if err == nil || resp.StatusCode != http.StatusConflict {
					t.Fatalf("second connection: %v, want HTTP 409", err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				defer b.CloseNow()
				read(t, b, 2)
			}
			if v := srv.Session("k").Violations; v != 1 {
				t.Fatalf("%d violations, want 1", v)
			}
			if mode == feed.ModeKickOlder {
				if err := readToEnd(t, a); websocket.CloseStatus(err) != feed.StatusKicked {
					t.Fatalf("kicked connection ended with %v", err)
				}
			}
			a.Close(websocket.StatusNormalClosure, "")
			if b != nil {
				b.Close(websocket.StatusNormalClosure, "")
			}
			recs := waitEnded(t, srv, "k")
			st := srv.Stats()
			s := st.Sessions["k"]
			switch mode {
			case feed.ModeRefuseNewer:
				if s.MaxConcurrent != 1 || s.Refused != 1 || recs[1].Reason != feed.ReasonRefused || recs[1].RefusedBy != string(mode) || len(st.Overlaps) != 0 {
					t.Fatalf("stats %+v, records %+v", st, recs)
				}
				if err := feed.NoOverlap(recs); err != nil {
					t.Fatalf("a refused attempt counted as an overlap: %v", err)
				}
			default:
				wantKicks, wantReason := int64(0), feed.ReasonClient
				if mode == feed.ModeKickOlder {
					wantKicks, wantReason = 1, feed.ReasonKicked
				}
				if s.MaxConcurrent != 2 || s.Kicks != wantKicks || recs[0].Reason != wantReason {
					t.Fatalf("stats %+v, records %+v", s, recs)
				}
				if len(st.Overlaps) != 1 || st.Overlaps[0].End.IsZero() || st.Overlaps[0].Max != 2 {
					t.Fatalf("overlaps %+v", st.Overlaps)
				}
				if feed.NoOverlap(recs) == nil {
					t.Fatal("overlapping connections not reported")
				}
			}
		})
	}
}

func TestRefuseNewerAndControls(t *testing.T) {
	srv, c := start(t, feed.Config{Mode: feed.ModeRefuseNewer})
	a := mustDial(t, c.URL("r"))
	read(t, a, 1)
	if _, _, err := dial(t, c.URL("r"), nil); err == nil {
		t.Fatal("second connection admitted in refuse-newer mode")
	}
	ctx := context.Background()
	if n, err := c.Drop(ctx, "r", true); err != nil || n != 1 {
		t.Fatalf("drop: %d %v", n, err)
	}
	// Messages sent before the drop are still buffered: read to the end.
	if err := readToEnd(t, a); websocket.CloseStatus(err) != -1 {
		t.Fatalf("aborted connection ended with a close frame: %v", err)
	}
	waitEnded(t, srv, "r")
	if err := c.SetRefuse(ctx, "", true); err != nil {
		t.Fatal(err)
	}
	if _, resp, err := dial(t, c.URL("r"), nil); err == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("connection while refusing: %v, want HTTP 503", err)
	}
	if err := c.SetRefuse(ctx, "", false); err != nil {
		t.Fatal(err)
	}
	if err := c.SetMode(ctx, feed.ModeKickOlder); err != nil {
		t.Fatal(err)
	}
	b := mustDial(t, c.URL("r"))
	read(t, b, 1)
	b.Close(websocket.StatusNormalClosure, "")
	waitEnded(t, srv, "r")
	recs, err := c.Records(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, r := range recs {
		reasons = append(reasons, r.Reason+"/"+r.RefusedBy)
	}
	want := []string{"aborted/", "refused/refuse-newer", "refused/control", "client/"}
	if strings.Join(reasons, " ") != strings.Join(want, " ") {
		t.Fatalf("reasons %v, want %v", reasons, want)
	}
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s := st.Sessions["r"]; s.Refused != 2 || s.MaxConcurrent != 1 || s.Violations != 1 || st.Mode != feed.ModeKickOlder {
		t.Fatalf("stats %+v", st)
	}
}

// Drop closes with the code asked for, those still in their handshake too,
// and a handshake without a required header is refused.
func TestDropAndRequiredHeaders(t *testing.T) {
	srv, c := start(t, feed.Config{Rate: 50, RequireHeaders: map[string]string{"X-Key": "k"}})
	if _, resp, err := dial(t, c.URL("c"), nil); err == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no header: %v, want HTTP 401", err)
	}
	ws, _, err := dial(t, c.URL("c"), http.Header{"X-Key": {"k"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	read(t, ws, 1)
	if n := srv.Drop("c", websocket.StatusServiceRestart); n != 1 {
		t.Fatalf("dropped %d", n)
	}
	if err := readToEnd(t, ws); websocket.CloseStatus(err) != websocket.StatusServiceRestart {
		t.Fatalf("dropped with %v", err)
	}
	recs := waitEnded(t, srv, "c")
	if len(recs) != 2 || recs[0].Reason != feed.ReasonBadReq || recs[1].Reason != feed.ReasonDropped || recs[1].Header.Get("X-Key") != "k" {
		t.Fatalf("records %+v", recs)
	}
}

// A drop that lands while the connection is still in its handshake (the
// record exists, Accept has not returned) must still end that connection.
func TestDropDuringHandshakeEndsTheConnection(t *testing.T) {
	srv, err := feed.New(feed.Config{Rate: 50})
	if err != nil {
		t.Fatal(err)
	}
	registered := make(chan struct{})
	release := make(chan struct{})
	feed.SetBeforeAccept(srv, func(string) {
		close(registered)
		<-release
	})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	type dialed struct {
		ws  *websocket.Conn
		err error
	}
	got := make(chan dialed, 1)
	go func() {
		ws, _, err := dial(t, srv.URL("h"), nil)
		got <- dialed{ws, err}
	}()
	<-registered
	if n := srv.Drop("h", 0); n != 1 {
		t.Fatalf("dropped %d connections in handshake, want 1", n)
	}
	close(release)
	d := <-got
	if d.err != nil {
		t.Fatal(d.err)
	}
	defer d.ws.CloseNow()
	readToEnd(t, d.ws)
	if r := waitEnded(t, srv, "h")[0]; r.Reason != feed.ReasonAborted {
		t.Fatalf("record %+v", r)
	}
}

func TestBadRequests(t *testing.T) {
	_, c := start(t, feed.Config{})
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
	if err := (feed.Config{}).Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := feed.Config{Rate: -1, Mode: "x", PayloadBytes: -1, PingTimeout: -time.Second}
	err := bad.Validate()
	for _, want := range []string{"rate", "mode", "payload", "ping"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not report the %s", err, want)
		}
	}
	if _, err := feed.New(bad); err == nil {
		t.Fatal("New accepted an invalid config")
	}
}

// A session first seen resuming at K has already produced K-1 messages:
// the stream does not wait for K/Rate seconds (250 s here).
func TestResumeOnAFreshFeedDoesNotStall(t *testing.T) {
	_, c := start(t, feed.Config{Rate: 2})
	ws := mustDial(t, c.URL("old")+"?from=500")
	if m := read(t, ws, 1)[0]; m.Seq != 500 {
		t.Fatalf("first seq %d", m.Seq)
	}
}

// A client that stops reading (a frozen process) never answers pings: with
// PingEvery set the feed closes its connection; a reading client is kept.
func TestPingClosesUnresponsiveClients(t *testing.T) {
	srv, c := start(t, feed.Config{Rate: 20, PingEvery: 100 * time.Millisecond, PingTimeout: 500 * time.Millisecond})
	mustDial(t, c.URL("frozen"))
	alive := mustDial(t, c.URL("alive"))
	// The reader answers pings (coder/websocket replies from its reader).
	var lastSeq atomic.Int64
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			_, b, err := alive.Read(context.Background())
			if err != nil {
				return
			}
			var m msg
			_ = json.Unmarshal(b, &m)
			lastSeq.Store(m.Seq)
		}
	}()
	recs := waitEnded(t, srv, "frozen")
	if r := recs[0]; r.Reason != feed.ReasonPingLost || r.ClosedAt.Sub(r.OpenedAt) > 3*time.Second {
		t.Fatalf("frozen client's record %+v", r)
	}
	// The reading client outlives several more ping rounds (10 messages:
	// 0.5 s at 20/s, 5 pings).
	after := lastSeq.Load()
	waitFor(t, "10 more messages to the reading client", func() bool { return lastSeq.Load() >= after+10 })
	if recs := srv.Records("alive"); len(recs) != 1 || !recs[0].Open() {
		t.Fatalf("a reading client was dropped: %+v", recs)
	}
	alive.CloseNow()
	<-readDone
	waitEnded(t, srv, "alive")
}
