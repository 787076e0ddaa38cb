package streamer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/claim"
)

// acquireLog is a store that notes which sessions were sent an acquire and
// answers each not found (no session starts, the pace's rate stands).
type acquireLog struct {
	*memstore.Store
	mu   sync.Mutex
	sent map[string]int
}

func (s *acquireLog) Acquire(_ context.Context, id, _ string, _ lease.From) (lease.Item, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent[id]++
	return lease.Item{}, lease.ErrNotFound
}

func (s *acquireLog) count(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent[id]
}

// A takeover's claim that queued in the claim pace for longer than
// recheckAfter reads the session before it is sent: one another worker
// took meanwhile is not sent (no write, no slot of the pace); one still
// the dead tenure's is.
func TestQueuedTakeoverClaimOfASessionTakenMeanwhileIsNotSent(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	for _, id := range []string{"s-taken", "s-dark", "s-fresh"} {
		st.Put(lease.Item{ConnectionID: id, DesiredState: schema.StateStarted, Generation: 1, LastSeq: lease.NoSeq})
	}
	deadWorker(t, st, "w-dead", "s-taken", "s-dark")
	prevOf := func(id string) *lease.Token {
		t.Helper()
		it, err := st.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return &lease.Token{ConnectionID: id, Owner: it.Owner, Epoch: it.Epoch}
	}
	taken, dark := prevOf("s-taken"), prevOf("s-dark")
	// Another worker takes s-taken over (as its told receiver would).
	other, err := lease.NewKeeper(st, clock.Real{}, lease.DefaultConfig("w-other"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Acquire(ctx, "s-taken", taken); err != nil {
		t.Fatal(err)
	}

	log := &acquireLog{Store: st, sent: map[string]int{}}
	w := bareWorker(t, "w-claimer", log, &failQueue{}, func(c *Config) { c.ClaimsPerSecond = 0.5 })
	if err := w.keeper.Register(ctx); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	w.state = stateRunning
	w.mu.Unlock()

	// The pace's one token is spent, and a fresh claim waits at the head
	// for the next (2 s at half a claim a second): the takeover's claims
	// queue behind it.
	if err := w.pacer.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = w.claim(ctx, pathQueue, "s-fresh", nil, nil, 0, true) })
	testwait.Eventually(t, 5*time.Second, "the fresh claim at the head", func() bool { return w.pacer.reserves.Load() == 2 })
	outs := make(map[string]claim.Outcome)
	var mu sync.Mutex
	for id, prev := range map[string]*lease.Token{"s-taken": taken, "s-dark": dark} {
		wg.Go(func() {
			out, _ := w.claim(ctx, pathReconcile, id, prev, nil, 0, true)
			mu.Lock()
			outs[id] = out
			mu.Unlock()
		})
	}
	wg.Wait()
	if n := log.count("s-taken"); n != 0 || outs["s-taken"] != claim.HeldElsewhere {
		t.Fatalf("s-taken, another worker's since: %d acquires sent, outcome %v; want none sent, held elsewhere", n, outs["s-taken"])
	}
	if n := log.count("s-dark"); n != 1 || outs["s-dark"] != claim.NotStarted || log.count("s-fresh") != 1 {
		t.Fatalf("acquires sent: s-dark %d, s-fresh %d; want one each (the dead tenure's still, and the control)", n, log.count("s-fresh"))
	}
}
