package streamer

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/source"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/shared/spec/spectest"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// standbyTenure is the tenure header of the standby tests: the feed tells
// a standby's connection ("<worker>/standby/<n>") from an owner's by it.
const standbyTenure = "X-Wsfleet-Tenure"

// standbyFeed starts a feed for standby sessions: one owner connection per
// session (kick-older), standby connections admitted beside it when allow.
func standbyFeed(t *testing.T, allow bool) *feed.Server {
	return feed.StartForTest(t, feed.Config{Rate: feedRate, Mode: feed.ModeKickOlder, TenureHeader: standbyTenure, AllowStandby: allow})
}

// standbyWorker is a worker of the standby tests: it names its tenure on
// every dial.
func (e *env) standbyWorker(mods ...func(*Config)) *testWorker {
	return e.worker(func(c *Config) {
		c.TenureHeader = standbyTenure
		c.RebalanceEvery = 500 * time.Millisecond
		for _, mod := range mods {
			mod(c)
		}
	})
}

// standbySession seeds a STARTED session on f with a standby, from a
// source that cannot replay: seq_mode none (the worker numbers the
// messages; the feed's own seq stays in the data, for the judge), or the
// feed's seq field without a resume parameter (seqless false).
func (e *env) standbySession(f *feed.Server, seqless ...bool) string {
	on := true
	return e.session(func(it *lease.Item) {
		sp := spec.Spec{WSURL: f.URL(it.ConnectionID), Standby: &spec.Standby{Enabled: &on}}
		if len(seqless) == 0 || seqless[0] {
			sp.SeqMode = source.SeqNone
		}
		it.Spec = spectest.Stored(e.t, sp)
	})
}

// feedSeqs are the feed's seqs of the messages delivered for id, in
// delivery order, with the worker that delivered each.
func (e *env) feedSeqs(id string) (seqs []int64, workers []string) {
	for _, d := range e.sink.get(id) {
		var m struct {
			Seq int64 `json:"seq"`
		}
		if err := json.Unmarshal([]byte(d.data), &m); err != nil || m.Seq == 0 {
			e.t.Fatalf("delivered data %q has no feed seq: %v", d.data, err)
		}
		seqs, workers = append(seqs, m.Seq), append(workers, d.worker)
	}
	return seqs, workers
}

// holdsStandby reports whether w holds a connected standby of id.
func holdsStandby(w *testWorker, id string) bool {
	for _, v := range w.Status().Standbys {
		if v.ConnectionID == id && v.Connected && v.Messages > 0 {
			return true
		}
	}
	return false
}

// noHoles fails when a feed seq between the first and the last delivered
// is missing at the sink, and returns how many were delivered twice.
func noHoles(t *testing.T, seqs []int64) (repeats int) {
	t.Helper()
	seen := map[int64]int{}
	for _, s := range seqs {
		seen[s]++
	}
	lo, hi := slices.Min(seqs), slices.Max(seqs)
	for s := lo; s <= hi; s++ {
		switch n := seen[s]; {
		case n == 0:
			t.Fatalf("feed seq %d (between %d and %d) never reached the sink: lost", s, lo, hi)
		case n > 1:
			repeats += n - 1
		}
	}
	return repeats
}

func TestStandbyTakesOverACrashedOwnerWithNothingLost(t *testing.T) {
	t.Run("seq_mode none", func(t *testing.T) { standbyCrash(t, true, false) })
	t.Run("seq field without resume", func(t *testing.T) { standbyCrash(t, false, false) })
	// The promotion's acquire is applied at once and its reply comes
	// 600 ms later, while the standby's backstop reads the session item
	// every 100 ms: those reads show the session owned by the standby's
	// worker with no standby, and the connection must not be closed as
	// superseded (a chaos run lost 17 messages so).
	t.Run("slow promotion reply", func(t *testing.T) { standbyCrash(t, true, true) })
}

// slowPromotions is a store whose acquires that promote a standby are
// answered late: applied, then the reply held for delay.
type slowPromotions struct {
	lease.Store
	delay time.Duration
}

func (s slowPromotions) Acquire(ctx context.Context, id, owner string, from lease.From) (lease.Item, error) {
	it, err := s.Store.Acquire(ctx, id, owner, from)
	if err == nil && from.Standby != nil {
		select {
		case <-time.After(s.delay):
		case <-ctx.Done():
		}
	}
	return it, err
}

// standbyCrash kills the owner of a standby session on a source that
// cannot replay (seqless: seq_mode none) and judges what reached the sink.
func standbyCrash(t *testing.T, seqless, slowReply bool) {
	e := newEnv(t)
	f := standbyFeed(t, true)
	var mods []func(*Config)
	if slowReply {
		e.storeFor = func(_ string, st lease.Store) lease.Store {
			return slowPromotions{Store: st, delay: 600 * time.Millisecond}
		}
		mods = append(mods, func(c *Config) { c.StandbyCheckEvery = 100 * time.Millisecond })
	}
	a, b := e.standbyWorker(mods...), e.standbyWorker(mods...)
	id := e.standbySession(f, seqless)
	e.notify(schema.NotifyStart, id)
	testwait.Eventually(t, 5*time.Second, "an owner", func() bool { return e.owner(id) != nil })
	owner, standby := a, b
	if b.owns(id) {
		owner, standby = b, a
	}
	testwait.Eventually(t, 10*time.Second, "a standby on the other worker", func() bool { return holdsStandby(standby, id) })
	it := e.item(id)
	if it.Standby != standby.ID() || it.StandbyEpoch < 1 {
		t.Fatalf("item names standby %q@%d, want %s", it.Standby, it.StandbyEpoch, standby.ID())
	}
	// Long enough that the standby's window, without the owner's
	// positions, would hold far more than they let it repeat.
	testwait.Eventually(t, 10*time.Second, "the standby connected for 4 s", func() bool {
		for _, v := range standby.Status().Standbys {
			if v.ConnectionID == id && !v.Since.IsZero() && time.Since(v.Since) >= 4*time.Second {
				return true
			}
		}
		return false
	})
	conns := len(f.Records(id))
	owner.kill()
	testwait.Eventually(t, testTTL+4*time.Second+slack, "the standby's worker delivering", func() bool {
		return len(byWorker(e.sink.get(id), standby.ID())) >= int(feedRate) // a second of live messages after the window
	})
	seqs, workers := e.feedSeqs(id)
	repeats := noHoles(t, seqs)
	// The promotion dialed nothing: the feed saw no connection after the
	// crash but the ones it already had (the owner's and the standby's).
	if n := len(f.Records(id)); n != conns {
		t.Fatalf("the feed saw %d connections of %s after the crash, %d before: the takeover dialed", n, id, conns)
	}
	it = e.item(id)
	if it.Owner != standby.ID() || it.Standby != "" {
		t.Fatalf("after the takeover the item says owner %q standby %q; want owner %s, no standby", it.Owner, it.Standby, standby.ID())
	}
	if st := standby.Stats(); st.StandbyPromotions != 1 {
		t.Fatalf("standby promotions %d, want 1", st.StandbyPromotions)
	}
	// The owner's positions (pushed every standbyAssignEvery) moved the
	// window on: what repeats is at most what was acknowledged since.
	if bound := int(2 * feedRate); repeats > bound {
		t.Fatalf("%d messages repeated across the takeover, more than the %d the owner's positions allow", repeats, bound)
	}
	last := slices.Index(workers, standby.ID())
	t.Logf("%d messages, the dead owner's last feed seq %d, the standby's first %d, %d repeated (acknowledged after the last position)",
		len(seqs), seqs[last-1], seqs[last], repeats)
}

func TestStandbyHandOffOnShutdownRepeatsNothing(t *testing.T) {
	e := newEnv(t)
	f := standbyFeed(t, true)
	a, b := e.standbyWorker(), e.standbyWorker()
	id := e.standbySession(f)
	e.notify(schema.NotifyStart, id)
	testwait.Eventually(t, 5*time.Second, "an owner", func() bool { return e.owner(id) != nil })
	owner, standby := a, b
	if b.owns(id) {
		owner, standby = b, a
	}
	testwait.Eventually(t, 10*time.Second, "a standby on the other worker", func() bool { return holdsStandby(standby, id) })
	testwait.Eventually(t, 5*time.Second, "messages from the owner", func() bool { return e.sink.count(id) >= 20 })
	conns := len(f.Records(id))
	owner.stop()
	testwait.Eventually(t, 5*time.Second, "the standby's worker delivering", func() bool {
		return len(byWorker(e.sink.get(id), standby.ID())) >= int(feedRate)
	})
	seqs, _ := e.feedSeqs(id)
	if repeats := noHoles(t, seqs); repeats != 0 {
		t.Fatalf("%d messages delivered twice across the hand-off to the standby (it aligns on the last delivered one)", repeats)
	}
	if n := len(f.Records(id)); n != conns {
		t.Fatalf("the feed saw %d connections after the hand-off, %d before: the receiver dialed", n, conns)
	}
}

func TestStandbyRefusedByAOneConnectionSource(t *testing.T) {
	e := newEnv(t)
	f := standbyFeed(t, false) // kick-older for standbys too
	e.standbyWorker()
	e.standbyWorker()
	id := e.standbySession(f)
	e.notify(schema.NotifyStart, id)
	testwait.Eventually(t, 15*time.Second, "standby_refused at the session's generation", func() bool {
		it := e.item(id)
		return it.StandbyRefusedGen == it.Generation && it.Standby == "" && it.StandbyError != ""
	})
	n := e.sink.count(id)
	testwait.Eventually(t, 5*time.Second, "the owner still delivering", func() bool { return e.sink.count(id) >= n+int(feedRate) })
	conns := len(f.Records(id))
	// The owner heard of the refusal, and asks for no standby again at
	// this generation: over three of its placement passes, no new
	// connection.
	owner := e.owner(id)
	testwait.Eventually(t, 5*time.Second, "the owner knows no standby", func() bool { w, _ := owner.standbyOf(id); return w == "" })
	passes := owner.standbyPasses.Load()
	testwait.Eventually(t, 5*time.Second, "three placement passes", func() bool { return owner.standbyPasses.Load() >= passes+3 })
	if got := len(f.Records(id)); got != conns {
		t.Fatalf("the feed saw %d connections after the refusal, %d before: a standby was asked for again", got, conns)
	}
}

// threeWithAStandby starts three standby workers and one standby session,
// and waits for its owner and a standby on another worker; holder is the
// worker (not the owner, not stopped) holding a connected standby of id
// now, nil when none.
func threeWithAStandby(t *testing.T) (e *env, ws []*testWorker, id string, owner *testWorker, holder func() *testWorker) {
	e = newEnv(t)
	f := standbyFeed(t, true)
	ws = []*testWorker{e.standbyWorker(), e.standbyWorker(), e.standbyWorker()}
	id = e.standbySession(f)
	e.notify(schema.NotifyStart, id)
	testwait.Eventually(t, 5*time.Second, "an owner", func() bool { return e.owner(id) != nil })
	owner = e.owner(id)
	holder = func() *testWorker {
		for _, w := range ws {
			if w != owner && !w.stopped && holdsStandby(w, id) {
				return w
			}
		}
		return nil
	}
	testwait.Eventually(t, 10*time.Second, "a standby", func() bool { return holder() != nil })
	return e, ws, id, owner, holder
}

func TestStandbyReplacedWhenItsWorkerDiesAndDroppedAtAStop(t *testing.T) {
	e, _, id, owner, holder := threeWithAStandby(t)
	first := holder()
	first.kill()
	testwait.Eventually(t, testTTL+6*time.Second+slack, "a standby on the third worker", func() bool {
		h := holder()
		return h != nil && h != first && e.item(id).Standby == h.ID()
	})
	second := holder()
	if e.owner(id) != owner {
		t.Fatal("the standby's worker dying moved the session")
	}
	e.stop(id)
	testwait.Eventually(t, 10*time.Second, "the standby dropped after the stop", func() bool {
		for _, v := range second.Status().Standbys {
			if v.ConnectionID == id {
				return false
			}
		}
		return e.item(id).Standby == ""
	})
}

// A stop reaches the worker holding a session's standby through its own
// mailbox (ingest mails it too), not only through the owner's call: here
// the owner has lost track of its standby (as during a directed hand-off,
// whose giver ended its tenure, or an owner cut off from DynamoDB), and
// the standby's own check is 30 s away; the standby still closes at its
// worker's next heartbeat. Before, it stayed open until that check (a
// chaos run: a standby connection open 5.6 s after a stop was
// acknowledged).
func TestStandbyDroppedAtAStopItsOwnerDoesNotTellIt(t *testing.T) {
	e, _, id, owner, holder := threeWithAStandby(t)
	h := holder()
	owner.sbMu.Lock()
	delete(owner.ownStandbys, id)
	owner.sbMu.Unlock()
	e.stop(id)
	testwait.Eventually(t, 10*time.Second, "the standby dropped after the stop", func() bool {
		for _, v := range h.Status().Standbys {
			if v.ConnectionID == id {
				return false
			}
		}
		return true
	})
}

func TestStandbyPlacedInAnotherZone(t *testing.T) {
	e := newEnv(t)
	f := standbyFeed(t, true)
	inZone := func(z string) *testWorker {
		return e.standbyWorker(func(c *Config) { c.Zone = z })
	}
	a1, a2, b := inZone("zone-a"), inZone("zone-a"), inZone("zone-b")
	// Each session's owner is in zone a or b; its standby goes to the other
	// zone whenever one has room: zone b's owner to zone a, zone a's to b.
	for range 6 {
		id := e.standbySession(f)
		e.notify(schema.NotifyStart, id)
		testwait.Eventually(t, 5*time.Second, "an owner", func() bool { return e.owner(id) != nil })
		testwait.Eventually(t, 10*time.Second, "a standby", func() bool { return e.item(id).Standby != "" })
		owner, standby := e.owner(id).ID(), e.item(id).Standby
		zone := map[string]string{a1.ID(): "zone-a", a2.ID(): "zone-a", b.ID(): "zone-b"}
		if zone[owner] == zone[standby] {
			t.Fatalf("%s: owner %s and standby %s both in %s", id, owner, standby, zone[owner])
		}
	}
}

// A promotion consumes the standby: the promoted owner places the next one
// on a third worker, woken at its acquire (placeNow), not at its next pass.
func TestPromotedSessionGetsANewStandby(t *testing.T) {
	e, ws, id, owner, holder := threeWithAStandby(t)
	first := holder()
	owner.kill()
	testwait.Eventually(t, testTTL+4*time.Second+slack, "the standby promoted", func() bool {
		return first.owns(id) && first.Stats().StandbyPromotions == 1
	})
	var third *testWorker
	for _, w := range ws {
		if w != owner && w != first {
			third = w
		}
	}
	testwait.Eventually(t, 10*time.Second, "a new standby on the third worker", func() bool {
		return holdsStandby(third, id) && e.item(id).Standby == third.ID()
	})
}

// A session acquired without a standby asks for a placement at once, and
// only such a one; the wake-ups coalesce.
func TestAcquiredWithoutAStandbyWakesThePlacement(t *testing.T) {
	w := &Worker{ownStandbys: map[string]*ownerStandby{}, placeNow: make(chan struct{}, 1)}
	if w.wantStandby("held", lease.Item{ConnectionID: "held", Generation: 1, Standby: "w-2", StandbyEpoch: 3}, true) {
		t.Fatal("a session acquired with its standby asks for a placement now")
	}
	if w.wantStandby("plain", lease.Item{ConnectionID: "plain", Generation: 1}, false) {
		t.Fatal("a session that asks for no standby asks for a placement now")
	}
	if !w.wantStandby("promoted", lease.Item{ConnectionID: "promoted", Generation: 1}, true) {
		t.Fatal("a session acquired without a standby does not ask for a placement now")
	}
	w.wakePlacement()
	w.wakePlacement()
	if len(w.placeNow) != 1 {
		t.Fatalf("%d wake-ups pending, want 1 (coalesced)", len(w.placeNow))
	}
}

// A new generation that only the standby's backstop re-read sees (its owner
// is not told: no mailbox entry, and no audit of its sessions within the
// test) has the standby's worker stand by for it: a new assignment, and a
// dial of the new configuration, taken from the session as the backstop
// read it (the assignment's write returns no spec: dialing from its item
// failed, and the standby ended).
func TestStandbyBackstopFollowsANewGeneration(t *testing.T) {
	e := newEnv(t)
	f := standbyFeed(t, true)
	check := func(c *Config) {
		c.StandbyCheckEvery = 300 * time.Millisecond
		c.ReconcileEvery = time.Minute // no audit of the owner's sessions meets the new generation first
	}
	a, b := e.standbyWorker(check), e.standbyWorker(check)
	id := e.standbySession(f)
	e.notify(schema.NotifyStart, id)
	testwait.Eventually(t, 5*time.Second, "an owner", func() bool { return e.owner(id) != nil })
	standby := a
	if a.owns(id) {
		standby = b
	}
	testwait.Eventually(t, 10*time.Second, "a standby", func() bool { return holdsStandby(standby, id) })
	before := e.item(id)
	// Ingest's new configuration: its spec item first, then the session
	// names it at the next generation (no mailbox entry: the owner is not
	// told).
	on := true
	sp := spec.Spec{WSURL: f.URL(id) + "?token=rotated", Standby: &spec.Standby{Enabled: &on}}
	sp.SeqMode = source.SeqNone
	next := lease.Item{ConnectionID: id, Generation: before.Generation + 1, Spec: spectest.Stored(t, sp)}
	specItem, err := dynamostore.EncodeSpec(next)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &e.table, Item: specItem}); err != nil {
		t.Fatal(err)
	}
	e.update(id, "SET #r = :r, #g = :g", map[string]string{"#r": schema.AttrSpecRef, "#g": schema.AttrGeneration},
		map[string]types.AttributeValue{":r": str(dynamostore.SpecRef(next)), ":g": num(next.Generation)})
	testwait.Eventually(t, 10*time.Second, "the standby on the new configuration", func() bool {
		it := e.item(id)
		if it.Standby != standby.ID() || it.StandbyEpoch <= before.StandbyEpoch || !holdsStandby(standby, id) {
			return false
		}
		for _, c := range f.Records(id) {
			if strings.Contains(c.RequestURI, "token=rotated") && strings.Contains(c.Tenure, "/standby/") && c.Reason == feed.ReasonOpen {
				return true
			}
		}
		return false
	})
}
