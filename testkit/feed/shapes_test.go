package feed_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

func readRaw(t *testing.T, ws *websocket.Conn) (websocket.MessageType, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	typ, b, err := ws.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return typ, b
}

func send(t *testing.T, ws *websocket.Conn, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := ws.Write(ctx, websocket.MessageText, []byte(text)); err != nil {
		t.Fatal(err)
	}
}

// closedAs waits for the record of session's only connection to close for
// reason.
func closedAs(t *testing.T, srv *feed.Server, session, reason string) {
	t.Helper()
	testwait.Eventually(t, within, "the connection closed: "+reason, func() bool {
		rs := srv.Records(session)
		return len(rs) == 1 && !rs[0].Open() && rs[0].Reason == reason
	})
}

func TestShapes(t *testing.T) {
	for _, tc := range []struct {
		shape feed.Shape
		check func(t *testing.T, typ websocket.MessageType, b []byte, seq int64)
	}{
		{feed.ShapeNested, func(t *testing.T, typ websocket.MessageType, b []byte, seq int64) {
			var m struct {
				Stream string
				Data   struct{ U int64 }
			}
			if typ != websocket.MessageText || json.Unmarshal(b, &m) != nil || m.Data.U != seq || m.Stream != "s1" {
				t.Fatalf("nested message %s, want data.u %d", b, seq)
			}
		}},
		{feed.ShapeString, func(t *testing.T, typ websocket.MessageType, b []byte, seq int64) {
			var m struct{ SequenceNumber string }
			if typ != websocket.MessageText || json.Unmarshal(b, &m) != nil || m.SequenceNumber != strconv.FormatInt(seq, 10) {
				t.Fatalf("string-seq message %s, want sequenceNumber %d", b, seq)
			}
		}},
		{feed.ShapeNoSeq, func(t *testing.T, typ websocket.MessageType, b []byte, _ int64) {
			if typ != websocket.MessageText || strings.Contains(string(b), "seq") || !strings.Contains(string(b), `"session":"s1"`) {
				t.Fatalf("seq-less message %s", b)
			}
		}},
		{feed.ShapeBinary, func(t *testing.T, typ websocket.MessageType, b []byte, seq int64) {
			if typ != websocket.MessageBinary || len(b) != 8+len("s1") || binary.BigEndian.Uint64(b) != uint64(seq) || string(b[8:]) != "s1" {
				t.Fatalf("binary message %x, want seq %d then the session", b, seq)
			}
		}},
	} {
		t.Run(string(tc.shape), func(t *testing.T) {
			srv, _ := start(t, feed.Config{Shape: tc.shape})
			ws := mustDial(t, srv.URL("s1")+"?from=3")
			for seq := int64(3); seq < 6; seq++ {
				typ, b := readRaw(t, ws)
				tc.check(t, typ, b, seq)
			}
		})
	}
	if _, err := feed.ParseShape("xml"); err == nil {
		t.Fatal("an unknown shape parsed")
	}
	if err := (feed.Config{Shape: "xml"}).Validate(); err == nil {
		t.Fatal("a config with an unknown shape is valid")
	}
}

// Coinbase-style: no subscribe in time, closed; a subscribe is acked and
// sets where the messages start.
func TestSubscribeWithin(t *testing.T) {
	srv, _ := start(t, feed.Config{SubscribeWithin: 300 * time.Millisecond})
	silent := mustDial(t, srv.URL("quiet"))
	if err := readToEnd(t, silent); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("a client that never subscribed: %v, want closed with 1008", err)
	}
	closedAs(t, srv, "quiet", feed.ReasonNoSubscribe)

	ws := mustDial(t, srv.URL("s1"))
	send(t, ws, `{"op":"subscribe","from":"7"}`)
	if _, b := readRaw(t, ws); string(b) != `{"event":"subscribed"}` {
		t.Fatalf("ack %s", b)
	}
	if got := read(t, ws, 3); got[0].Seq != 7 || got[2].Seq != 9 {
		t.Fatalf("after subscribing from 7: %+v", got)
	}
	if rs := srv.Records("s1"); rs[0].From != 7 || rs[0].FirstSeq != 7 {
		t.Fatalf("record %+v, want from 7", rs[0])
	}
}

// Zoom-style: a client that answers the keep-alive requests stays; one
// that does not is closed.
func TestKeepaliveRequests(t *testing.T) {
	srv, _ := start(t, feed.Config{KeepaliveEvery: 100 * time.Millisecond, Rate: 20})
	deaf := mustDial(t, srv.URL("deaf"))
	if err := readToEnd(t, deaf); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("a client that never answered: %v, want closed with 1008", err)
	}
	closedAs(t, srv, "deaf", feed.ReasonKeepaliveLost)

	ws := mustDial(t, srv.URL("s1"))
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	reqs, data := 0, 0
	for reqs < 6 { // 6 requests: well past 2 intervals
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("an answering client lost its connection after %d requests: %v", reqs, err)
		}
		if strings.Contains(string(b), "KEEP_ALIVE_REQ") {
			reqs++
			send(t, ws, `{"msg_type":"KEEP_ALIVE_RESP"}`)
		} else {
			data++
		}
	}
	if data == 0 || !srv.Records("s1")[0].Open() {
		t.Fatalf("data messages %d, record %+v", data, srv.Records("s1")[0])
	}
}
