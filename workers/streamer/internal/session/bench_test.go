package session

import (
	"context"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/spec/spectest"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/backoff"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// benchSession is a session holding a real lease (memstore + Keeper) with
// no connection: handle is driven directly.
func benchSession(b *testing.B, h sink.Handler) *Session {
	b.Helper()
	st := memstore.New()
	st.Put(lease.Item{ConnectionID: "bench-000001", DesiredState: schema.StateStarted, Spec: spectest.URL(b, "ws://127.0.0.1:1/feed/bench-000001"), Generation: 1, LastSeq: lease.NoSeq})
	k, err := lease.NewKeeper(st, clock.Real{}, lease.DefaultConfig("w-bench"), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := k.Register(ctx); err != nil {
		b.Fatal(err)
	}
	// The Keeper heartbeats as in a worker, so the tenure stays valid
	// however long the benchmark runs (-benchtime beyond TTL - SafetyMargin).
	done := make(chan struct{})
	go func() { _ = k.Run(ctx); close(done) }()
	b.Cleanup(func() { cancel(); <-done })
	held, err := k.Acquire(ctx, "bench-000001", nil)
	if err != nil {
		b.Fatal(err)
	}
	cfg := &Config{WorkerID: "w-bench", DialTimeout: time.Second, CloseGrace: time.Second,
		Backoff: backoff.Policy{Base: time.Millisecond, Max: time.Second}, ReadLimit: 1 << 20, SinkAttempts: 1}
	env := &Env{Config: cfg, Handler: h, Log: zerolog.Nop(), Counters: &Counters{}}
	s := New(env, held, 0)
	p, err := compile(held.Item())
	if err != nil {
		b.Fatal(err)
	}
	s.proto = p
	return s
}

// feedMessage is the demo feed's message for seq (as testkit/feed writes it).
func feedMessage(dst []byte, seq int64) []byte {
	dst = append(dst, `{"seq":`...)
	dst = strconv.AppendInt(dst, seq, 10)
	dst = append(dst, `,"session":"bench-000001","ts":1767225600000}`...)
	return dst
}

// BenchmarkHandle measures the per-message hot path after the WebSocket
// read: sequence parse (jsonseq), dedupe against the last delivered seq,
// the lease validity check, the sink call and the checkpoint bookkeeping.
// Building the message (a few appends) is inside the loop.
func BenchmarkHandle(b *testing.B) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		sink sink.Handler
	}{
		{"discard", sink.Discard},
		{"stdout-writer", sink.NewWriter(io.Discard)}, // the JSON-lines envelope, to a writer that drops it
	} {
		b.Run("new/"+tc.name, func(b *testing.B) {
			s := benchSession(b, tc.sink)
			buf := make([]byte, 0, 128)
			var seq int64
			b.ReportAllocs()
			for b.Loop() {
				seq++
				buf = feedMessage(buf[:0], seq)
				if err := s.handle(ctx, nil, websocket.MessageText, buf); err != nil {
					b.Fatal(err)
				}
			}
			if s.LastSeq() != seq {
				b.Fatalf("last seq %d, want %d", s.LastSeq(), seq)
			}
		})
	}
	b.Run("duplicate", func(b *testing.B) {
		s := benchSession(b, sink.Discard)
		buf := feedMessage(nil, 1)
		if err := s.handle(ctx, nil, websocket.MessageText, buf); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := s.handle(ctx, nil, websocket.MessageText, buf); err != nil {
				b.Fatal(err)
			}
		}
		if s.dups.Load() == 0 {
			b.Fatal("no duplicate dropped")
		}
	})
}
