package session

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/source"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/shared/spec/spectest"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/jsonseq"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

const tenureHeader = "X-Wsfleet-Tenure"

// noSink fails the test if anything is delivered: a standby never calls
// the sink.
type noSink struct{ t *testing.T }

func (n noSink) Handle(_ context.Context, m sink.Message) error {
	n.t.Errorf("a standby delivered seq %d", m.Seq)
	return errors.New("a standby must not deliver")
}

// standbyEnv is h's env with a sink that fails the test, the tenure
// standbyFixture is a feed with the standby tests' tenure header (rate
// messages/s, one-connection mode) and a harness whose sessions name their
// tenure; mod adjusts the session config (nil: none).
func standbyFixture(t *testing.T, rate float64, mode feed.Mode, mod func(*Config)) (*feed.Server, *harness) {
	f := feed.StartForTest(t, feed.Config{Rate: rate, Mode: mode, TenureHeader: tenureHeader})
	cfg := testConfig()
	cfg.TenureHeader = tenureHeader
	if mod != nil {
		mod(cfg)
	}
	return f, newHarness(t, cfg)
}

// newTestStandby is a standby of it for worker at standby epoch epoch,
// with a window of a minute and 1 MiB, on a budget of its own.
func newTestStandby(t *testing.T, h *harness, it lease.Item, worker string, epoch int64) *Standby {
	return NewStandby(standbyEnv(t, h, 1<<20), it, worker, epoch, Window{MaxAge: time.Minute, MaxBytes: 1 << 20})
}

// header, and a worker-wide standby budget of budget bytes.
func standbyEnv(t *testing.T, h *harness, budget int64) *Env {
	env := *h.env
	env.Handler = noSink{t}
	env.Standbys = NewSwitchBudget(budget)
	return &env
}

// putItem stores id on url (seq_mode none when none) with lastSeq and
// returns the item.
func putItem(t *testing.T, h *harness, id, url string, lastSeq int64, none bool) lease.Item {
	sp := spec.Spec{WSURL: url, Resume: &spec.Resume{QueryParam: "from"}}
	if none {
		sp = spec.Spec{WSURL: url, Config: sourceJSON(t, source.Config{SeqMode: source.SeqNone})}
	}
	it := lease.Item{ConnectionID: id, DesiredState: schema.StateStarted, Generation: 1, LastSeq: lastSeq,
		Spec: spectest.Stored(t, sp)}
	h.store.Put(it)
	return it
}

// runStandby runs sb; the channel gets Run's result. The test's end
// closes it and waits.
func runStandby(t *testing.T, sb *Standby) <-chan error {
	done, ended := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(ended)
		done <- sb.Run(context.Background())
	}()
	t.Cleanup(func() {
		sb.Close(ErrStopRequested)
		select {
		case <-ended:
		case <-time.After(5 * time.Second):
			t.Errorf("standby still running")
		}
	})
	return done
}

// waitErr is Run's result within 5 s.
func waitErr(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("Run still running after 5s")
		return nil
	}
}

// adopt acquires id with h's keeper and runs a session adopting sb.
func (h *harness) adopt(id string, sb *Standby) (*Session, <-chan error) {
	h.t.Helper()
	held, err := h.keeper.Acquire(context.Background(), id, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	s := NewAdopting(h.env, held, 0, sb)
	h.mu.Lock()
	h.sessions[id] = s
	h.mu.Unlock()
	done := make(chan error, 1)
	h.wg.Go(func() { done <- s.Run(context.Background()) })
	return s, done
}

// window copies sb's kept entries.
func (sb *Standby) window() []entry {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return append([]entry(nil), sb.w.buf[sb.w.head:]...)
}

// payloadSeqs are the feed's seqs in the delivered messages' payloads.
func payloadSeqs(t *testing.T, r *recorder) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]int64, len(r.msgs))
	for i, m := range r.msgs {
		seq, err := jsonseq.FindPath(m.Data, []string{"seq"})
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		out[i] = seq
	}
	return out
}

func TestStandbyKeepsAWindowAndNeverDelivers(t *testing.T) {
	f, h := standbyFixture(t, 200, feed.ModeAllow, nil)
	env := standbyEnv(t, h, 1<<20)
	it := putItem(t, h, "s1", f.URL("s1"), 100, false)
	sb := NewStandby(env, it, "w2", 7, Window{MaxAge: time.Minute, MaxBytes: 1 << 20})
	done := runStandby(t, sb)
	testwait.Eventually(t, 5*time.Second, "a window of 50 messages", func() bool { return sb.Status().Messages >= 50 })
	win := sb.window()
	for i, e := range win {
		if e.seq != 101+int64(i) {
			t.Fatalf("window[%d] seq %d, want %d (resumed after the item's LastSeq)", i, e.seq, 101+int64(i))
		}
	}
	st := sb.Status()
	if !st.Connected || st.Dials != 1 || st.Bytes != env.Standbys.Used() || st.Bytes == 0 {
		t.Fatalf("status %+v, budget used %d", st, env.Standbys.Used())
	}
	recs := f.Records("s1")
	if len(recs) != 1 || recs[0].Tenure != "w2/standby/7" || recs[0].From != 101 {
		t.Fatalf("records %+v: want one connection of tenure w2/standby/7 from 101", recs)
	}
	sb.Close(ErrStopRequested)
	if err := waitErr(t, done); !errors.Is(err, ErrStopRequested) {
		t.Fatalf("Run = %v", err)
	}
	if u := env.Standbys.Used(); u != 0 {
		t.Fatalf("budget still holds %d bytes after the close", u)
	}
	if n := h.env.Counters.MessagesIn.Load(); n != 0 {
		t.Fatalf("%d messages counted as delivered", n)
	}
}

// An adopted standby's session delivers after the checkpoint with no gap
// and no repeat, on the standby's connection (no dial).
func TestAdoptionDeliversTheWindowThenLiveWithoutGap(t *testing.T) {
	f, h := standbyFixture(t, 200, feed.ModeAllow, nil)
	it := putItem(t, h, "s1", f.URL("s1"), 100, false)
	sb := newTestStandby(t, h, it, "w1", 1)
	sbDone := runStandby(t, sb)
	testwait.Eventually(t, 5*time.Second, "a window of 40 messages", func() bool { return sb.Status().Messages >= 40 })
	// The owner's checkpoint moved to 110 before it died.
	sb.Trim(110)
	if w := sb.window(); w[0].seq != 111 {
		t.Fatalf("after Trim(110) the window starts at %d", w[0].seq)
	}
	it.LastSeq = 110
	h.store.Put(it)
	s, done := h.adopt("s1", sb)
	if err := waitErr(t, sbDone); !errors.Is(err, ErrPromoted) {
		t.Fatalf("standby Run = %v", err)
	}
	testwait.Eventually(t, 5*time.Second, "200 messages delivered", func() bool { return h.rec.count() >= 200 })
	s.Interrupt(ErrStopRequested)
	_ = wait(t, done, 5*time.Second)
	seqs := h.rec.seqs()
	if seqs[0] != 111 {
		t.Fatalf("first delivered %d, want 111", seqs[0])
	}
	contiguous(t, seqs)
	if recs := f.Records("s1"); len(recs) != 1 {
		t.Fatalf("%d connections: the adoption must not dial", len(recs))
	}
	if r := s.Status().Reconnects; r != 0 {
		t.Fatalf("%d reconnects", r)
	}
	if u := sb.env.Standbys.Used(); u != 0 {
		t.Fatalf("the standby budget still holds %d bytes after the adoption", u)
	}
}

// A standby without a connection ready is dropped at the adoption: the
// session dials as any other, and the standby's Run returns ErrPromoted.
func TestAdoptionWithoutAConnectionDials(t *testing.T) {
	f, h := standbyFixture(t, 200, feed.ModeAllow, nil)
	it := putItem(t, h, "s1", f.URL("s1"), 100, false)
	sb := newTestStandby(t, h, it, "w1", 1)
	s, done := h.adopt("s1", sb)
	testwait.Eventually(t, 5*time.Second, "20 messages delivered", func() bool { return h.rec.count() >= 20 })
	if err := sb.Run(context.Background()); !errors.Is(err, ErrPromoted) {
		t.Fatalf("standby Run = %v", err)
	}
	s.Interrupt(ErrStopRequested)
	_ = wait(t, done, 5*time.Second)
	seqs := h.rec.seqs()
	if seqs[0] != 101 {
		t.Fatalf("first delivered %d, want 101", seqs[0])
	}
	contiguous(t, seqs)
	want := "w1/" + strconv.FormatInt(s.Held().Epoch(), 10)
	if recs := f.Records("s1"); len(recs) != 1 || recs[0].Tenure != want {
		t.Fatalf("records %+v: want the session's own dial (%s)", recs, want)
	}
}

// On a feed: the windows stay within their bytes bound and the shared
// budget, and what they evict is counted.
func TestStandbyWindowsBoundedOnAFeed(t *testing.T) {
	f := feed.StartForTest(t, feed.Config{Rate: 200, Mode: feed.ModeAllow})
	h := newHarness(t, testConfig())
	env := standbyEnv(t, h, 3000)
	a := NewStandby(env, putItem(t, h, "s1", f.URL("s1"), lease.NoSeq, false), "w2", 1, Window{MaxAge: time.Minute, MaxBytes: 2000})
	b := NewStandby(env, putItem(t, h, "s2", f.URL("s2"), lease.NoSeq, false), "w2", 1, Window{MaxAge: time.Minute, MaxBytes: 2000})
	runStandby(t, a)
	runStandby(t, b)
	testwait.Eventually(t, 5*time.Second, "both windows evicting", func() bool {
		return a.Status().Dropped >= 20 && b.Status().Dropped >= 20
	})
	sa, sb := a.Status(), b.Status()
	if sa.Bytes > 2000 || sb.Bytes > 2000 || env.Standbys.Used() > 3000 {
		t.Fatalf("windows hold %d and %d bytes, the budget %d: over their bounds", sa.Bytes, sb.Bytes, env.Standbys.Used())
	}
}

// Under seq_mode none the adopted session delivers every message the feed
// sent after the alignment point exactly once.
func TestAdoptionSeqlessDeliversAfterTheAlignmentPoint(t *testing.T) {
	f, h := standbyFixture(t, 200, feed.ModeAllow, nil)
	it := putItem(t, h, "s1", f.URL("s1"), lease.NoSeq, true)
	sb := newTestStandby(t, h, it, "w1", 1)
	runStandby(t, sb)
	testwait.Eventually(t, 5*time.Second, "a window of 20 messages", func() bool { return sb.Status().Messages >= 20 })
	// The owner's last delivered message: the window's 6th.
	w := sb.window()
	at, err := jsonseq.FindPath(w[5].data, []string{"seq"})
	if err != nil {
		t.Fatal(err)
	}
	if !sb.AlignAfter(Fingerprint(w[5].data)) {
		t.Fatal("AlignAfter found no match")
	}
	s, done := h.adopt("s1", sb)
	testwait.Eventually(t, 5*time.Second, "200 messages delivered", func() bool { return h.rec.count() >= 200 })
	s.Interrupt(ErrStopRequested)
	_ = wait(t, done, 5*time.Second)
	got := payloadSeqs(t, h.rec)
	if got[0] != at+1 {
		t.Fatalf("first delivered payload seq %d, want %d (after the alignment point)", got[0], at+1)
	}
	contiguous(t, got)
	nums := h.rec.seqs()
	if base := (s.Held().Epoch()-1)<<32 + 1; nums[0] != base {
		t.Fatalf("first number %d, want the epoch's %d", nums[0], base)
	}
	contiguous(t, nums)
}

// The window is delivered at the adoption, not at the standby's next
// message: the feed sends one message every 5 s.
func TestAdoptionDeliversTheWindowAtOnce(t *testing.T) {
	f, h := standbyFixture(t, 0.2, feed.ModeAllow, nil)
	it := putItem(t, h, "s1", f.URL("s1"), 10, false)
	sb := newTestStandby(t, h, it, "w1", 1)
	runStandby(t, sb)
	testwait.Eventually(t, 8*time.Second, "the first message in the window", func() bool { return sb.Status().Messages >= 1 })
	s, done := h.adopt("s1", sb)
	testwait.Eventually(t, 2*time.Second, "the window delivered", func() bool { return h.rec.count() >= 1 })
	if recs := f.Records("s1"); recs[0].Sent != 1 {
		t.Fatalf("the feed sent %d messages: the window was delivered only after the next", recs[0].Sent)
	}
	testwait.Eventually(t, 8*time.Second, "the next message, live", func() bool { return h.rec.count() >= 2 })
	s.Interrupt(ErrStopRequested)
	_ = wait(t, done, 5*time.Second)
	if seqs := h.rec.seqs(); seqs[0] != 11 || seqs[1] != 12 {
		t.Fatalf("delivered %v, want 11, 12", seqs)
	}
}

// A feed that kicks the older connection: the standby kicks the owner
// once, the owner's redial kicks the standby, which gives up for good.
func TestStandbyRefusedByKickOlder(t *testing.T) {
	f, h := standbyFixture(t, 100, feed.ModeKickOlder, func(c *Config) {
		c.StableAfter = 2 * time.Second
	})
	it := putItem(t, h, "s1", f.URL("s1"), lease.NoSeq, false)
	owner, ownerDone := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "the owner delivers", func() bool { return h.rec.count() >= 5 })
	sb := newTestStandby(t, h, it, "w2", 1)
	done := runStandby(t, sb)
	if err := waitErr(t, done); !errors.Is(err, ErrStandbyRefused) {
		t.Fatalf("Run = %v", err)
	}
	before := h.rec.count()
	testwait.Eventually(t, 5*time.Second, "the owner delivers again", func() bool { return h.rec.count() >= before+20 })
	owner.Interrupt(ErrStopRequested)
	_ = wait(t, ownerDone, 5*time.Second)
	kicked, standbys := 0, 0
	for _, r := range f.Records("s1") {
		if r.Tenure == "w2/standby/1" {
			standbys++
		} else if r.Reason == feed.ReasonKicked {
			kicked++
		}
	}
	if kicked != 1 || standbys != 1 || sb.Status().Dials != 1 {
		t.Fatalf("owner kicked %d times, %d standby connections (%d dials): want 1, 1", kicked, standbys, sb.Status().Dials)
	}
}

// A feed that refuses a second connection (409): refused at once.
func TestStandbyRefusedByRefuseNewer(t *testing.T) {
	f, h := standbyFixture(t, 100, feed.ModeRefuseNewer, nil)
	it := putItem(t, h, "s1", f.URL("s1"), lease.NoSeq, false)
	owner, ownerDone := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "the owner delivers", func() bool { return h.rec.count() >= 5 })
	sb := newTestStandby(t, h, it, "w2", 1)
	done := runStandby(t, sb)
	if err := waitErr(t, done); !errors.Is(err, ErrStandbyRefused) {
		t.Fatalf("Run = %v", err)
	}
	if st := sb.Status(); st.Dials != 1 || st.LastError == "" {
		t.Fatalf("status %+v: want one dial and its error", st)
	}
	if r := owner.Status().Reconnects; r != 0 {
		t.Fatalf("the owner reconnected %d times", r)
	}
	owner.Interrupt(ErrStopRequested)
	_ = wait(t, ownerDone, 5*time.Second)
}

// A new generation closes the standby's connection and dials the new spec.
func TestStandbySetItemRedials(t *testing.T) {
	f, h := standbyFixture(t, 200, feed.ModeAllow, nil)
	it := putItem(t, h, "s1", f.URL("s1"), lease.NoSeq, false)
	sb := newTestStandby(t, h, it, "w2", 1)
	runStandby(t, sb)
	testwait.Eventually(t, 5*time.Second, "a window", func() bool { return sb.Status().Messages >= 5 })
	it.Generation = 2
	it.Spec = spectest.Stored(t, spec.Spec{WSURL: f.URL("s2"), Resume: &spec.Resume{QueryParam: "from"}})
	sb.SetItem(it)
	testwait.Eventually(t, 5*time.Second, "the new spec's connection", func() bool {
		return len(f.Records("s2")) == 1 && sb.Status().Connected
	})
	if recs := f.Records("s1"); len(recs) != 1 || recs[0].Open() || recs[0].ClientCode != 1000 {
		t.Fatalf("the old connection: %+v, want closed with 1000", recs)
	}
}

func entryOf(at int64, seq int64, data string) entry {
	return entry{at: at, seq: seq, fp: Fingerprint([]byte(data)), data: []byte(data)}
}

func TestWindowBoundsEvictAndCount(t *testing.T) {
	now := time.Now().UnixNano()
	// Age: entries older than MaxAge go at the next push.
	w := window{}
	lim := Window{MaxAge: time.Second}
	w.push(entryOf(now-int64(3*time.Second), 1, "a"), lim, now)
	w.push(entryOf(now-int64(2*time.Second), 2, "b"), lim, now-int64(2*time.Second))
	w.push(entryOf(now, 3, "c"), lim, now)
	if w.len() != 1 || w.buf[w.head].seq != 3 || w.dropped != 2 {
		t.Fatalf("age: %d kept (first %d), %d dropped; want 1 (3), 2", w.len(), w.buf[w.head].seq, w.dropped)
	}
	// Bytes: the oldest beyond MaxBytes go; a message larger than the
	// window is dropped.
	w = window{}
	lim = Window{MaxBytes: 10}
	for i := range 5 {
		w.push(entryOf(now, int64(i+1), "xxxx"), lim, now)
	}
	w.push(entryOf(now, 6, "01234567890"), lim, now)
	if w.len() != 2 || w.bytes != 8 || w.dropped != 4 || w.buf[w.head].seq != 4 {
		t.Fatalf("bytes: %d kept, %d bytes, %d dropped; want 2, 8, 4", w.len(), w.bytes, w.dropped)
	}
	// Budget: shared by two windows; a message that does not fit evicts
	// its own window's oldest, or is dropped when its window is empty.
	b := NewSwitchBudget(10)
	w1, w2 := window{budget: b}, window{budget: b}
	w1.push(entryOf(now, 1, "123456"), Window{}, now)
	w2.push(entryOf(now, 1, "12345"), Window{}, now)
	if w2.len() != 0 || w2.dropped != 1 || b.Used() != 6 {
		t.Fatalf("budget: w2 kept %d, dropped %d, used %d; want 0, 1, 6", w2.len(), w2.dropped, b.Used())
	}
	w1.push(entryOf(now, 2, "1234567"), Window{}, now)
	if w1.len() != 1 || w1.dropped != 1 || b.Used() != 7 {
		t.Fatalf("budget: w1 kept %d, dropped %d, used %d; want 1, 1, 7", w1.len(), w1.dropped, b.Used())
	}
	w1.trim(2)
	if w1.len() != 0 || w1.dropped != 1 || b.Used() != 0 {
		t.Fatalf("trim: kept %d, dropped %d, used %d; want 0, 1 (trimmed is not dropped), 0", w1.len(), w1.dropped, b.Used())
	}
}

func TestAlignAfterPicksTheEarliestMatch(t *testing.T) {
	sb := NewStandby(&Env{Config: testConfig()}, lease.Item{ConnectionID: "s1", LastSeq: lease.NoSeq}, "w1", 1, Window{})
	now := time.Now().UnixNano()
	for _, d := range []string{"a", "b", "c", "b", "d"} {
		sb.w.push(entryOf(now, lease.NoSeq, d), sb.win, now)
	}
	if sb.AlignAfter(Fingerprint([]byte("z"))) || sb.Status().Messages != 5 {
		t.Fatalf("no match: want false and all 5 kept, have %d", sb.Status().Messages)
	}
	if !sb.AlignAfter(Fingerprint([]byte("b"))) {
		t.Fatal("no match for b")
	}
	var left string
	for _, e := range sb.window() {
		left += string(e.data)
	}
	if left != "cbd" {
		t.Fatalf("kept %q, want cbd (after the earliest b)", left)
	}
}

func TestLastFingerprintOnlyWhenAsked(t *testing.T) {
	f := feed.StartForTest(t, feed.Config{Rate: 200, Mode: feed.ModeAllow})
	h := newHarness(t, testConfig())
	putItem(t, h, "s1", f.URL("s1"), lease.NoSeq, true)
	putItem(t, h, "s2", f.URL("s2"), lease.NoSeq, true)
	plain, plainDone := h.start("s1")
	held, err := h.keeper.Acquire(context.Background(), "s2", nil)
	if err != nil {
		t.Fatal(err)
	}
	fp := New(h.env, held, 0, Fingerprints())
	h.mu.Lock()
	h.sessions["s2"] = fp
	h.mu.Unlock()
	fpDone := make(chan error, 1)
	h.wg.Go(func() { fpDone <- fp.Run(context.Background()) })
	testwait.Eventually(t, 5*time.Second, "both deliver", func() bool { return plain.Status().Messages > 5 && fp.Status().Messages > 5 })
	fp.Interrupt(ErrStopRequested)
	plain.Interrupt(ErrStopRequested)
	_ = wait(t, fpDone, 5*time.Second)
	_ = wait(t, plainDone, 5*time.Second)
	if plain.LastFingerprint() != 0 || plain.ext != nil {
		t.Fatal("a session without Fingerprints keeps one")
	}
	h.rec.mu.Lock()
	var last []byte
	for _, m := range h.rec.msgs {
		if m.ConnectionID == "s2" {
			last = m.Data
		}
	}
	h.rec.mu.Unlock()
	if got := fp.LastFingerprint(); got == 0 || got != Fingerprint(last) {
		t.Fatalf("LastFingerprint %x, want %x (the last delivered)", got, Fingerprint(last))
	}
}

func TestWindowArrayFollowsWhatItKeeps(t *testing.T) {
	now := time.Now().UnixNano()
	w := window{}
	// The time before the owner's first positions: 40 messages kept.
	for i := range 40 {
		w.push(entryOf(now, int64(i+1), "m"), Window{}, now)
	}
	if cap(w.buf) < 40 {
		t.Fatalf("cap %d for 40 entries", cap(w.buf))
	}
	// Trimmed to the newest: the array shrinks to fit it.
	w.trim(39)
	if w.len() != 1 || w.buf[w.head].seq != 40 || cap(w.buf) > windowKeepCap {
		t.Fatalf("after the trim: %d kept (first %d), cap %d; want 1 (40), cap ≤ %d", w.len(), w.buf[w.head].seq, cap(w.buf), windowKeepCap)
	}
	// A steady window that never empties (a message a second, trimmed to
	// the one before it every second) stays within windowKeepCap, however
	// long it runs, and keeps its order.
	for i := int64(41); i < 1000; i++ {
		w.push(entryOf(now, i, "m"), Window{}, now)
		w.trim(i - 1)
		if w.len() != 1 || w.buf[w.head].seq != i || cap(w.buf) > windowKeepCap {
			t.Fatalf("seq %d: %d kept (first %d), cap %d", i, w.len(), w.buf[w.head].seq, cap(w.buf))
		}
	}
	// Emptied after a burst: the large array goes; a small one stays for
	// the next messages.
	for i := range 100 {
		w.push(entryOf(now, int64(1000+i), "m"), Window{}, now)
	}
	w.trim(1099)
	if w.len() != 0 || cap(w.buf) > windowKeepCap {
		t.Fatalf("emptied after a burst: %d kept, cap %d; want 0, ≤ %d", w.len(), cap(w.buf), windowKeepCap)
	}
	w.push(entryOf(now, 1100, "m"), Window{}, now)
	w.trim(1100)
	if w.len() != 0 || w.buf == nil || cap(w.buf) > windowKeepCap {
		t.Fatalf("emptied, small: cap %d (nil %v); want kept, ≤ %d", cap(w.buf), w.buf == nil, windowKeepCap)
	}
	// A window that keeps many keeps its array and its order: entries
	// move to the front, none is lost.
	for i := range 300 {
		w.push(entryOf(now, int64(2000+i), "m"), Window{}, now)
	}
	w.trim(2099)
	if w.len() != 200 || w.buf[w.head].seq != 2100 || w.buf[len(w.buf)-1].seq != 2299 || w.bytes != 200 {
		t.Fatalf("many: %d kept (%d..%d), %d bytes", w.len(), w.buf[w.head].seq, w.buf[len(w.buf)-1].seq, w.bytes)
	}
	for j := w.head; j < len(w.buf); j++ {
		if w.buf[j].seq != int64(2100+j-w.head) {
			t.Fatalf("order: slot %d holds %d", j, w.buf[j].seq)
		}
	}
}

// A standby's steady window at 1 msg/s (a message, then the owner's
// position trimming the one before it, every second), after the messages
// read before the owner's first positions, lives in an array of at most
// windowKeepCap entries, 224 B (the 224-byte size class: every standby
// keeps one), and pushes and trims without allocating.
func TestSteadyWindowArrayIsSmall(t *testing.T) {
	now := time.Now().UnixNano()
	es := make([]entry, 2000)
	for i := range es {
		es[i] = entryOf(now, int64(i+1), "m")
	}
	w := window{}
	// The placement: 20 messages before the owner's first positions.
	for i := range 20 {
		w.push(es[i], Window{}, now)
	}
	w.trim(es[18].seq)
	for i := 20; i < 30; i++ {
		w.push(es[i], Window{}, now)
		w.trim(es[i-1].seq)
	}
	i := 30
	allocs := testing.AllocsPerRun(1000, func() {
		w.push(es[i], Window{}, now)
		w.trim(es[i-1].seq)
		i++
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per message and trim, want 0", allocs)
	}
	if w.len() != 1 || cap(w.buf) > windowKeepCap || uintptr(cap(w.buf))*unsafe.Sizeof(entry{}) > 224 {
		t.Fatalf("%d kept, cap %d (%d B); want 1 kept in ≤ %d entries, ≤ 224 B", w.len(), cap(w.buf), uintptr(cap(w.buf))*unsafe.Sizeof(entry{}), windowKeepCap)
	}
}

// NewStandby allocates the standby, its shadow session with that
// session's two channels (wake, ended) and its extension: 5 objects. The
// handover channel is made by the adoption, which most standbys never
// meet (it was a sixth, 112 B of every standby).
func TestNewStandbyAllocations(t *testing.T) {
	env := &Env{Config: testConfig()}
	it := lease.Item{ConnectionID: "s1", LastSeq: lease.NoSeq}
	if n := testing.AllocsPerRun(100, func() { _ = NewStandby(env, it, "w1", 1, Window{}) }); n > 5 {
		t.Fatalf("NewStandby: %.0f allocations, want ≤ 5", n)
	}
}
