package streamer

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/logging"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/source"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/shared/spec/spectest"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/pipenet"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// ckptCounter counts the checkpoint writes per session that reach the
// store (whatever their outcome).
type ckptCounter struct {
	lease.Store
	mu sync.Mutex
	n  map[string]int
}

func (c *ckptCounter) Checkpoint(ctx context.Context, t lease.Token, lastSeq int64) error {
	c.mu.Lock()
	c.n[t.ConnectionID]++
	c.mu.Unlock()
	return c.Store.Checkpoint(ctx, t, lastSeq)
}

func (c *ckptCounter) count(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

// policyWorker is a test worker on store st (through a severable wrapper)
// delivering into rec (a recSink, or one wrapping it), its sessions dialing
// the feed on pn.
type policyWorker struct {
	w      *Worker
	store  *severableStore
	cancel context.CancelFunc
	done   chan error
	ended  bool
}

func startPolicyWorker(t *testing.T, id string, st lease.Store, pn *pipenet.Net, rec sink.Handler, every time.Duration) *policyWorker {
	t.Helper()
	cfg := DefaultConfig()
	cfg.WorkerID = id
	cfg.AdminAddr = ""
	cfg.RebalanceEvery = 0 // a worker keeps what it holds
	if every > 0 {
		cfg.CheckpointEvery = every
	}
	log := logging.New(io.Discard, schema.ServiceStreamer, "info")
	r := &policyWorker{store: &severableStore{Store: st}, done: make(chan error, 1)}
	w, err := New(cfg, Deps{Store: r.store, Handler: rec, Logger: &log, Metrics: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	w.env.Client = &http.Client{Transport: &http.Transport{DialContext: pn.DialContext, DisableKeepAlives: true}}
	r.w = w
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- w.Run(ctx) }()
	return r
}

func (r *policyWorker) stop() {
	if !r.ended {
		r.cancel()
		<-r.done
		r.ended = true
	}
}

// putPolicySession writes a STARTED session streaming from the test feed
// with sp's source protocol, as ingest writes it (checkpoint_every_ms from
// an explicit checkpoint_every).
func putPolicySession(t *testing.T, st *memstore.Store, id string, sp spec.Spec) {
	t.Helper()
	sp.WSURL = "ws://feed.test" + feed.PathPrefix + id
	st.Put(lease.Item{ConnectionID: id, DesiredState: schema.StateStarted, Generation: 1, LastSeq: lease.NoSeq,
		CheckpointEvery: sp.CheckpointInterval(), Spec: spectest.Stored(t, sp)})
}

// The worker's choice per session (lease.Config.Periodic): periodic
// checkpoints where a new connection can ask the source to resume (a
// resume parameter, a seq placeholder in an open message) or the start
// gave checkpoint_every; none for seq_mode none or a live stream; a spec
// that does not decode keeps them.
func TestPeriodicCheckpointsWhereTheSourceCanResume(t *testing.T) {
	text := func(s string) *string { return &s }
	for _, c := range []struct {
		name string
		sp   spec.Spec
		want bool
	}{
		{"resume query parameter", spec.Spec{Resume: &spec.Resume{QueryParam: "from"}}, true},
		{"{{resume_from}} in an open message", spec.Spec{Config: source.Config{OpenMessages: []source.OpenMessage{{Text: text(`{"sub":"t","from":"{{resume_from}}"}`)}}}}, true},
		{"{{last_seq}} in an open message", spec.Spec{Config: source.Config{OpenMessages: []source.OpenMessage{{Text: text(`{"sub":"t","after":"{{last_seq}}"}`)}}}}, true},
		{"live stream", spec.Spec{Config: source.Config{OpenMessages: []source.OpenMessage{{Text: text(`{"sub":"trades"}`)}}}}, false},
		{"seq_mode none", spec.Spec{Config: source.Config{SeqMode: source.SeqNone}}, false},
		{"live stream, checkpoint_every", spec.Spec{Settings: spec.Settings{CheckpointEvery: "30s"}}, true},
		{"seq_mode none, checkpoint_every", spec.Spec{Settings: spec.Settings{CheckpointEvery: "2m"}, Config: source.Config{SeqMode: source.SeqNone}}, true},
	} {
		c.sp.WSURL = "wss://x.test/feed"
		it := lease.Item{ConnectionID: "p", Generation: 1, CheckpointEvery: c.sp.CheckpointInterval(), Spec: spectest.Stored(t, c.sp)}
		if got := periodicCheckpoints(it); got != c.want {
			t.Errorf("%s: periodic %v, want %v", c.name, got, c.want)
		}
	}
	if !periodicCheckpoints(lease.Item{ConnectionID: "p", Spec: `{"ws_url":`}) {
		t.Error("a spec that does not decode: periodic checkpoints off, want on")
	}
}

// A worker's sessions over the test feed, 31 s with a 5 s CheckpointEvery:
// the resumable one checkpoints every interval; the explicit
// checkpoint_every of 2 s is honoured on a live stream; a live stream
// (seq_mode field, no resume) and a seq_mode none session write no
// checkpoint at all while they deliver. The graceful stop then writes each
// one's final checkpoint with its release: the numbering floor of seq_mode
// none and the duplicate bound of the next tenure keep it. In a
// testing/synctest bubble on a memory store.
func TestNonResumableSessionsWriteOnlyTheFinalCheckpoint(t *testing.T) {
	const every, run = 5 * time.Second, 31 * time.Second
	synctest.Test(t, func(t *testing.T) {
		_, pn, stopFeed := pipeFeed(t, 5)
		defer stopFeed()
		st := memstore.New()
		sessions := map[string]spec.Spec{
			"resumable": {Resume: &spec.Resume{QueryParam: feed.DefaultResumeParam}},
			"live":      {},
			"none":      {Config: source.Config{SeqMode: source.SeqNone}},
			"explicit":  {Settings: spec.Settings{CheckpointEvery: "2s"}},
		}
		for id, sp := range sessions {
			putPolicySession(t, st, id, sp)
		}
		cc := &ckptCounter{Store: st, n: map[string]int{}}
		rec := &recSink{by: map[string][]delivery{}}
		a := startPolicyWorker(t, "pa", cc, pn, rec, every)
		defer a.stop()
		for id := range sessions {
			for rec.count(id) == 0 {
				time.Sleep(100 * time.Millisecond)
			}
		}
		time.Sleep(run)
		lastSeen := map[string]int64{}
		for id := range sessions {
			lastSeen[id] = maxSeq(rec.get(id))
		}
		for id, want := range map[string][2]int{"resumable": {int(run / every), int(run/every) + 2}, "explicit": {int(run / (2 * time.Second)), int(run/(2*time.Second)) + 3}, "live": {0, 0}, "none": {0, 0}} {
			if n := cc.count(id); n < want[0] || n > want[1] {
				t.Errorf("%s: %d checkpoints over %s, want %d–%d", id, n, run, want[0], want[1])
			}
		}
		for _, id := range []string{"live", "none"} {
			if it, _ := st.Get(context.Background(), id); it.LastSeq != lease.NoSeq {
				t.Errorf("%s: last_seq %d stored while it delivered, want none", id, it.LastSeq)
			}
		}
		a.stop()
		for id := range sessions {
			it, _ := st.Get(context.Background(), id)
			if it.Owner != "" || it.LastSeq < lastSeen[id] || it.LastSeq > maxSeq(rec.get(id)) {
				t.Errorf("%s after the stop: owner %q, last_seq %d, want the release's final one (delivered %d before the stop, %d in all)",
					id, it.Owner, it.LastSeq, lastSeen[id], maxSeq(rec.get(id)))
			}
		}
	})
}

// Under seq_mode none without periodic checkpoints, the numbers still grow
// across a crash: worker a delivers with no checkpoint stored, dies (kill
// -9), and b, taking the sessions over at epoch 2, numbers from
// (2 - 1) × 2^32 + 1 on, above everything a delivered. In a testing/synctest
// bubble on a memory store.
func TestSeqModeNoneNumbersGrowAcrossACrashWithoutCheckpoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		_, pn, stopFeed := pipeFeed(t, 5)
		defer stopFeed()
		st := memstore.New()
		ids := []string{"n-0", "n-1"}
		for _, id := range ids {
			putPolicySession(t, st, id, spec.Spec{Config: source.Config{SeqMode: source.SeqNone}})
		}
		cc := &ckptCounter{Store: st, n: map[string]int{}}
		rec := &recSink{by: map[string][]delivery{}}
		a := startPolicyWorker(t, "na", cc, pn, rec, 0)
		defer a.stop()
		for _, id := range ids {
			for rec.count(id) < 10 {
				time.Sleep(100 * time.Millisecond)
			}
		}
		b := startPolicyWorker(t, "nb", cc, pn, rec, 0)
		defer b.stop()
		time.Sleep(5 * time.Second)
		crash(a.w, a.store, a.cancel, a.done)
		a.ended = true
		for _, id := range ids {
			if n := cc.count(id); n != 0 {
				t.Fatalf("%s: %d checkpoints before the crash, want none (seq_mode none)", id, n)
			}
			if it, _ := st.Get(context.Background(), id); it.LastSeq != lease.NoSeq {
				t.Fatalf("%s: last_seq %d stored before the crash, want none", id, it.LastSeq)
			}
		}
		ttl := DefaultConfig().LeaseTTL
		for _, id := range ids {
			for len(byWorker(rec.get(id), "nb")) < 10 {
				if time.Since(t0) > time.Minute+3*ttl {
					t.Fatalf("%s: b delivered %d after a died", id, len(byWorker(rec.get(id), "nb")))
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		for _, id := range ids {
			fromA, fromB := byWorker(rec.get(id), "na"), byWorker(rec.get(id), "nb")
			if fromB[0].epoch != 2 || fromB[0].seq != 1<<32+1 {
				t.Errorf("%s: b's first delivery epoch %d seq %d, want epoch 2 seq 2^32+1", id, fromB[0].epoch, fromB[0].seq)
			}
			if top := maxSeq(fromA); fromB[0].seq <= top {
				t.Errorf("%s: b numbered from %d, at or below a's %d", id, fromB[0].seq, top)
			}
			for i := 1; i < len(fromB); i++ {
				if fromB[i].seq <= fromB[i-1].seq {
					t.Fatalf("%s: b delivered %d after %d", id, fromB[i].seq, fromB[i-1].seq)
				}
			}
		}
	})
}
