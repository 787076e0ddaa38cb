package streamer

// Real-world source shapes (docs/sources.md) end to end, against Debian's
// websocketd serving testdata/realsource.sh: a source we did not write that
// enforces its protocol (it closes a client that does not subscribe in
// time, does not ping, or does not answer its keep-alives).

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

func textMsg(s string) *string { return &s }

// The script's modes enforce what they claim: a client that does nothing
// is closed.
func TestRealsourceEnforcesItsProtocol(t *testing.T) {
	wsd := startWebsocketdScript(t, "realsource.sh")
	for _, mode := range []string{"subscribe", "okx", "keepalive"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, _, err := websocket.Dial(ctx, "ws://"+wsd.addr()+"/?mode="+mode, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseNow()
			start := time.Now()
			for {
				if _, _, err := c.Read(ctx); err != nil {
					if ctx.Err() != nil {
						t.Fatalf("a silent client was not closed within 10 s")
					}
					break
				}
			}
			if d := time.Since(start); d < 900*time.Millisecond {
				t.Fatalf("closed after %v: before the protocol's deadline", d)
			}
		})
	}
}

// The script keeps a client line whose bytes straddle one of its 20 ms read
// timeouts: under load bash can be descheduled between the bytes of a
// line, and a ping cut into "p" and "ing" was lost, so that okx closed a
// session that pinged on time (TestWebsocketdRealShapes/okx_ping's flake).
// Here the client writes "pi", waits until the script has read it and
// timed out (two loop iterations after the write, each printing a data
// line), then "ng": the script answers pong.
func TestRealsourceKeepsALineAcrossAReadTimeout(t *testing.T) {
	script, err := filepath.Abs(filepath.Join("testdata", "realsource.sh"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Env = append(os.Environ(), "QUERY_STRING=mode=okx")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	next := func(what string) string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the script exited waiting for %s (its 2 s ping deadline: the ping was lost)", what)
			}
			return l
		case <-ctx.Done():
			t.Fatalf("no %s within 10 s", what)
		}
		return ""
	}
	if _, err := io.WriteString(stdin, "pi"); err != nil {
		t.Fatal(err)
	}
	next("a loop after the first half")
	next("a loop that read the first half and timed out")
	if _, err := io.WriteString(stdin, "ng\n"); err != nil {
		t.Fatal(err)
	}
	for l := next("pong"); l != "pong"; l = next("pong") {
	}
}

// A Coinbase-style subscribe-first source: the resume point travels in the
// open message (no query parameter). The source crashes and comes back, and
// the session moves to another worker: every connect subscribes again from
// last_seq + 1, and the deliveries stay contiguous.
func TestWebsocketdSubscribeFirstResumeInOpenMessage(t *testing.T) {
	e := newEnv(t)
	wsd := startWebsocketdScript(t, "realsource.sh")
	obs := newObserver(t, wsd.addr())
	a := e.worker(func(c *Config) { c.ReconcileEvery = time.Minute })
	cfg := source.Config{OpenMessages: []source.OpenMessage{{
		Text:    textMsg(`{"op":"subscribe","product_ids":["BTC-USD"],"from":"{{resume_from}}"}`),
		WaitFor: &source.Match{Path: "event", Equals: json.RawMessage(`"subscribed"`), Timeout: "2s"},
	}}}
	id := e.session(func(it *lease.Item) {
		spectest.Edit(t, &it.Spec, func(s *spec.Spec) {
			s.WSURL, s.Headers, s.Resume, s.Config = obs.url()+"?mode=subscribe", nil, nil, cfg
		})
	})
	e.notify(schema.NotifyStart, id)
	testwait.Eventually(t, 5*time.Second, "messages after subscribing", func() bool { return e.sink.count(id) >= 20 })
	if first := e.sink.get(id)[0].seq; first != 1 {
		t.Fatalf("first seq %d, want 1 (resume_from is empty before any delivery)", first)
	}

	survivesRestartAndHandOff(t, e, wsd, obs, a, id)
	for _, d := range e.sink.get(id) {
		if strings.Contains(d.data, "subscribed") {
			t.Fatal("the subscribe ack was delivered")
		}
	}
}

// The other shapes, each held by one worker for longer than the source's
// deadline on one connection: OKX-style text pings, Zoom-style keep-alive
// replies with no seq, Binance-style nested seqs, Twilio-style string seqs,
// seq-less binary audio.
func TestWebsocketdRealShapes(t *testing.T) {
	e := newEnv(t)
	e.worker(func(c *Config) { c.ReconcileEvery = time.Minute })
	keep := &source.KeepaliveReply{Match: source.Match{Path: "msg_type", Equals: json.RawMessage(`"KEEP_ALIVE_REQ"`)},
		Reply: `{"msg_type":"KEEP_ALIVE_RESP","timestamp":0}`}
	for _, tc := range []struct {
		name, mode string
		flags      []string
		seqField   string
		cfg        source.Config
		hold       time.Duration // deliveries must span this long on one connection
		check      func(t *testing.T, ds []delivery)
	}{
		{name: "okx ping", mode: "okx", seqField: "seq", hold: 3 * time.Second,
			cfg: source.Config{AppPing: &source.AppPing{Message: "ping", Every: "1s", Pong: "pong"}},
			check: func(t *testing.T, ds []delivery) {
				for _, d := range ds {
					if d.data == "pong" {
						t.Fatal("a pong was delivered")
					}
				}
			}},
		{name: "zoom keepalive", mode: "keepalive", hold: 3 * time.Second,
			cfg: source.Config{SeqMode: source.SeqNone, KeepaliveReply: keep},
			check: func(t *testing.T, ds []delivery) {
				for _, d := range ds {
					if strings.Contains(d.data, "KEEP_ALIVE") {
						t.Fatal("a keep-alive request was delivered")
					}
				}
			}},
		{name: "binance nested seq", mode: "nested", seqField: "data.u"},
		{name: "twilio string seq", mode: "string", seqField: "sequenceNumber"},
		{name: "binary audio", mode: "binary", flags: []string{"--binary=true"}, cfg: source.Config{SeqMode: source.SeqNone},
			check: func(t *testing.T, ds []delivery) {
				for _, d := range ds {
					if !d.binary || len(d.data) == 0 || len(d.data)%4 != 0 || d.data[:4] != "\x00\x01\xfe\xff" {
						t.Fatalf("delivery %d: binary %v data %x", d.seq, d.binary, d.data)
					}
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wsd := startWebsocketdScript(t, "realsource.sh", tc.flags...)
			obs := newObserver(t, wsd.addr())
			id := e.session(func(it *lease.Item) {
				spectest.Edit(t, &it.Spec, func(s *spec.Spec) {
					s.WSURL, s.Headers, s.Config, s.SeqPath = obs.url()+"?mode="+tc.mode, nil, tc.cfg, tc.seqField
					if tc.cfg.SeqMode == source.SeqNone {
						s.Resume = nil
					}
				})
			})
			e.notify(schema.NotifyStart, id)
			testwait.Eventually(t, 5*time.Second+tc.hold, "deliveries spanning "+tc.hold.String(), func() bool {
				ds := e.sink.get(id)
				return len(ds) >= 20 && ds[len(ds)-1].at.Sub(ds[0].at) >= tc.hold
			})
			ds := e.sink.get(id)
			contiguous(t, ds)
			if ds[0].seq != 1 {
				t.Fatalf("first seq %d, want 1", ds[0].seq)
			}
			if tc.check != nil {
				tc.check(t, ds)
			}
			if recs := obs.records(); len(recs) != 1 {
				t.Fatalf("%d connections: the source dropped the session\n%s", len(recs), wsd.log.String())
			}
			e.stop(id)
		})
	}
}

// The shared feed playing a source that wants a subscribe within 1 s (the
// resume point inside it), keep-alive answers, and puts the seq at data.u:
// the session subscribes again after a drop, from last_seq + 1, and
// answers every keep-alive request.
func TestFeedSubscribeKeepaliveNestedSeq(t *testing.T) {
	e := newEnv(t)
	e.feed = feed.StartForTest(t, feed.Config{Rate: 50, Shape: feed.ShapeNested, SubscribeWithin: time.Second, KeepaliveEvery: 200 * time.Millisecond})
	e.worker(func(c *Config) { c.ReconcileEvery = time.Minute })
	cfg := source.Config{
		OpenMessages: []source.OpenMessage{{Text: textMsg(`{"op":"subscribe","from":"{{resume_from}}"}`),
			WaitFor: &source.Match{Path: "event", Equals: json.RawMessage(`"subscribed"`)}}},
		KeepaliveReply: &source.KeepaliveReply{Match: source.Match{Path: "msg_type", Equals: json.RawMessage(`"KEEP_ALIVE_REQ"`)},
			Reply: `{"msg_type":"KEEP_ALIVE_RESP"}`},
	}
	id := e.session(func(it *lease.Item) {
		spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.SeqPath, s.Resume, s.Config = "data.u", nil, cfg })
	})
	e.notify(schema.NotifyStart, id)
	testwait.Eventually(t, 5*time.Second, "messages after subscribing", func() bool { return e.sink.count(id) >= 50 })
	e.feed.Drop(id, websocket.StatusServiceRestart)
	n := e.sink.count(id)
	testwait.Eventually(t, 5*time.Second, "messages after a drop and a new subscribe", func() bool {
		return len(e.feed.Records(id)) >= 2 && e.sink.count(id) >= n+50
	})
	ds := e.sink.get(id)
	contiguous(t, ds)
	if ds[0].seq != 1 {
		t.Fatalf("first seq %d, want 1", ds[0].seq)
	}
	recs := e.feed.Records(id)
	if recs[1].From < 2 {
		t.Fatalf("the second connection subscribed from %d: want last_seq + 1 in the subscribe", recs[1].From)
	}
	for _, r := range recs {
		if r.Reason == feed.ReasonNoSubscribe || r.Reason == feed.ReasonKeepaliveLost {
			t.Fatalf("the feed closed connection %d: %s", r.ID, r.Reason)
		}
	}
	for _, d := range ds {
		if strings.Contains(d.data, "KEEP_ALIVE") || strings.Contains(d.data, "subscribed") {
			t.Fatalf("a control message was delivered: %s", d.data)
		}
	}
}
