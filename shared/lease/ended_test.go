package lease_test

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
)

// auditIDs is what k's audit lists, by connection id and epoch.
func (r *rig) auditIDs(k *lease.Keeper) []lease.Token {
	r.t.Helper()
	owned, err := k.Audit(r.ctx, nil)
	if err != nil {
		r.t.Fatalf("audit: %v", err)
	}
	var out []lease.Token
	for _, o := range owned {
		out = append(out, o.Token)
	}
	return out
}

// A by_owner listing that still shows tenures the worker ended (released,
// handed off to a receiver that took it, failed) would send the audit to
// release them again: a refused conditional write each, billed. The audit
// drops them; a tenure it did not end (held, or one it holds only in the
// table) and a later tenure of the same session stay listed.
func TestAuditSkipsTenuresTheWorkerEnded(t *testing.T) {
	r := newRig(t, started("released"), started("given"), started("failed"), started("again"), started("held"))
	a, _ := r.keeper("wa")
	b, _ := r.keeper("wb")
	r.refresh(a, b)
	r.store.SetIndexLag(r.clk, memstore.IndexLag{Owner: 5 * time.Second})
	hs := map[string]*lease.Held{}
	for _, id := range []string{"released", "given", "failed", "again", "held"} {
		hs[id] = r.acquire(a, id)
	}
	r.clk.Advance(6 * time.Second) // the index shows the acquires
	if got := r.auditIDs(a); len(got) != 5 {
		t.Fatalf("audit before any end: %v, want the 5 tenures", got)
	}

	if err := a.Release(r.ctx, hs["released"]); err != nil {
		t.Fatal(err)
	}
	g, err := a.Give(hs["given"])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AcquireGiven(r.ctx, "given", g); err != nil {
		t.Fatalf("the receiver's acquire of the given tenure: %v", err)
	}
	a.GivenTaken(g)
	if err := a.Fail(r.ctx, hs["failed"], 1, "refused", r.clk.Now()); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(r.ctx, hs["again"]); err != nil {
		t.Fatal(err)
	}
	again := r.acquire(a, "again") // a newer tenure of the same session
	r.clk.Advance(time.Second)     // by_owner still shows the old tenures

	want := []lease.Token{hs["held"].Token()}
	if got := r.auditIDs(a); !slices.Equal(got, want) {
		t.Fatalf("audit while by_owner lags: %v, want only the held tenure %v", got, want)
	}
	r.clk.Advance(5 * time.Second) // the index caught up: the newer tenure shows
	want = []lease.Token{again.Token(), hs["held"].Token()}
	if got := r.auditIDs(a); !slices.Equal(got, want) {
		t.Fatalf("audit once by_owner caught up: %v, want %v", got, want)
	}
}

// What the audit drops is only what the worker ended: a tenure it holds in
// the table but not in memory (an acquire whose reply was lost) is listed,
// and a stale entry still listed after the bound is listed again (a
// refused write then, never a session left owned).
func TestAuditForgetsEndedTenuresAfterTheBound(t *testing.T) {
	r := newRig(t, started("s"))
	a, _ := r.keeper("wa")
	r.refresh(a)
	cfg := a.Config()
	lag := cfg.IndexLagBound + cfg.RPCTimeout*5
	r.store.SetIndexLag(r.clk, memstore.IndexLag{Owner: lag})
	h := r.acquire(a, "s")
	alive := func(d time.Duration) { // a keeps heartbeating
		for ; d > 0; d -= time.Second {
			r.step(time.Second, []*lease.Keeper{a}, nil)
		}
	}
	alive(lag + time.Second)
	if err := a.Release(r.ctx, h); err != nil {
		t.Fatal(err)
	}
	if got := r.auditIDs(a); len(got) != 0 {
		t.Fatalf("audit right after the release: %v, want none", got)
	}
	alive(lag - time.Second) // past the keep, the index still behind
	if got := r.auditIDs(a); !slices.Equal(got, []lease.Token{h.Token()}) {
		t.Fatalf("audit past the bound with the index still behind: %v, want the stale tenure %v", got, h.Token())
	}
	if !lease.StaleOwned(lease.Owned{Token: h.Token()}, h.Token().Epoch) || lease.StaleOwned(lease.Owned{Token: lease.Token{Epoch: h.Token().Epoch + 1}}, h.Token().Epoch) {
		t.Fatal("StaleOwned: an entry at the ended epoch is stale, a newer one is not")
	}
}

// The audit's pass acts on its entries one by one while the worker's
// releases go on: its release of a tenure the Keeper ended meanwhile
// writes nothing; of one whose release failed (still the worker's in the
// table, as far as it knows) it writes.
func TestReleaseTokenOfAnEndedTenureWritesNothing(t *testing.T) {
	r := newRig(t, started("ended"), started("failed-release"))
	a, _ := r.keeper("wa")
	r.refresh(a)
	ended, stuck := r.acquire(a, "ended"), r.acquire(a, "failed-release")
	var releases atomic.Int64
	refuse := atomic.Bool{}
	r.store.SetFail(func(op string) (error, bool) {
		if op != "release" {
			return nil, false
		}
		releases.Add(1)
		if refuse.Load() {
			return errors.New("injected: the table did not answer"), false
		}
		return nil, false
	})
	if err := a.Release(r.ctx, ended); err != nil {
		t.Fatal(err)
	}
	refuse.Store(true)
	if err := a.Release(r.ctx, stuck); err == nil {
		t.Fatal("the injected failure did not reach the release")
	}
	refuse.Store(false)
	releases.Store(0)
	if err := a.ReleaseToken(r.ctx, ended.Token()); err != nil || releases.Load() != 0 {
		t.Fatalf("ReleaseToken of the released tenure: err %v, %d release writes, want none", err, releases.Load())
	}
	if err := a.ReleaseToken(r.ctx, stuck.Token()); err != nil || releases.Load() != 1 {
		t.Fatalf("ReleaseToken of the tenure whose release failed: err %v, %d release writes, want 1", err, releases.Load())
	}
	if it, _ := r.store.Get(r.ctx, "failed-release"); it.Owner != "" {
		t.Fatalf("failed-release still owned by %q", it.Owner)
	}
}
