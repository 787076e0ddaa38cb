package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
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
	for _, raw := range []string{"plain text", "bad \xff utf8 \x01 ctl", ""} {
		line := AppendJSON(nil, Message{ConnectionID: "c", Data: []byte(raw)})
		var got struct{ Data string }
		if err := json.Unmarshal(line, &got); err != nil {
			t.Fatalf("%q → %s: %v", raw, line, err)
		}
		if want := strings.ToValidUTF8(raw, "\ufffd"); got.Data != want {
			t.Errorf("data = %q, want %q", got.Data, want)
		}
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
