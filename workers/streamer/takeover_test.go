package streamer

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/claim"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// batchQueue is a work queue whose batched publishes take a round trip
// each and are counted.
type batchQueue struct {
	idleQueue
	mu      sync.Mutex
	batches int
	sent    map[string]bool
}

func (q *batchQueue) PublishBatch(_ context.Context, ns []notify.Notification) []error {
	time.Sleep(5 * time.Millisecond)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.batches++
	for _, n := range ns {
		q.sent[n.ConnectionID] = true
	}
	return make([]error, len(ns))
}

// A takeover announces the sessions no receiver took all at once, batched,
// not one batch (a round trip) after another per session.
func TestTakeoverAnnouncesItsSessionsInFullBatches(t *testing.T) {
	q := &batchQueue{sent: map[string]bool{}}
	cfg := DefaultConfig()
	cfg.WorkerID = "w-announcer"
	log := zerolog.Nop()
	w, err := New(cfg, Deps{Store: memstore.New(), Queue: q, Handler: sink.Discard, Logger: &log, Metrics: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	var cands []lease.Candidate
	for i := range n {
		cands = append(cands, lease.Candidate{ConnectionID: fmt.Sprintf("s-%03d", i), Prev: &lease.Token{ConnectionID: fmt.Sprintf("s-%03d", i), Owner: "w-dead", Epoch: 1}})
	}
	w.announceAll(context.Background(), log, cands)
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.sent) != n {
		t.Fatalf("%d of %d sessions announced", len(q.sent), n)
	}
	// Batched (one at a time, each session was a batch of its own): the
	// first batches go before the queue fills, so not all are full.
	if most := n / 2; q.batches > most {
		t.Fatalf("%d batches for %d sessions: want at most %d (of up to %d sessions)", q.batches, n, most, notify.MaxBatch)
	}
}

// A takeover claims itself only what its claim rate takes in
// claim.ListSpan of the sessions it announced, from the end of the list
// (the queue hands them out from the start).
func TestTakeoverClaimsWhatItsRateTakesOfWhatItAnnounced(t *testing.T) {
	cfg := DefaultConfig()
	cfg.WorkerID, cfg.ClaimsPerSecond = "w-declarer", 2
	log := zerolog.Nop()
	w, err := New(cfg, Deps{Store: memstore.New(), Handler: sink.Discard, Logger: &log, Metrics: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	var cands []lease.Candidate
	for i := range 100 {
		cands = append(cands, lease.Candidate{ConnectionID: fmt.Sprintf("s-%03d", i)})
	}
	own := w.ownShare(cands)
	want := claim.SpanLimit(2) // 40
	if len(own) != want || own[0].ConnectionID != "s-099" || own[len(own)-1].ConnectionID != fmt.Sprintf("s-%03d", 100-want) {
		t.Fatalf("claims %d of 100 announced, %s … %s: want the last %d, the last first", len(own), own[0].ConnectionID, own[len(own)-1].ConnectionID, want)
	}
	if cands[0].ConnectionID != "s-000" || cands[99].ConnectionID != "s-099" {
		t.Fatal("the announced list was reordered")
	}
	if got := w.ownShare(cands[:5]); len(got) != 5 {
		t.Fatalf("claims %d of 5 announced: want all", len(got))
	}
	if got := w.ownShare(nil); len(got) != 0 {
		t.Fatalf("claims %d of none", len(got))
	}
}
