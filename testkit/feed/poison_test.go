package feed_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/testkit/feed"
)

// readUntil reads raw text messages from ws until one carries seq, and
// returns them by seq.
func readUntil(t *testing.T, ws *websocket.Conn, seq int64) map[int64][]byte {
	t.Helper()
	out := map[int64][]byte{}
	for {
		typ, b := readRaw(t, ws)
		if typ != websocket.MessageText {
			t.Fatalf("a %v frame", typ)
		}
		// The seq comes first, whatever follows.
		rest, ok := bytes.CutPrefix(b, []byte(`{"seq":`))
		i := bytes.IndexByte(rest, ',')
		if !ok || i < 0 {
			t.Fatalf("message %q does not start with its seq", b)
		}
		q, err := strconv.ParseInt(string(rest[:i]), 10, 64)
		if err != nil {
			t.Fatalf("message %q: %v", b, err)
		}
		out[q] = b
		if q >= seq {
			return out
		}
	}
}

// A poisoning episode sends every N-th seq from the next one produced as
// the kind's message (invalid UTF-8; characters SQS refuses), the seq
// first, the same bytes on a replay; it ends on "off"; Stats names its
// seqs; PoisonIn recognises the messages and tells an altered one.
func TestPoisonedMessages(t *testing.T) {
	srv, cl := start(t, feed.Config{Rate: 100})
	ctx := context.Background()
	ws := mustDial(t, srv.URL("p"))
	readUntil(t, ws, 3)
	span, err := cl.SetPoison(ctx, "p", feed.PoisonUTF8, 2)
	if err != nil {
		t.Fatal(err)
	}
	if span.Session != "p" || span.Kind != feed.PoisonUTF8 || span.From < 4 || span.Every != 2 || span.To != 0 {
		t.Fatalf("span %+v", span)
	}
	got := readUntil(t, ws, span.From+5)
	for q := span.From; q <= span.From+5; q++ {
		kind, intact := feed.PoisonIn(got[q], q)
		if want := (q-span.From)%2 == 0; want != (kind == feed.PoisonUTF8) || want != intact {
			t.Fatalf("seq %d %q: kind %q intact %v", q, got[q], kind, intact)
		}
		if (q-span.From)%2 == 0 && utf8.Valid(got[q]) {
			t.Fatalf("seq %d %q: valid UTF-8", q, got[q])
		}
		if (q-span.From)%2 == 1 && !json.Valid(got[q]) {
			t.Fatalf("seq %d %q: an ordinary message that is not JSON", q, got[q])
		}
	}
	// Switching the kind ends the episode and starts the next one after it.
	next, err := cl.SetPoison(ctx, "p", feed.PoisonForbidden, 1)
	if err != nil {
		t.Fatal(err)
	}
	got = readUntil(t, ws, next.From+3)
	for q := next.From; q <= next.From+3; q++ {
		if kind, intact := feed.PoisonIn(got[q], q); kind != feed.PoisonForbidden || !intact || !utf8.Valid(got[q]) {
			t.Fatalf("seq %d %q: kind %q intact %v", q, got[q], kind, intact)
		}
		if json.Valid(got[q]) != (q%3 != 2) {
			t.Fatalf("seq %d %q: valid JSON %v (raw controls only in every third)", q, got[q], json.Valid(got[q]))
		}
		if want := map[int64]string{0: "\uFFFE", 1: "\uFFFF", 2: "\x01"}[q%3]; !bytes.Contains(got[q], []byte(want)) {
			t.Fatalf("seq %d %q: no %q", q, got[q], want)
		}
	}
	ended, err := cl.SetPoison(ctx, "p", feed.PoisonOff, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ended.Kind != feed.PoisonForbidden || ended.From != next.From || ended.To < next.From+3 {
		t.Fatalf("ended %+v (started %+v)", ended, next)
	}
	got = readUntil(t, ws, ended.To+3)
	for q := ended.To + 1; q <= ended.To+3; q++ {
		if kind, _ := feed.PoisonIn(got[q], q); kind != feed.PoisonOff || !json.Valid(got[q]) {
			t.Fatalf("seq %d %q after the episode: kind %q", q, got[q], kind)
		}
	}
	st, err := cl.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Poisons) != 2 || st.Poisons[0].To < span.From || st.Poisons[0].To >= next.From || st.Poisons[1].To != ended.To {
		t.Fatalf("stats poisons %+v", st.Poisons)
	}
	if !st.Poisons[0].Has(span.From+2) || st.Poisons[0].Has(span.From+1) || st.Poisons[1].Has(ended.To+1) {
		t.Fatalf("Has: %+v", st.Poisons)
	}

	// A replay from the first poisoned seq resends the same bytes.
	ws.CloseNow()
	again := mustDial(t, srv.URL("p")+"?from="+strconv.FormatInt(span.From, 10))
	replay := readUntil(t, again, span.From+2)
	if kind, intact := feed.PoisonIn(replay[span.From+2], span.From+2); kind != feed.PoisonUTF8 || !intact {
		t.Fatalf("replayed %q: kind %q intact %v", replay[span.From+2], kind, intact)
	}

	// An altered message (U+FFFD in place of the bad bytes, as an SDK
	// rewrites it) is recognised and not intact.
	fixed := bytes.ToValidUTF8(replay[span.From], []byte("\uFFFD"))
	if kind, intact := feed.PoisonIn(fixed, span.From); kind != feed.PoisonUTF8 || intact {
		t.Fatalf("altered %q: kind %q intact %v", fixed, kind, intact)
	}
	if kind, _ := feed.PoisonIn([]byte(`{"seq":1,"session":"p","ts":2}`), 1); kind != feed.PoisonOff {
		t.Fatalf("an ordinary message: kind %q", kind)
	}
}

func TestPoisonControlRefusesBadInput(t *testing.T) {
	srv, cl := start(t, feed.Config{})
	ctx := context.Background()
	for _, tc := range []struct {
		session string
		kind    feed.Poison
		every   int64
	}{
		{"p", "bogus", 1},
		{"", feed.PoisonUTF8, 1},
		{"p", feed.PoisonUTF8, 0},
	} {
		if _, err := cl.SetPoison(ctx, tc.session, tc.kind, tc.every); err == nil {
			t.Errorf("SetPoison(%q, %q, %d): no error", tc.session, tc.kind, tc.every)
		}
	}
	bin := feed.StartForTest(t, feed.Config{Shape: feed.ShapeBinary})
	if _, err := bin.SetPoison("p", feed.PoisonUTF8, 1); err == nil {
		t.Error("a binary feed took a poisoning")
	}
	if st := srv.Stats(); len(st.Poisons) != 0 {
		t.Errorf("poisons %+v after refusals", st.Poisons)
	}
}
