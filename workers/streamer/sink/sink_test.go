package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func TestAppendJSONEnvelope(t *testing.T) {
	m := Message{ConnectionID: "c-1", Seq: 42, LeaseEpoch: 3, WorkerID: "w\"1", ReceivedAtMs: 1700000000123, Data: []byte("{\"seq\":42,\n\"x\":[1,2]}")}
	line := AppendJSON(nil, m)
	if bytes.ContainsAny(line, "\n\r") {
		t.Fatalf("line has a newline: %s", line)
	}
	var got struct {
		ConnectionID string          `json:"connection_id"`
		Seq          int64           `json:"seq"`
		LeaseEpoch   int64           `json:"lease_epoch"`
		WorkerID     string          `json:"worker_id"`
		ReceivedAtMs int64           `json:"received_at_ms"`
		Data         json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	if got.ConnectionID != "c-1" || got.Seq != 42 || got.LeaseEpoch != 3 || got.WorkerID != "w\"1" || got.ReceivedAtMs != 1700000000123 {
		t.Fatalf("envelope = %+v", got)
	}
	var data map[string]any
	if err := json.Unmarshal(got.Data, &data); err != nil || data["seq"].(float64) != 42 {
		t.Fatalf("data = %s (%v)", got.Data, err)
	}
}

func TestAppendJSONNonJSONDataBecomesString(t *testing.T) {
	for _, raw := range []string{"plain text", "ctl \x01 \x7f tab\t", "", "{\"x\":", "héllo \U0001F600"} {
		line := AppendJSON(nil, Message{ConnectionID: "c", Data: []byte(raw)})
		var got struct{ Data string }
		if err := json.Unmarshal(line, &got); err != nil {
			t.Fatalf("%q → %s: %v", raw, line, err)
		}
		if got.Data != raw {
			t.Errorf("data = %q, want %q", got.Data, raw)
		}
	}
}

// b64Envelope is what a consumer reads of an envelope carried in data_b64.
type b64Envelope struct {
	Seq       int64            `json:"seq"`
	Frame     string           `json:"frame"`
	B64Reason string           `json:"b64_reason"`
	DataB64   []byte           `json:"data_b64"` // encoding/json decodes standard base64
	Data      *json.RawMessage `json:"data"`
}

func decodeB64Envelope(t *testing.T, line []byte) b64Envelope {
	t.Helper()
	if !utf8.Valid(line) || !json.Valid(line) {
		t.Fatalf("the envelope is not valid UTF-8 JSON: %q", line)
	}
	var env b64Envelope
	if err := json.Unmarshal(line, &env); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return env
}

// Issue 35 finding 1: a text frame that is not valid UTF-8 (RFC 6455 §5.6
// says it must be; a sender may break that) is carried losslessly in
// data_b64, the way a binary frame is, never raw (the envelope would not be
// UTF-8 JSON, and SQS's SDK would alter it) nor with U+FFFD in place of its
// bytes; each is counted.
func TestAppendJSONInvalidUTF8IsBase64(t *testing.T) {
	for _, raw := range []string{
		"{\"seq\":7,\"x\":\"\xff\"}", // valid JSON to json.Valid, not UTF-8
		"bad \xff utf8 \x01 ctl",
		"\xed\xa0\x80", // a surrogate, encoded
		"trunc \xe2\x82",
	} {
		before := Base64Text.Load()
		for _, chars := range []Chars{AnyChars, SQSChars} {
			env := decodeB64Envelope(t, AppendEnvelope(nil, Message{ConnectionID: "c", Seq: 7, Data: []byte(raw)}, chars))
			if env.Frame != "text" || env.B64Reason != ReasonInvalidUTF8 || string(env.DataB64) != raw || env.Data != nil || env.Seq != 7 {
				t.Errorf("%q (chars %d): %+v", raw, chars, env)
			}
		}
		if n := Base64Text.Load() - before; n != 2 {
			t.Errorf("%q: Base64Text counted %d, want 2", raw, n)
		}
	}
}

// On a destination that refuses U+FFFE and U+FFFF (SQS), a text payload
// holding one goes in data_b64 too, JSON or not; elsewhere it stays text.
// The ids never carry them raw.
func TestAppendEnvelopeSQSRefusedCharsAreBase64(t *testing.T) {
	for _, raw := range []string{"{\"x\":\"a\uFFFEb\"}", "plain \uFFFF", "\uFFFE"} {
		env := decodeB64Envelope(t, AppendEnvelope(nil, Message{ConnectionID: "c", Data: []byte(raw)}, SQSChars))
		if env.Frame != "text" || env.B64Reason != ReasonRefusedChar || string(env.DataB64) != raw {
			t.Errorf("%q: %+v", raw, env)
		}
		env = decodeB64Envelope(t, AppendJSON(nil, Message{ConnectionID: "c", Data: []byte(raw)}))
		if env.DataB64 != nil || env.Data == nil {
			t.Errorf("%q outside SQS: %+v", raw, env)
		}
	}
	// Characters SQS takes stay text, next to the U+FFFx lead byte EF.
	for _, raw := range []string{"\uFFFD \uFFEF \uEFBF \U0010FFFF \uE000", `{"k":"\ufffe escaped is ASCII"}`} {
		if env := decodeB64Envelope(t, AppendEnvelope(nil, Message{Data: []byte(raw)}, SQSChars)); env.DataB64 != nil {
			t.Errorf("%q went base64: %+v", raw, env)
		}
	}
	line := AppendEnvelope(nil, Message{ConnectionID: "c\uFFFE", WorkerID: "w\uFFFF", Data: []byte(`{}`)}, SQSChars)
	if bytes.Contains(line, []byte("\uFFFE")) || bytes.Contains(line, []byte("\uFFFF")) {
		t.Fatalf("an id carried U+FFFx raw: %q", line)
	}
	var ids struct {
		ConnectionID string `json:"connection_id"`
		WorkerID     string `json:"worker_id"`
	}
	if err := json.Unmarshal(line, &ids); err != nil || ids.ConnectionID != "c\uFFFE" || ids.WorkerID != "w\uFFFF" {
		t.Fatalf("%q: %+v %v", line, ids, err)
	}
}

func TestWriterOneLinePerMessageConcurrently(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for i := 0; i < 100; i++ {
				if err := w.Handle(context.Background(), Message{ConnectionID: "c", Seq: int64(i), Data: []byte(`{"k":"v"}`)}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Fatalf("invalid line %q", l)
		}
	}
}

func TestFlushCallsFlusher(t *testing.T) {
	f := &flushing{}
	if err := Flush(context.Background(), f); err != nil || f.n != 1 {
		t.Fatalf("Flush: %v, n=%d", err, f.n)
	}
	if err := Flush(context.Background(), Discard); err != nil {
		t.Fatal(err)
	}
}

type flushing struct{ n int }

func (f *flushing) Handle(context.Context, Message) error { return nil }
func (f *flushing) Flush(context.Context) error           { f.n++; return nil }

func BenchmarkWriter(b *testing.B) {
	var out countingWriter
	w := NewWriter(&out)
	m := Message{ConnectionID: "session-000123", Seq: 1, LeaseEpoch: 7, WorkerID: "ip-10-0-0-1-a1b2c3", ReceivedAtMs: 1700000000000,
		Data: []byte(`{"seq":123456,"session":"s-1","ts":1700000000000}`)}
	b.ReportAllocs()
	for b.Loop() {
		m.Seq++
		if err := w.Handle(context.Background(), m); err != nil {
			b.Fatal(err)
		}
	}
}

type countingWriter struct{ n int }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += len(p); return len(p), nil }

// The shipped local sinks are context-free (the session makes them no
// deadline context per message).
func TestLocalSinksAreContextFree(t *testing.T) {
	for name, h := range map[string]Handler{"stdout": Stdout(), "discard": Discard} {
		if _, ok := h.(ContextFree); !ok {
			t.Errorf("%s sink is not ContextFree: it would get a timer per message", name)
		}
	}
}
