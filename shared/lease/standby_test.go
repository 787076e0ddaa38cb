package lease_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/wsfleet/wsfleet/shared/lease"
)

// wantStandbyHeld checks that err names standby st.
func wantStandbyHeld(t *testing.T, what string, err error, st lease.StandbyToken) {
	t.Helper()
	var se *lease.StandbyHeldError
	if !errors.As(err, &se) || !errors.Is(err, lease.ErrStandbyHeld) || se.Standby != st {
		t.Fatalf("%s: %v, want a *StandbyHeldError naming %s", what, err, st)
	}
}

// A takeover of a session whose standby's worker is alive leaves it to
// that worker, whose own acquire is the standby's promotion.
func TestTakeoverLeavesTheSessionToALiveStandby(t *testing.T) {
	r := newRig(t, started("a"))
	a, _ := r.keeper("wa")
	b, _ := r.keeper("wb")
	c, _ := r.keeper("wc")
	ha := r.acquire(a, "a")
	st, it, err := b.AssignStandby(r.ctx, "a", 1, nil)
	if err != nil {
		t.Fatalf("assign standby: %v", err)
	}
	if st != (lease.StandbyToken{ConnectionID: "a", Worker: "wb", Epoch: 1}) || it.Standby != "wb" || it.Owner != "wa" {
		t.Fatalf("assigned %s, item %+v", st, it)
	}
	if got, ok := b.Standby("a"); !ok || got != st {
		t.Fatalf("the keeper holds standby %s %v, want %s", got, ok, st)
	}
	if got := b.Standbys(); len(got) != 1 || got[0] != st {
		t.Fatalf("standbys %v", got)
	}
	if b.Count() != 0 || b.Holds("a") {
		t.Fatal("a standby counts as a held session")
	}
	// The owner leaves without releasing.
	if err := a.Leave(r.ctx); err != nil {
		t.Fatal(err)
	}
	_, err = c.Acquire(r.ctx, "a", nil)
	wantStandbyHeld(t, "takeover by a third worker while the standby's worker lives", err, st)
	hb, err := b.Acquire(r.ctx, "a", nil)
	if err != nil {
		t.Fatalf("the standby's takeover: %v", err)
	}
	if got, ok := hb.Promoted(); !ok || got != st {
		t.Fatalf("promoted %s %v, want %s", got, ok, st)
	}
	if hb.Epoch() != ha.Epoch()+1 {
		t.Fatalf("epoch %d after %d", hb.Epoch(), ha.Epoch())
	}
	if _, ok := b.Standby("a"); ok || len(b.Standbys()) != 0 {
		t.Fatal("the keeper still holds the standby it promoted")
	}
	got := r.store.Session("a")
	if got.Owner != "wb" || got.Standby != "" || got.StandbyEpoch != st.Epoch || got.Epoch != hb.Epoch() {
		t.Fatalf("after the promotion: %+v", got)
	}
}

// A standby whose worker is seen not alive does not hold a takeover up.
func TestTakeoverBypassesAStandbySeenNotAlive(t *testing.T) {
	r := newRig(t, started("a"))
	a, _ := r.keeper("wa")
	b, _ := r.keeper("wb")
	c, _ := r.keeper("wc")
	r.acquire(a, "a")
	if _, _, err := b.AssignStandby(r.ctx, "a", 1, nil); err != nil {
		t.Fatal(err)
	}
	for _, k := range []*lease.Keeper{a, b} {
		if err := k.Leave(r.ctx); err != nil {
			t.Fatal(err)
		}
	}
	hc, err := c.Acquire(r.ctx, "a", nil)
	if err != nil {
		t.Fatalf("takeover past a gone standby: %v", err)
	}
	if _, ok := hc.Promoted(); ok {
		t.Fatal("an ordinary takeover reported a promotion")
	}
	if got := r.store.Session("a"); got.Owner != "wc" || got.Standby != "" {
		t.Fatalf("after the takeover: %+v", got)
	}
}

// A Keeper whose standby was replaced (it was seen not alive, then came
// back) acquires as any worker: its stale token is forgotten, and the new
// standby's worker, alive, is the preferred receiver.
func TestPromotionWithAReplacedStandbyIsAnOrdinaryAcquire(t *testing.T) {
	r := newRig(t, started("a"))
	a, _ := r.keeper("wa")
	b, _ := r.keeper("wb")
	c, _ := r.keeper("wc")
	r.acquire(a, "a")
	old, _, err := b.AssignStandby(r.ctx, "a", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	cur, _, err := c.AssignStandby(r.ctx, "a", 1, &old)
	if err != nil {
		t.Fatalf("replacement: %v", err)
	}
	if err := a.Leave(r.ctx); err != nil {
		t.Fatal(err)
	}
	_, err = b.Acquire(r.ctx, "a", nil)
	wantStandbyHeld(t, "acquire by the replaced standby's worker", err, cur)
	if _, ok := b.Standby("a"); ok {
		t.Fatal("the keeper kept a standby token that was replaced")
	}
	hc, err := c.Acquire(r.ctx, "a", nil)
	if err != nil {
		t.Fatalf("the new standby's takeover: %v", err)
	}
	if got, ok := hc.Promoted(); !ok || got != cur {
		t.Fatalf("promoted %s %v, want %s", got, ok, cur)
	}
}

// A drop is fenced by the standby's epoch; the Keeper forgets the token
// once it is dropped, or found lost.
func TestDropStandbyForgetsTheToken(t *testing.T) {
	r := newRig(t, started("a"))
	a, _ := r.keeper("wa")
	b, _ := r.keeper("wb")
	r.acquire(a, "a")
	st, _, err := b.AssignStandby(r.ctx, "a", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.DropStandby(r.ctx, st, 1, "source refused a second connection"); err != nil {
		t.Fatalf("drop: %v", err)
	}
	if _, ok := b.Standby("a"); ok {
		t.Fatal("the keeper holds a dropped standby")
	}
	if got := r.store.Session("a"); got.Standby != "" || got.StandbyRefusedGen != 1 || got.StandbyError != "source refused a second connection" {
		t.Fatalf("after the drop: %+v", got)
	}
	if err := b.DropStandby(r.ctx, st, 0, ""); !errors.Is(err, lease.ErrStandbyLost) {
		t.Fatalf("drop again: %v, want ErrStandbyLost", err)
	}
	if _, _, err := b.AssignStandby(r.ctx, "a", 1, nil); !errors.Is(err, lease.ErrStandbyRefused) {
		t.Fatalf("assignment at the refused generation: %v, want ErrStandbyRefused", err)
	}
	if len(b.Standbys()) != 0 {
		t.Fatalf("a refused assignment was remembered: %v", b.Standbys())
	}
}

// The standby rules of an acquire, as every store applies them.
func TestAcquireStandbyRules(t *testing.T) {
	owned := func(owner, standby string, epoch int64) *lease.Item {
		it := started("a")
		it.Owner, it.Epoch, it.Standby, it.StandbyEpoch = owner, 3, standby, epoch
		return &it
	}
	prev := &lease.Token{ConnectionID: "a", Owner: "wa", Epoch: 3}
	st := &lease.StandbyToken{ConnectionID: "a", Worker: "wb", Epoch: 2}
	for _, c := range []struct {
		name  string
		it    *lease.Item
		owner string
		from  lease.From
		err   error // nil, ErrStandbyHeld, ErrStandbyLost
		drops bool
	}{
		{"promotion", owned("wa", "wb", 2), "wb", lease.From{Prev: prev, Standby: st}, nil, true},
		{"promotion retried after it applied", owned("wb", "", 2), "wb", lease.From{Prev: prev, Standby: st}, nil, false},
		{"promotion of a replaced standby", owned("wa", "wc", 3), "wb", lease.From{Prev: prev, Standby: st}, lease.ErrStandbyLost, false},
		{"promotion of a re-assigned standby", owned("wa", "wb", 3), "wb", lease.From{Prev: prev, Standby: st}, lease.ErrStandbyLost, false},
		{"standby's takeover without its token", owned("wa", "wb", 2), "wb", lease.From{Prev: prev}, nil, true},
		{"takeover by another worker", owned("wa", "wb", 2), "wc", lease.From{Prev: prev}, lease.ErrStandbyHeld, false},
		{"takeover bypassing another worker", owned("wa", "wb", 2), "wc", lease.From{Prev: prev, StandbyGone: "wx"}, lease.ErrStandbyHeld, false},
		{"takeover past a gone standby", owned("wa", "wb", 2), "wc", lease.From{Prev: prev, StandbyGone: "wb"}, nil, true},
		{"takeover without standby", owned("wa", "", 2), "wc", lease.From{Prev: prev}, nil, false},
		{"unowned acquire keeps the standby", owned("", "wb", 2), "wc", lease.From{}, nil, false},
		{"unowned acquire naming it gone keeps it", owned("", "wb", 2), "wc", lease.From{StandbyGone: "wb"}, nil, false},
		{"unowned acquire by the standby", owned("", "wb", 2), "wb", lease.From{}, nil, true},
		{"the owner's re-acquire keeps it", owned("wc", "wb", 2), "wc", lease.From{}, nil, false},
	} {
		err := lease.CanAcquire(c.it, c.owner, c.from)
		if (c.err == nil) != (err == nil) || (c.err != nil && !errors.Is(err, c.err)) {
			t.Errorf("%s: CanAcquire = %v, want %v", c.name, err, c.err)
			continue
		}
		if err == nil {
			if got := lease.AcquireDropsStandby(c.it, c.owner, c.from); got != c.drops {
				t.Errorf("%s: AcquireDropsStandby = %v, want %v", c.name, got, c.drops)
			}
		}
	}
}

// PromotionApplied: only the promoted standby's worker owning the session
// with no standby at the standby's epoch.
func TestPromotionApplied(t *testing.T) {
	st := lease.StandbyToken{ConnectionID: "a", Worker: "wb", Epoch: 2}
	for _, c := range []struct {
		name           string
		owner, standby string
		epoch          int64
		want           bool
	}{
		{"promoted", "wb", "", 2, true},
		{"still the standby", "wa", "wb", 2, false},
		{"another standby", "wa", "wc", 3, false},
		{"promoted, then a new standby", "wb", "wc", 3, false},
		{"no standby, another owner", "wc", "", 2, false},
		{"re-assigned, then acquired by its worker", "wb", "", 3, false},
	} {
		it := started("a")
		it.Owner, it.Epoch, it.Standby, it.StandbyEpoch = c.owner, 4, c.standby, c.epoch
		if got := lease.PromotionApplied(&it, st); got != c.want {
			t.Errorf("%s: PromotionApplied = %v, want %v", c.name, got, c.want)
		}
	}
}

// standby_error is bounded and stays valid UTF-8.
func TestStandbyReasonIsBounded(t *testing.T) {
	if got := lease.StandbyReason("closed"); got != "closed" {
		t.Fatalf("short reason: %q", got)
	}
	long := "x" + strings.Repeat("é", lease.MaxStandbyError)
	got := lease.StandbyReason(long)
	if len(got) > lease.MaxStandbyError || !utf8.ValidString(got) || !strings.HasPrefix(long, got) || len(got) < lease.MaxStandbyError-1 {
		t.Fatalf("long reason cut to %d bytes (valid %v)", len(got), utf8.ValidString(got))
	}
}
