package leasetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// runAcquire: the acquire: a new session, its refusals, the race for a dead
// worker's sessions, a stop against an acquire.
func runAcquire(t *testing.T, newHarness func(t *testing.T) Harness, opts Options) {
	t.Run("AcquireNewSession", func(t *testing.T) {
		h := newHarness(t)
		id := NewID("acq")
		h.Put(t, Started(id))
		eventually(t, "a new STARTED session is not listed as unowned", func() bool { return unowned(t, h.Store)[id] })
		it, err := h.Store.Acquire(ctx(t), id, "w1", lease.From{})
		if err != nil {
			t.Fatalf("acquire: %v", err)
		}
		want := Started(id)
		if it.Owner != "w1" || !opts.epochAfter(it.Epoch, 0) || it.LastSeq != lease.NoSeq {
			t.Fatalf("acquired item = owner %q epoch %d last_seq %d; want w1, 1, none", it.Owner, it.Epoch, it.LastSeq)
		}
		if it.Spec != want.Spec || it.Generation != 1 ||
			it.CheckpointEvery != want.CheckpointEvery || it.DesiredState != schema.StateStarted {
			t.Fatalf("acquire must return the session: %+v", it)
		}
		eventually(t, "an acquired session is still listed as unowned", func() bool { return !unowned(t, h.Store)[id] })
		var o lease.Owned
		eventually(t, "an acquired session is not listed under its owner", func() bool { var ok bool; o, ok = ownedBy(t, h.Store, "w1")[id]; return ok })
		if o.Owner != "w1" || o.Epoch != it.Epoch || o.DesiredState != schema.StateStarted || o.Generation != 1 {
			t.Fatalf("owned by w1: %+v", o)
		}
		// Acquiring one's own session again (an acquire retried after an
		// ambiguous attempt) is a new tenure.
		again, err := h.Store.Acquire(ctx(t), id, "w1", lease.From{})
		if err != nil {
			t.Fatalf("re-acquire by the owner: %v", err)
		}
		if !opts.epochAfter(again.Epoch, it.Epoch) || again.Owner != "w1" {
			t.Fatalf("re-acquire: %+v", again)
		}
		if got := mustGet(t, h.Store, id); got.Owner != "w1" || got.Epoch != again.Epoch || got.LastSeq != lease.NoSeq {
			t.Fatalf("get after acquires: %+v", got)
		}
	})

	t.Run("AcquireRefusals", func(t *testing.T) {
		h := newHarness(t)
		_, err := h.Store.Acquire(ctx(t), NewID("missing"), "w1", lease.From{})
		wantErr(t, "acquire of a missing session", err, lease.ErrNotFound)
		_, err = h.Store.Get(ctx(t), NewID("missing"))
		wantErr(t, "get of a missing session", err, lease.ErrNotFound)

		stopped := NewID("stopped")
		it := Started(stopped)
		it.DesiredState = schema.StateStopped
		h.Put(t, it)
		_, err = h.Store.Acquire(ctx(t), stopped, "w1", lease.From{})
		wantErr(t, "acquire of a stopped session", err, lease.ErrStopped)
		if got := mustGet(t, h.Store, stopped); got.DesiredState != schema.StateStopped || got.Epoch != 0 || got.Owner != "" {
			t.Fatalf("a refused acquire changed the item: %+v", got)
		}

		failed := NewID("failed")
		it = Started(failed)
		gen := it.Generation
		it.FailedGeneration, it.LastError = &gen, "handshake refused: HTTP 401"
		h.Put(t, it)
		_, err = h.Store.Acquire(ctx(t), failed, "w1", lease.From{})
		wantErr(t, "acquire of a FAILED session", err, lease.ErrFailed)

		_, tok := acquired(t, h, "held", "w1")
		_, err = h.Store.Acquire(ctx(t), tok.ConnectionID, "w2", lease.From{})
		wantHeld(t, "acquire of an owned session", err, tok)
		// A prev that is not the current tenure does not take it over.
		for _, prev := range []lease.Token{{ConnectionID: tok.ConnectionID, Owner: "w1", Epoch: tok.Epoch - 1}, {ConnectionID: tok.ConnectionID, Owner: "w3", Epoch: tok.Epoch}} {
			_, err = h.Store.Acquire(ctx(t), tok.ConnectionID, "w2", lease.From{Prev: &prev})
			wantHeld(t, fmt.Sprintf("acquire with a stale prev %v", prev), err, tok)
		}
		if got := mustGet(t, h.Store, tok.ConnectionID); got.Owner != "w1" || got.Epoch != tok.Epoch {
			t.Fatalf("refused acquires changed the item: %+v", got)
		}
	})

	t.Run("ExactlyOneWinnerFromADeadWorker", func(t *testing.T) {
		h := newHarness(t)
		racer := func(int) lease.Store { return h.Store }
		if h.Racer != nil {
			racer = h.Racer
		}
		doubles, zeros := 0, 0
		start := time.Now()
		for round := 0; round < opts.RaceRounds; round++ {
			d := register(t, h, "d")
			_, prev := acquired(t, h, "race", d)
			id := prev.ConnectionID
			if err := persist(func() error { return h.Store.Checkpoint(ctx(t), prev, int64(round)) }); err != nil {
				t.Fatal(err)
			}
			if err := persist(func() error {
				_, err := h.Store.Heartbeat(ctx(t), d, 1, lease.Heartbeat{Seq: 1, AtMs: now})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			// Its heartbeats stopped at counter 1: an observer declares it.
			if err := persist(func() error { return h.Store.DeclareDead(ctx(t), d, 1, 1, "obs", now+20_000) }); err != nil {
				t.Fatalf("round %d: declare dead: %v", round, err)
			}
			var (
				mu      sync.Mutex
				winners []lease.Item
				losers  []error
				wg      sync.WaitGroup
			)
			if opts.BeforeRace != nil {
				opts.BeforeRace(round, id)
			}
			gate := make(chan struct{})
			for r := 0; r < opts.Racers; r++ {
				wg.Add(1)
				go func(r int) {
					defer wg.Done()
					<-gate
					// A transient refusal (throttled, unavailable) is no
					// answer: the racer tries again, as a worker's next
					// reconcile pass would, until it wins or is told who did
					// (for up to 30 s: a count of tries ran out on a hot
					// key whose few units a second 64 racers share).
					var (
						it  lease.Item
						err error
					)
					giveUp := time.Now().Add(30 * time.Second)
					for try := 0; ; try++ {
						it, err = racer(r).Acquire(context.Background(), id, fmt.Sprintf("a%d", r), lease.From{Prev: &prev})
						if !lease.IsTransient(err) || time.Now().After(giveUp) {
							break
						}
						time.Sleep(time.Duration(10+min(try, 19)*10) * time.Millisecond)
					}
					mu.Lock()
					defer mu.Unlock()
					if err == nil {
						winners = append(winners, it)
					} else {
						losers = append(losers, err)
					}
				}(r)
			}
			close(gate)
			wg.Wait()
			switch len(winners) {
			case 1:
			case 0:
				zeros++
				t.Errorf("round %d: no winner: %v", round, losers)
				continue
			default:
				doubles++
				t.Errorf("round %d: %d winners", round, len(winners))
				continue
			}
			w := winners[0]
			cur := lease.Token{ConnectionID: id, Owner: w.Owner, Epoch: w.Epoch}
			if !opts.epochAfter(w.Epoch, prev.Epoch) || w.LastSeq != int64(round) {
				t.Fatalf("round %d: winner %+v, want epoch %d last_seq %d", round, w, prev.Epoch+1, round)
			}
			for _, err := range losers {
				// A loser may have met the winner's first attempt of a
				// retried acquire (an ambiguous store): the same owner at
				// an epoch between.
				var he *lease.HeldError
				if opts.Ambiguous && errors.As(err, &he) && he.Current.Owner == cur.Owner && he.Current.Epoch > prev.Epoch && he.Current.Epoch <= cur.Epoch {
					continue
				}
				wantHeld(t, fmt.Sprintf("round %d: loser", round), err, cur)
			}
			if got := mustGet(t, h.Store, id); got.Owner != cur.Owner || got.Epoch != cur.Epoch {
				t.Fatalf("round %d: item %+v after the race, want %v", round, got, cur)
			}
		}
		if doubles != 0 || zeros != 0 {
			t.Fatalf("%d rounds with several winners, %d with none, of %d", doubles, zeros, opts.RaceRounds)
		}
		t.Logf("%d rounds × %d racers taking over a dead worker's session: exactly one winner every round (%s)", opts.RaceRounds, opts.Racers, time.Since(start).Round(time.Millisecond))
	})

	t.Run("StopAgainstAcquire", func(t *testing.T) {
		h := newHarness(t)
		rounds := max(opts.RaceRounds/4, 10)
		racers := make([]string, 4)
		for i := range racers {
			racers[i] = register(t, h, "stopper")
		}
		won, stoppedFirst := 0, 0
		for round := 0; round < rounds; round++ {
			id := NewID("stoprace")
			h.Put(t, Started(id))
			var (
				mu   sync.Mutex
				wins []string
				errs []error
				wg   sync.WaitGroup
			)
			gate := make(chan struct{})
			for _, w := range racers {
				wg.Add(1)
				go func(w string) {
					defer wg.Done()
					<-gate
					_, err := h.Store.Acquire(context.Background(), id, w, lease.From{})
					mu.Lock()
					defer mu.Unlock()
					if err == nil {
						wins = append(wins, w)
					} else {
						errs = append(errs, err)
					}
				}(w)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				h.SetDesired(t, id, schema.StateStopped)
			}()
			close(gate)
			wg.Wait()
			got := mustGet(t, h.Store, id)
			if got.DesiredState != schema.StateStopped {
				t.Fatalf("round %d: desired_state %q after a STOP raced acquires", round, got.DesiredState)
			}
			for _, err := range errs {
				if !errors.Is(err, lease.ErrStopped) && !errors.Is(err, lease.ErrHeld) {
					t.Fatalf("round %d: acquire error %v, want ErrStopped or ErrHeld", round, err)
				}
			}
			switch len(wins) {
			case 0:
				// The stop landed first: nobody owns it.
				stoppedFirst++
				if got.Owner != "" {
					t.Fatalf("round %d: owner %q without a successful acquire", round, got.Owner)
				}
				// On an ambiguous store a racer may have held it unawares
				// (its acquire applied, the reply lost, the retry refused)
				// when the stop landed, which then told it; the store ended
				// that tenure, and the worker acks an entry for a session it
				// does not hold.
				for _, w := range racers {
					if rec := mustWorker(t, h.Store, w); slices.Contains(rec.Mailbox, id) {
						if !opts.Ambiguous {
							t.Fatalf("round %d: the stop was put in %s's mailbox, though no acquire won", round, w)
						}
						if _, err := h.Store.Heartbeat(ctx(t), w, 1, lease.Heartbeat{Seq: time.Now().UnixNano(), AtMs: now, Ack: []string{id}}); err != nil {
							t.Fatal(err)
						}
					}
				}
			case 1:
				// The acquire landed first: the stop found the owner and told
				// it through its mailbox.
				won++
				w := wins[0]
				if got.Owner != w {
					t.Fatalf("round %d: owner %q, the winner was %s", round, got.Owner, w)
				}
				rec, err := h.Store.Heartbeat(ctx(t), w, 1, lease.Heartbeat{Seq: time.Now().UnixNano(), AtMs: now})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Contains(rec.Mailbox, id) {
					t.Fatalf("round %d: the stop of %s is not in its owner's mailbox %v", round, id, rec.Mailbox)
				}
				// The owner releases the stopped session: it is not unowned-STARTED.
				if err := h.Store.Release(ctx(t), lease.Token{ConnectionID: id, Owner: w, Epoch: got.Epoch}, 3); err != nil {
					t.Fatalf("round %d: release of the stopped session: %v", round, err)
				}
				if _, err := h.Store.Heartbeat(ctx(t), w, 1, lease.Heartbeat{Seq: time.Now().UnixNano(), AtMs: now, Ack: []string{id}}); err != nil {
					t.Fatal(err)
				}
				if after := mustGet(t, h.Store, id); after.Owner != "" || after.LastSeq != 3 || after.DesiredState != schema.StateStopped {
					t.Fatalf("round %d: after release: %+v", round, after)
				}
			default:
				t.Fatalf("round %d: %d winners", round, len(wins))
			}
			_, err := h.Store.Acquire(ctx(t), id, "late", lease.From{})
			wantErr(t, "acquire after stop", err, lease.ErrStopped)
			eventually(t, fmt.Sprintf("round %d: a stopped session is listed as unowned", round), func() bool { return !unowned(t, h.Store)[id] })
		}
		for _, w := range racers {
			rec := mustWorker(t, h.Store, w)
			if len(rec.Mailbox) != 0 {
				t.Fatalf("acks left %s's mailbox %v", w, rec.Mailbox)
			}
		}
		t.Logf("%d rounds: %d acquires won before the stop, %d stops first", rounds, won, stoppedFirst)
	})
}
