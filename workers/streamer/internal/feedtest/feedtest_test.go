package feedtest

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func start(t *testing.T, opts Options) *Server {
	t.Helper()
	s := New(opts)
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func dial(t *testing.T, url string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return websocket.Dial(ctx, url, nil)
}

func readSeq(t *testing.T, c *websocket.Conn) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ Seq int64 }
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m.Seq
}

func TestResumeReplaysFromTheAskedSeq(t *testing.T) {
	s := start(t, Options{Rate: 200})
	c, _, err := dial(t, s.URL("a"))
	if err != nil {
		t.Fatal(err)
	}
	first := readSeq(t, c)
	for i := int64(1); i < 5; i++ {
		if got := readSeq(t, c); got != first+i {
			t.Fatalf("seq %d after %d", got, first+i-1)
		}
	}
	c.Close(websocket.StatusNormalClosure, "")
	time.Sleep(50 * time.Millisecond)
	c2, _, err := dial(t, s.URL("a")+"?from=2&x=1")
	if err != nil {
		t.Fatal(err)
	}
	for want := int64(2); want < 6; want++ {
		if got := readSeq(t, c2); got != want {
			t.Fatalf("resumed seq %d, want %d", got, want)
		}
	}
	c2.Close(websocket.StatusGoingAway, "")
	time.Sleep(50 * time.Millisecond)
	conns := s.Conns("a")
	if len(conns) != 2 || conns[1].From != 2 || conns[0].ClientCode != 1000 || conns[1].ClientCode != 1001 || conns[0].Closing.IsZero() {
		t.Fatalf("records %+v", conns)
	}
	if err := Overlaps(conns); err != nil || s.Violations("a") != 0 {
		t.Fatalf("overlaps %v violations %d", err, s.Violations("a"))
	}
}

func TestSecondConnectionIsAViolation(t *testing.T) {
	for _, p := range []Policy{Allow, KickOlder, RefuseNewer} {
		s := start(t, Options{Rate: 50, Policy: p})
		c1, _, err := dial(t, s.URL("b"))
		if err != nil {
			t.Fatal(err)
		}
		c2, resp, err := dial(t, s.URL("b"))
		switch p {
		case RefuseNewer:
			if err == nil || resp.StatusCode != http.StatusConflict {
				t.Fatalf("refuse: %v", err)
			}
		case KickOlder:
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			for {
				if _, _, err := c1.Read(ctx); err != nil {
					if websocket.CloseStatus(err) != StatusKicked {
						t.Fatalf("kicked with %v", err)
					}
					break
				}
			}
			cancel()
		default:
			if err != nil {
				t.Fatal(err)
			}
		}
		if s.Violations("b") != 1 {
			t.Fatalf("policy %d: %d violations", p, s.Violations("b"))
		}
		if p != RefuseNewer && Overlaps(s.Conns("b")) == nil && p == Allow {
			t.Fatalf("allow: overlapping connections not reported")
		}
		c1.CloseNow()
		if c2 != nil {
			c2.CloseNow()
		}
	}
}

func TestDropAndRequiredHeaders(t *testing.T) {
	s := start(t, Options{Rate: 50, RequireHeaders: map[string]string{"X-Key": "k"}})
	if _, resp, err := dial(t, s.URL("c")); err == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no header: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, s.URL("c"), &websocket.DialOptions{HTTPHeader: http.Header{"X-Key": {"k"}}})
	if err != nil {
		t.Fatal(err)
	}
	readSeq(t, c)
	if n := s.Drop("c", websocket.StatusServiceRestart); n != 1 {
		t.Fatalf("dropped %d", n)
	}
	for {
		if _, _, err := c.Read(ctx); err != nil {
			if websocket.CloseStatus(err) != websocket.StatusServiceRestart {
				t.Fatalf("dropped with %v", err)
			}
			break
		}
	}
	if r := s.Conns("c")[0]; !r.Dropped || r.End().IsZero() {
		t.Fatalf("record %+v", r)
	}
}

// A drop that lands while the connection is still in its handshake (the
// record exists, Accept has not returned) must still end that connection.
func TestDropDuringHandshakeEndsTheConnection(t *testing.T) {
	s := New(Options{Rate: 50})
	registered := make(chan struct{})
	release := make(chan struct{})
	s.beforeAccept = func(string) {
		close(registered)
		<-release
	}
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	type dialed struct {
		c   *websocket.Conn
		err error
	}
	got := make(chan dialed, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, _, err := websocket.Dial(ctx, s.URL("h"), nil)
		got <- dialed{c, err}
	}()
	<-registered
	if n := s.Drop("h", 0); n != 1 {
		t.Fatalf("dropped %d connections in handshake, want 1", n)
	}
	close(release)
	d := <-got
	if d.err != nil {
		t.Fatal(d.err)
	}
	defer d.c.CloseNow()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for {
		if _, _, err := d.c.Read(ctx); err != nil {
			if ctx.Err() != nil {
				t.Fatal("connection dropped in its handshake is still open")
			}
			break
		}
	}
	if r := s.Conns("h")[0]; !r.Dropped {
		t.Fatalf("record %+v", r)
	}
}
