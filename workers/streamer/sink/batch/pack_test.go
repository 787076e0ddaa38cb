package batch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch/batchtest"
)

// packSender is an ordered Packer (unordered: not): a message's record is
// its seq as text, a pack is "P" and its messages' records joined by
// commas. Packs hold one session unless group is set: then a session's
// group is group(its id), and a message's record is "id:seq". fail decides
// a wire record's error by its body and attempt; gate holds the first
// request until it is closed; oversize makes Pack build records over the
// limit.
type packSender struct {
	limit     int
	gate      chan struct{}
	oversize  bool
	unordered bool
	group     func(id string) string

	mu       sync.Mutex
	requests int
	sentAt   []time.Time         // when each request was sent
	records  []int               // wire records per request, in order
	wire     []string            // every wire body sent, in order
	written  map[string][]string // per session, the messages accepted, in order
	attempts map[string]int
	fail     func(body string, attempt int) error
}

func newPackSender(limit int) *packSender {
	return &packSender{limit: limit, written: map[string][]string{}, attempts: map[string]int{}}
}

func (p *packSender) Encode(m sink.Message) (batch.Record, error) {
	body := fmt.Appendf(nil, "%d", m.Seq)
	if p.group != nil {
		body = fmt.Appendf(nil, "%s:%d", m.ConnectionID, m.Seq)
	}
	return batch.Record{ConnectionID: m.ConnectionID, Seq: m.Seq, Epoch: m.LeaseEpoch, Body: body}, nil
}
func (p *packSender) Limits() batch.Limits {
	return batch.Limits{MaxCount: 10, MaxBytes: 1000, MaxRecordBytes: 100}
}
func (p *packSender) Ordered() bool           { return !p.unordered }
func (p *packSender) Size(r batch.Record) int { return len(r.Body) }
func (p *packSender) PackLimit() int          { return p.limit }
func (p *packSender) PackGrow(size int, r batch.Record) int {
	if size == 0 {
		return 1 + len(r.Body)
	}
	return size + 1 + len(r.Body)
}
func (p *packSender) PackGroup(r batch.Record) string {
	if p.group != nil {
		return p.group(r.ConnectionID)
	}
	return r.ConnectionID
}
func (p *packSender) Pack(recs []batch.Record) (batch.Record, error) {
	parts := make([]string, len(recs))
	done := map[string]bool{} // sessions whose records ended
	for i, r := range recs {
		if p.PackGroup(r) != p.PackGroup(recs[0]) {
			return batch.Record{}, errors.New("pack of two groups")
		}
		if i > 0 {
			prev := recs[i-1]
			if prev.ConnectionID != r.ConnectionID {
				done[prev.ConnectionID] = true
			} else if prev.Epoch != r.Epoch || prev.Seq > r.Seq {
				return batch.Record{}, errors.New("pack of two tenures of a session, or out of order")
			}
		}
		if done[r.ConnectionID] {
			return batch.Record{}, errors.New("a session's records apart in a pack")
		}
		parts[i] = string(r.Body)
	}
	body := "P" + strings.Join(parts, ",")
	if p.oversize && len(recs) > 1 {
		body += strings.Repeat(" ", p.limit)
	}
	return batch.Record{ConnectionID: recs[0].ConnectionID, Seq: recs[0].Seq, Epoch: recs[0].Epoch, Body: []byte(body)}, nil
}

// messages is what a wire body carries.
func messages(body string) []string {
	if rest, ok := strings.CutPrefix(body, "P"); ok {
		return strings.Split(strings.TrimSpace(rest), ",")
	}
	return []string{body}
}

func (p *packSender) Send(ctx context.Context, recs []batch.Record) ([]error, error) {
	p.mu.Lock()
	p.requests++
	p.sentAt = append(p.sentAt, time.Now())
	p.records = append(p.records, len(recs))
	gate := p.gate
	if p.requests > 1 {
		gate = nil
	}
	p.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var failed []error
	for i, r := range recs {
		body := string(r.Body)
		p.wire = append(p.wire, body)
		p.attempts[body]++
		if p.fail != nil {
			if err := p.fail(body, p.attempts[body]); err != nil {
				if failed == nil {
					failed = make([]error, len(recs))
				}
				failed[i] = err
				continue
			}
		}
		for _, m := range messages(body) {
			id := r.ConnectionID
			if i := strings.IndexByte(m, ':'); i >= 0 {
				id, m = m[:i], m[i+1:]
			}
			p.written[id] = append(p.written[id], m)
		}
	}
	return failed, nil
}

func (p *packSender) snapshot() (wire []string, written []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.wire), slices.Clone(p.written["c"])
}

func seqTexts(from, to int) []string {
	var s []string
	for i := from; i <= to; i++ {
		s = append(s, fmt.Sprint(i))
	}
	return s
}

// submitBehindARequest submits seq 1, waits until its request is held by
// the gate, then queues 2..n behind it, so that they are packed.
func submitBehindARequest(t *testing.T, b *batch.Batcher, p *packSender, tn sink.Tenure, n int64) {
	t.Helper()
	holdARequest(t, b, p, msg("c", 1), tn)
	for seq := int64(2); seq <= n; seq++ {
		if err := b.Submit(context.Background(), msg("c", seq), tn, nil); err != nil {
			t.Fatal(err)
		}
	}
	close(p.gate)
}

func TestQueuedMessagesOfASessionArePackedInOrderWithinTheLimit(t *testing.T) {
	p := newPackSender(20)
	p.gate = make(chan struct{})
	b := batchtest.Start(t, p, testConfig())
	tn := newTenure()
	submitBehindARequest(t, b, p, tn, 40)
	testwait.Eventually(t, 10*time.Second, "all acknowledged", func() bool { return tn.last() == 40 })
	if tn.failed != "" {
		t.Fatal(tn.failed)
	}
	wire, written := p.snapshot()
	if !slices.Equal(written, seqTexts(1, 40)) {
		t.Fatalf("written %v: want 1..40 in order", written)
	}
	packed := 0
	for _, w := range wire {
		if len(w) > 20 {
			t.Errorf("wire record %q over the pack limit 20", w)
		}
		if len(messages(w)) > 1 {
			packed++
		}
	}
	st := b.Stats()
	if packed == 0 || st.Packs != int64(packed) || st.Records != 40 || st.WireRecords != int64(len(wire)) || st.WireRecords >= st.Records {
		t.Fatalf("stats %+v, %d wire records (%d packs): want 40 messages in fewer wire records", st, len(wire), packed)
	}
}

func TestPackingOffSendsEveryMessageAsItsRecord(t *testing.T) {
	p := newPackSender(0)
	p.gate = make(chan struct{})
	b := batchtest.Start(t, p, testConfig())
	tn := newTenure()
	submitBehindARequest(t, b, p, tn, 10)
	testwait.Eventually(t, 10*time.Second, "all acknowledged", func() bool { return tn.last() == 10 })
	wire, _ := p.snapshot()
	if !slices.Equal(wire, seqTexts(1, 10)) {
		t.Fatalf("wire %v: want one plain record per message", wire)
	}
}

func TestFailedPackIsRetriedAsTheSameRecord(t *testing.T) {
	p := newPackSender(40)
	p.gate = make(chan struct{})
	p.fail = func(body string, attempt int) error {
		if strings.HasPrefix(body, "P") && attempt == 1 {
			return &coded{code: "InternalFailure"}
		}
		return nil
	}
	b := batchtest.Start(t, p, testConfig())
	tn := newTenure()
	submitBehindARequest(t, b, p, tn, 12)
	// What is submitted while the pack waits for its retry must not join it.
	testwait.Eventually(t, 5*time.Second, "a pack failed", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.wire) >= 2
	})
	for seq := int64(13); seq <= 20; seq++ {
		if err := b.Submit(context.Background(), msg("c", seq), tn, nil); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Eventually(t, 10*time.Second, "all acknowledged", func() bool { return tn.last() == 20 })
	wire, written := p.snapshot()
	if !slices.Equal(written, seqTexts(1, 20)) {
		t.Fatalf("written %v: want 1..20 in order", written)
	}
	// Every pack failed once and was sent again whole: each message is in
	// one wire record, sent twice in a row.
	in := map[string]string{}
	for i, w := range wire {
		if i%2 == 1 && wire[i-1] != w {
			t.Fatalf("wire %v: want each failed pack sent again as the same record", wire)
		}
		for _, m := range messages(w) {
			if prev, ok := in[m]; ok && prev != w {
				t.Fatalf("wire %v: message %s in two records", wire, m)
			}
			in[m] = w
		}
	}
	if len(wire)%2 != 0 || len(wire) < 6 {
		t.Fatalf("wire %v: want each pack (at least 3) sent twice", wire)
	}
}

// coded is an error with a code (what makes two failures the same).
type coded struct {
	code      string
	permanent bool
}

func (c *coded) Error() string     { return c.code }
func (c *coded) ErrorCode() string { return c.code }
func (c *coded) Permanent() bool   { return c.permanent }

func TestPackRefusedPermanentlyBlamesOnlyTheMessageRefusedAlone(t *testing.T) {
	p := newPackSender(40)
	p.gate = make(chan struct{})
	p.fail = func(body string, _ int) error {
		if slices.Contains(messages(body), "5") {
			return sink.Permanent(&coded{code: "Poison", permanent: true})
		}
		return nil
	}
	b := batchtest.Start(t, p, testConfig())
	tn := newTenure()
	tn.skip = true
	submitBehindARequest(t, b, p, tn, 9)
	testwait.Eventually(t, 10*time.Second, "all acknowledged", func() bool { return tn.last() == 9 })
	if got := tn.refusedSeqs(); !slices.Equal(got, []int64{5}) {
		t.Fatalf("refused %v: want only seq 5", got)
	}
	_, written := p.snapshot()
	if want := []string{"1", "2", "3", "4", "6", "7", "8", "9"}; !slices.Equal(written, want) {
		t.Fatalf("written %v: want %v", written, want)
	}
}

func TestPackOverItsBoundFallsBackToPlainRecords(t *testing.T) {
	p := newPackSender(30)
	p.gate = make(chan struct{})
	p.oversize = true
	b := batchtest.Start(t, p, testConfig())
	tn := newTenure()
	submitBehindARequest(t, b, p, tn, 12)
	testwait.Eventually(t, 10*time.Second, "all acknowledged", func() bool { return tn.last() == 12 })
	if _, written := p.snapshot(); !slices.Equal(written, seqTexts(1, 12)) {
		t.Fatalf("written %v: want 1..12 in order", written)
	}
	checkFellBack(t, b, p, 30)
}

// checkFellBack checks that no wire record over bound bytes was sent and
// that b counted the packs that fell back to plain records.
func checkFellBack(t *testing.T, b *batch.Batcher, p *packSender, bound int) {
	t.Helper()
	wire, _ := p.snapshot()
	for _, w := range wire {
		if len(w) > bound {
			t.Fatalf("wire record %q over the bound was sent", w)
		}
	}
	if st := b.Stats(); st.PackFallbacks == 0 {
		t.Fatalf("stats %+v: want pack fallbacks counted", st)
	}
}

func TestPacksCountAgainstTheRequestCount(t *testing.T) {
	p := newPackSender(100)
	p.gate = make(chan struct{})
	cfg := testConfig()
	cfg.MaxCount = 2
	cfg.MaxInFlight = 1 // nothing is sent while the first request is held
	b := batchtest.Start(t, p, cfg)
	holdARequest(t, b, p, msg("z", 1), newTenure())
	for _, id := range []string{"a", "b", "c"} {
		tn := newTenure()
		for seq := int64(1); seq <= 3; seq++ {
			if err := b.Submit(context.Background(), msg(id, seq), tn, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(p.gate)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.wire[1:] {
		if len(messages(w)) != 3 {
			t.Fatalf("wire %v: want one pack of 3 per session", p.wire)
		}
	}
	if !slices.Equal(p.records, []int{1, 2, 1}) {
		t.Fatalf("wire records per request %v: want 1, then 2 packs (the request's count), then 1", p.records)
	}
}

// On an ordered sink a request carries one pack of a session: a pack that
// fails cannot be passed by a later pack of the session written in the same
// request (PutRecords writes the records after a failed one).
func TestFailedPacksNeverReorderAnOrderedSession(t *testing.T) {
	p := newPackSender(20)
	p.gate = make(chan struct{})
	p.fail = func(body string, attempt int) error {
		if m := messages(body); attempt == 1 && len(m) > 1 && len(m[0])%2 == 1 {
			return &coded{code: "InternalFailure"}
		}
		return nil
	}
	b := batchtest.Start(t, p, testConfig())
	tn := newTenure()
	submitBehindARequest(t, b, p, tn, 60)
	testwait.Eventually(t, 10*time.Second, "all acknowledged", func() bool { return tn.last() == 60 })
	_, written := p.snapshot()
	if !slices.Equal(written, seqTexts(1, 60)) {
		t.Fatalf("written %v: want 1..60 in order, each once", written)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.requests < 4 {
		t.Fatalf("%d requests: want one pack of the session per request", p.requests)
	}
}

// holdARequest submits m and waits until its request is the one request
// sent, held at p's gate (which the caller closes).
func holdARequest(t *testing.T, b *batch.Batcher, p *packSender, m sink.Message, tn sink.Tenure) {
	t.Helper()
	if err := b.Submit(context.Background(), m, tn, nil); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 5*time.Second, "first request in flight", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.requests == 1
	})
}

// submitEach submits seq 1 of sessions s0 … s(n-1), each of its own tenure
// (batchtest.Ignore unless track), returning the tracked tenures by session.
func submitEach(t *testing.T, b *batch.Batcher, n int, track bool) map[string]*tenure {
	t.Helper()
	tns := map[string]*tenure{}
	for i := range n {
		id := fmt.Sprintf("s%d", i)
		var tn sink.Tenure = batchtest.Ignore{}
		if track {
			tns[id] = newTenure()
			tn = tns[id]
		}
		if err := b.Submit(context.Background(), msg(id, 1), tn, nil); err != nil {
			t.Fatal(err)
		}
	}
	return tns
}
