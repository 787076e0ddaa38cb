package batch_test

// Packs across sessions: a Packer whose PackGroup is shared by several
// sessions gets wire records that carry messages of many sessions.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/backoff"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch/batchtest"
)

// oneGroup puts every session in one pack group.
func oneGroup(string) string { return "" }

// crossConfig sends one request at a time, so that what is queued while
// the first one is held at the gate is packed when it returns.
func crossConfig() batch.Config {
	c := testConfig()
	c.MaxInFlight = 1
	return c
}

// queueBehindARequest holds a request of session "z" at p's gate, queues
// seqs 1..n of each of ids behind it, releases the gate and returns the
// sessions' tenures.
func queueBehindARequest(t *testing.T, b *batch.Batcher, p *packSender, ids []string, n int64) map[string]*tenure {
	t.Helper()
	holdARequest(t, b, p, msg("z", 1), newTenure())
	tns := map[string]*tenure{}
	for _, id := range ids {
		tns[id] = newTenure()
		tns[id].skip = true
		for seq := int64(1); seq <= n; seq++ {
			if err := b.Submit(context.Background(), msg(id, seq), tns[id], nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(p.gate)
	return tns
}

// sessionsIn is the sessions whose messages a wire body ("id:seq" records)
// carries, in order.
func sessionsIn(body string) []string {
	var ids []string
	for _, m := range messages(body) {
		id, _, _ := strings.Cut(m, ":")
		if len(ids) == 0 || ids[len(ids)-1] != id {
			ids = append(ids, id)
		}
	}
	return ids
}

// byRequest is p's wire bodies per request.
func (p *packSender) byRequest() [][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var reqs [][]string
	at := 0
	for _, n := range p.records {
		reqs = append(reqs, slices.Clone(p.wire[at:min(at+n, len(p.wire))]))
		at += n
	}
	return reqs
}

func (p *packSender) writtenOf(id string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.written[id])
}

// checkDelivered fails t unless every session of tns had seqs 1..n
// written once each, in order, but those in refused, and acknowledged in
// order up to n.
func checkDelivered(t *testing.T, p *packSender, tns map[string]*tenure, n int64, refused map[string][]string) {
	t.Helper()
	for id, tn := range tns {
		want := slices.DeleteFunc(seqTexts(1, int(n)), func(s string) bool { return slices.Contains(refused[id], s) })
		if got := p.writtenOf(id); !slices.Equal(got, want) {
			t.Errorf("session %s written %v: want %v", id, got, want)
		}
		if tn.failed != "" || tn.last() != n {
			t.Errorf("session %s acknowledged up to %d (%s): want %d in order", id, tn.last(), tn.failed, n)
		}
	}
}

// checkOneRecordPerSession fails t when a request of an ordered sink
// carries two wire records of one session.
func checkOneRecordPerSession(t *testing.T, p *packSender) {
	t.Helper()
	for i, req := range p.byRequest() {
		seen := map[string]bool{}
		for _, w := range req {
			for _, id := range sessionsIn(w) {
				if seen[id] {
					t.Fatalf("request %d %v: session %s in two wire records", i, req, id)
				}
				seen[id] = true
			}
		}
	}
}

func TestPacksMixSessionsOfOneGroupOnly(t *testing.T) {
	p := newPackSender(100)
	p.gate = make(chan struct{})
	p.group = func(id string) string { return id[:1] } // a1, a2 share; b1, b2 share
	b := batchtest.Start(t, p, crossConfig())
	ids := []string{"a1", "b1", "a2", "b2"}
	tns := queueBehindARequest(t, b, p, ids, 3)
	waitAcked(t, tns, 3)
	checkDelivered(t, p, tns, 3, nil)
	checkOneRecordPerSession(t, p)
	mixed := map[string]bool{}
	wire, _ := p.snapshot()
	for _, w := range wire[1:] {
		ss := sessionsIn(w)
		for _, id := range ss {
			if id[:1] != ss[0][:1] {
				t.Fatalf("wire record %q mixes groups", w)
			}
		}
		if len(ss) > 1 {
			mixed[ss[0][:1]] = true
		}
	}
	if !mixed["a"] || !mixed["b"] {
		t.Fatalf("wire %v: want a pack of a1 and a2, and one of b1 and b2", wire)
	}
}

func TestOrderedSessionsShareRecordsOneEachPerRequest(t *testing.T) {
	p := newPackSender(30) // six messages a pack
	p.gate = make(chan struct{})
	p.group = oneGroup
	b := batchtest.Start(t, p, crossConfig())
	ids := []string{"a", "b", "c", "d", "e", "f"}
	tns := queueBehindARequest(t, b, p, ids, 10)
	waitAcked(t, tns, 10)
	checkDelivered(t, p, tns, 10, nil)
	checkOneRecordPerSession(t, p)
	// A session whose messages fill its pack leaves the rest for the next
	// request, which goes on with the other sessions.
	if reqs := p.byRequest(); len(reqs) < 2 || len(reqs[1]) != len(ids) {
		t.Fatalf("requests %v: want the second to carry a record of each session", reqs)
	}
	wire, _ := p.snapshot()
	shared := 0
	for _, w := range wire {
		if len(w) > 30 {
			t.Errorf("wire record %q over the pack limit 30", w)
		}
		if len(sessionsIn(w)) > 1 {
			shared++
		}
	}
	if st := b.Stats(); shared == 0 || st.WireRecords >= st.Records/2 {
		t.Fatalf("stats %+v, wire %v: want records shared by sessions, fewer than half the messages", st, wire)
	}
}

func TestUnorderedSessionsFillEachOthersPacks(t *testing.T) {
	p := newPackSender(30)
	p.gate = make(chan struct{})
	p.group = oneGroup
	p.unordered = true
	b := batchtest.Start(t, p, crossConfig())
	ids := []string{"a", "b", "c"}
	tns := queueBehindARequest(t, b, p, ids, 8)
	waitAcked(t, tns, 8)
	checkDelivered(t, p, tns, 8, nil)
	// 24 messages of 4 bytes a pack (up to 30): 4 packs, in one request.
	reqs := p.byRequest()
	if len(reqs) != 2 || len(reqs[1]) != 4 {
		t.Fatalf("requests %v: want the first, then one of 4 packs", reqs)
	}
}

// failMixed fails the first n wire records that carry several sessions
// with err (then calls then, when set).
func failMixed(n int, err error, then func(body string)) func(string, int) error {
	failed := 0
	return func(body string, _ int) error {
		if failed >= n || len(sessionsIn(body)) < 2 {
			return nil
		}
		failed++
		if then != nil {
			then(body)
		}
		return err
	}
}

// A pack of several sessions that fails is not pinned (a retry as the same
// record matters to a destination that deduplicates per session): its
// messages go back to their sessions and are packed again.
func TestFailedPackOfSeveralSessionsIsPackedAgain(t *testing.T) {
	p := newPackSender(100)
	p.gate = make(chan struct{})
	p.group = oneGroup
	p.fail = failMixed(1, &coded{code: "InternalFailure"}, nil)
	cfg := crossConfig()
	cfg.Retry = backoff.Policy{Base: time.Nanosecond, Max: time.Nanosecond} // every message back at once
	b := batchtest.Start(t, p, cfg)
	tns := queueBehindARequest(t, b, p, []string{"a", "b", "c", "d"}, 3)
	waitAcked(t, tns, 3)
	checkDelivered(t, p, tns, 3, nil)
	checkOneRecordPerSession(t, p)
	wire, _ := p.snapshot()
	if len(wire) < 3 || len(messages(wire[1])) != 12 {
		t.Fatalf("wire %v: want the 12 messages in one pack, failed, then sent again", wire)
	}
	if len(wire) != 3 || len(sessionsIn(wire[2])) != 4 {
		t.Fatalf("wire %v: want the failed pack's messages packed again across the 4 sessions", wire)
	}
	if st := b.Stats(); st.Records != 13 || st.Refused != 0 || st.EntryErrors != 12 {
		t.Fatalf("stats %+v: want 13 messages acknowledged, 12 failed once, none refused", st)
	}
}

func TestFailedMixedPacksKeepEachSessionsOrder(t *testing.T) {
	p := newPackSender(30)
	p.gate = make(chan struct{})
	p.group = oneGroup
	failed := 0
	p.fail = failMixed(5, &coded{code: "InternalFailure"}, func(string) { failed++ })
	b := batchtest.Start(t, p, crossConfig())
	tns := queueBehindARequest(t, b, p, []string{"a", "b", "c", "d"}, 10)
	waitAcked(t, tns, 10)
	checkDelivered(t, p, tns, 10, nil)
	checkOneRecordPerSession(t, p)
	p.mu.Lock()
	defer p.mu.Unlock()
	if failed == 0 {
		t.Fatal("no pack of several sessions failed")
	}
}

func TestPermanentRefusalOfAMixedPackSendsItsMessagesAlone(t *testing.T) {
	p := newPackSender(60)
	p.gate = make(chan struct{})
	p.group = oneGroup
	p.fail = func(body string, _ int) error {
		if slices.Contains(messages(body), "b:5") {
			return sink.Permanent(&coded{code: "Poison", permanent: true})
		}
		return nil
	}
	b := batchtest.Start(t, p, crossConfig())
	tns := queueBehindARequest(t, b, p, []string{"a", "b", "c"}, 8)
	waitAcked(t, tns, 8)
	checkDelivered(t, p, tns, 8, map[string][]string{"b": {"5"}})
	for id, tn := range tns {
		want := []int64(nil)
		if id == "b" {
			want = []int64{5}
		}
		if got := tn.refusedSeqs(); !slices.Equal(got, want) {
			t.Errorf("session %s refused %v: want %v", id, got, want)
		}
	}
}

func TestFinalRefusalOfAMixedPackGivesUpEachMessageOnce(t *testing.T) {
	p := newPackSender(40)
	p.gate = make(chan struct{})
	p.group = oneGroup
	var refusedBody string
	p.fail = failMixed(1, sink.Final(errors.New("altered")), func(body string) { refusedBody = body })
	b := batchtest.Start(t, p, crossConfig())
	tns := queueBehindARequest(t, b, p, []string{"a", "b", "c"}, 6)
	waitAcked(t, tns, 6)
	p.mu.Lock()
	body := refusedBody
	p.mu.Unlock()
	refused := map[string][]string{}
	for _, m := range messages(body) {
		id, seq, _ := strings.Cut(m, ":")
		refused[id] = append(refused[id], seq)
	}
	if len(refused) < 2 {
		t.Fatalf("refused pack %q: want several sessions", body)
	}
	checkDelivered(t, p, tns, 6, refused)
	total := 0
	for id, tn := range tns {
		var want []int64
		for _, s := range refused[id] {
			var seq int64
			fmt.Sscan(s, &seq)
			want = append(want, seq)
		}
		total += len(want)
		if got := tn.refusedSeqs(); !slices.Equal(got, want) {
			t.Errorf("session %s refused %v: want each message of the pack once, %v", id, got, want)
		}
	}
	if st := b.Stats(); st.Refused != int64(total) || st.Skipped != int64(total) {
		t.Fatalf("stats %+v: want %d refused and skipped", st, total)
	}
}

func TestTrustEndOfOneSessionInAMixedPack(t *testing.T) {
	p := newPackSender(100)
	p.gate = make(chan struct{})
	p.group = oneGroup
	var tns map[string]*tenure
	p.fail = failMixed(1, &coded{code: "InternalFailure"}, func(string) { tns["b"].valid.Store(false) })
	b := batchtest.Start(t, p, crossConfig())
	// The fail func reads tns once a mixed pack is sent: after the gate.
	holdARequest(t, b, p, msg("z", 1), newTenure())
	tns = map[string]*tenure{"a": newTenure(), "b": newTenure()}
	for _, id := range []string{"a", "b"} {
		for seq := int64(1); seq <= 3; seq++ {
			if err := b.Submit(context.Background(), msg(id, seq), tns[id], nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(p.gate)
	testwait.Eventually(t, 10*time.Second, "a acknowledged", func() bool { return tns["a"].last() == 3 })
	checkDelivered(t, p, map[string]*tenure{"a": tns["a"]}, 3, nil)
	if got := p.writtenOf("b"); len(got) != 0 || tns["b"].last() != 0 {
		t.Fatalf("session b written %v, acknowledged %d: want nothing after its trust ended", got, tns["b"].last())
	}
	wire, _ := p.snapshot()
	if len(wire) < 3 || len(sessionsIn(wire[1])) != 2 || !slices.Equal(sessionsIn(wire[2]), []string{"a"}) {
		t.Fatalf("wire %v: want the mixed pack, then a's messages without b's", wire)
	}
	testwait.Eventually(t, 10*time.Second, "b's messages dropped", func() bool { return b.Stats().DroppedInvalid == 3 })
	if err := b.Submit(context.Background(), msg("b", 4), tns["b"], nil); !errors.Is(err, sink.ErrTenureEnded) {
		t.Fatalf("submit of b after its trust ended: %v, want ErrTenureEnded", err)
	}
}

// With packing, ten small messages do not fill a request: they wait
// MaxDelay to share a pack.
func TestPackingWaitsMaxDelayForSmallMessages(t *testing.T) {
	p := newPackSender(100)
	p.group = oneGroup
	cfg := testConfig()
	cfg.MaxDelay = 300 * time.Millisecond
	b := batchtest.Start(t, p, cfg)
	start := time.Now()
	tns := submitEach(t, b, 10, true)
	waitAcked(t, tns, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if waited := p.sentAt[0].Sub(start); waited < cfg.MaxDelay {
		t.Fatalf("first request after %s: want no request before MaxDelay %s", waited, cfg.MaxDelay)
	}
	if len(p.wire) >= 10 {
		t.Fatalf("wire %v: want the ten messages packed", p.wire)
	}
}

// A request that the queued messages fill (their packs reach MaxCount) is
// sent at once.
func TestFullRequestOfPacksIsSentAtOnce(t *testing.T) {
	p := newPackSender(20) // four messages a pack
	p.group = oneGroup
	cfg := testConfig()
	cfg.MaxDelay = time.Hour
	cfg.MaxCount = 2
	b := batchtest.Start(t, p, cfg)
	submitEach(t, b, 6, false) // 24 bytes: more than a pack
	testwait.Eventually(t, 10*time.Second, "a request sent", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.requests == 1 && len(p.wire) == 2
	})
	n := 0
	for _, req := range p.byRequest() {
		for _, w := range req {
			n += len(messages(w))
		}
	}
	if n != 6 {
		t.Fatalf("requests %v: want the 6 messages in 2 packs", p.byRequest())
	}
}

// Sessions packed each alone (PackGroup: the session) fill a request by
// count as without packing: ten sessions' messages are ten wire records.
func TestPerSessionPacksFillARequestByCount(t *testing.T) {
	p := newPackSender(100)
	cfg := testConfig()
	cfg.MaxDelay = time.Hour
	b := batchtest.Start(t, p, cfg)
	submitEach(t, b, 10, false)
	testwait.Eventually(t, 10*time.Second, "a request of 10 records", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.requests == 1 && len(p.wire) == 10
	})
}

// A pack of several sessions over its bound holds back every later pack of
// each of its sessions in the request (and of theirs), so that no session's
// later messages pass the ones that fall back to plain records.
func TestUnfitMixedPackHoldsBackEachOfItsSessions(t *testing.T) {
	p := newPackSender(30)
	p.gate = make(chan struct{})
	p.group = oneGroup
	p.unordered = true
	p.oversize = true
	b := batchtest.Start(t, p, crossConfig())
	tns := queueBehindARequest(t, b, p, []string{"a", "b", "c"}, 8)
	waitAcked(t, tns, 8)
	checkDelivered(t, p, tns, 8, nil)
	checkFellBack(t, b, p, 30)
}

// A session whose trust ends before a request could end waits: the others'
// messages go without it, and it never shares a record sent after its trust
// could cover the request.
func TestSessionShortOfTrustStaysOutOfSharedPacks(t *testing.T) {
	p := newPackSender(100)
	p.group = oneGroup
	b := batchtest.Start(t, p, testConfig())
	a, short := newTenure(), newTenure()
	end := time.Now().Add(300 * time.Millisecond) // under the request timeout, 1 s
	short.deadline.Store(&end)
	for seq := int64(1); seq <= 3; seq++ {
		if err := b.Submit(context.Background(), msg("a", seq), a, nil); err != nil {
			t.Fatal(err)
		}
		if err := b.Submit(context.Background(), msg("b", seq), short, nil); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Eventually(t, 10*time.Second, "a acknowledged, b dropped", func() bool {
		return a.last() == 3 && b.Stats().DroppedInvalid == 3
	})
	if got := p.writtenOf("b"); len(got) != 0 || short.last() != 0 {
		t.Fatalf("session b written %v, acknowledged %d: want nothing", got, short.last())
	}
	if got := p.writtenOf("a"); !slices.Equal(got, seqTexts(1, 3)) {
		t.Fatalf("session a written %v: want 1..3", got)
	}
	if st := b.Stats(); st.HeldForTrust == 0 {
		t.Fatalf("stats %+v: want b held for trust", st)
	}
}

// A message of a slow session in a shared pack group waits a quarter of
// its session's gap (up to PackWait) for other sessions' messages, and the
// request that goes then carries them in one pack: a 1 s gap makes each
// wait 250 ms here, where MaxDelay is 5 ms.
func TestSlowSessionsWaitToSharePacks(t *testing.T) {
	p := newPackSender(1000)
	p.group = oneGroup
	p.unordered = true
	cfg := testConfig()
	cfg.PackWait = 250 * time.Millisecond
	b := batchtest.Start(t, p, cfg)
	ids := []string{"a", "b"}
	tns := map[string]*tenure{}
	for _, id := range ids {
		tns[id] = newTenure()
		if err := b.Submit(context.Background(), msg(id, 1), tns[id], nil); err != nil {
			t.Fatal(err)
		}
	}
	waitAcked(t, tns, 1)
	time.Sleep(time.Second) // the sessions' gap: the input, not a wait for a condition
	p.mu.Lock()
	sent := p.requests
	p.mu.Unlock()
	queued := time.Now()
	for _, id := range ids {
		if err := b.Submit(context.Background(), msg(id, 2), tns[id], nil); err != nil {
			t.Fatal(err)
		}
	}
	waitAcked(t, tns, 2)
	p.mu.Lock()
	at := p.sentAt[sent]
	p.mu.Unlock()
	if waited := at.Sub(queued); waited < cfg.PackWait {
		t.Errorf("the second messages went %s after they were queued: want no request before their wait, %s", waited, cfg.PackWait)
	}
	reqs := p.byRequest()
	if got := reqs[sent:]; len(got) != 1 || len(got[0]) != 1 || len(messages(got[0][0])) != 2 {
		t.Errorf("requests after the gap %v: want one request of one pack holding both sessions' messages", got)
	}
}

// waitAcked waits until every tenure of tns is acknowledged through seq n.
func waitAcked(t *testing.T, tns map[string]*tenure, n int64) {
	t.Helper()
	testwait.Eventually(t, 10*time.Second, fmt.Sprintf("every session acknowledged through %d", n), func() bool {
		for _, tn := range tns {
			if tn.last() != n {
				return false
			}
		}
		return true
	})
}

// On an unordered sink a request goes as soon as a pack group's queued
// messages fill a pack, whatever their wait (a full 64 KB SQS chunk costs
// least per message): here MaxDelay is an hour, and the
// tenth message's bytes reach the pack's bound.
func TestAFullPackGoesAtOnce(t *testing.T) {
	p := newPackSender(40)
	p.group = oneGroup
	p.unordered = true
	cfg := testConfig()
	cfg.MaxDelay, cfg.PackWait = time.Hour, 0
	b := batchtest.Start(t, p, cfg)
	tns := map[string]*tenure{}
	for i := range 10 {
		id := fmt.Sprintf("s%d", i) // "sN:1": 4 bytes
		tns[id] = newTenure()
		if err := b.Submit(context.Background(), msg(id, 1), tns[id], nil); err != nil {
			t.Fatal(err)
		}
		if i == 8 {
			p.mu.Lock()
			n := p.requests
			p.mu.Unlock()
			if n != 0 {
				t.Fatalf("%d requests with 36 bytes queued: want none before a pack's 40", n)
			}
		}
	}
	waitAcked(t, tns, 1)
	if reqs := p.byRequest(); len(reqs) != 1 || len(messages(reqs[0][0])) < 2 {
		t.Fatalf("requests %v: want one, its first record a pack", reqs)
	}
}
