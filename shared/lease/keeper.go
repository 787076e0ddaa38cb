package lease

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
)

// Observer hears what the Keeper does (metrics, logs, the worker's reaction).
// Methods must not block.
type Observer interface {
	// Heartbeat is called after every heartbeat attempt, once its outcome
	// is applied (a success has extended the trust deadline).
	Heartbeat(latency time.Duration, err error)
	// Ended is called once when a tenure ends for any reason but Release,
	// Fail or Abandon (the session must close at once).
	Ended(h *Held, err error)
	// Mailbox hands over the entries found in the worker's mailbox
	// (schema.MailboxEntry: a connection id with the generation and state
	// of the write that added it), each once; the worker re-reads each
	// session and calls Keeper.Ack with the entry when done. The Keeper
	// treats entries as opaque strings: an ack removes exactly that entry.
	Mailbox(entries []string)
	// WorkerDied is called when this Keeper declared worker id dead: its
	// sessions may be taken over now.
	WorkerDied(id string)
}

type nopObserver struct{}

func (nopObserver) Heartbeat(time.Duration, error) {}
func (nopObserver) Ended(*Held, error)             {}
func (nopObserver) Mailbox([]string)               {}
func (nopObserver) WorkerDied(string)              {}

// Load is what the worker tells its heartbeats.
type Load struct {
	Sessions    int // sessions held
	Capacity    int
	AdminAddr   string
	Draining    bool
	MovesPerMin int
}

// Report returns the worker's current Load.
type Report func() Load

// errLeft ends the liveness of a worker that left.
var errLeft = errors.New("worker left")

// Keeper keeps one worker alive and holds its sessions: it registers the
// worker record and heartbeats it (one write per HeartbeatEvery, carrying
// the mailbox acks and returning the mailbox), fences every session at once
// when the trust deadline of its last successful heartbeat passes (even
// with the store unreachable), checkpoints each session when its last_seq
// advanced, and watches the workers rendezvous hashing gives it, declaring
// dead those whose heartbeat counter did not move for a TTL.
type Keeper struct {
	store Store
	clk   clock.Clock
	cfg   Config
	// secret keys the tenures' secrets (tenureSecret); drawn at the start,
	// never written anywhere.
	secret []byte
	// heldEnv is what its tenures ask it (newHeld).
	heldEnv *heldEnv
	obs     Observer
	report  Report

	sem chan struct{}
	wg  sync.WaitGroup

	// trust is what Valid reads on every delivery, published after every
	// change of live (no lock on the hot path).
	trust atomic.Pointer[trustState]

	lmu      sync.Mutex // guards the fields below; a leaf lock
	live     liveness
	epoch    int64
	nextSeq  int64
	record   WorkerRecord
	acks     []string
	pending  map[string]bool // mailbox entries handed over, not yet acked
	hbBusy   bool
	hbAgain  time.Time // the last heartbeat failed with trust at risk: the next is due then (zero: on schedule)
	targets  []string
	watching map[string]*watch
	alive    int      // alive workers at the last listing
	aliveIDs []string // and their ids (the DONE sweep's rendezvous)
	// aliveNow is alive less the workers of aliveIDs seen gone since,
	// counted at goneSeen's value aliveAt (AliveWorkers).
	aliveNow int
	aliveAt  uint64
	// deathCheck is the earliest instant a watched worker may be declared
	// dead (zero: none due): Run reads it then, not only every WatchEvery.
	deathCheck time.Time

	mu   sync.Mutex // guards held and ckpts; taken before any Held's mu, never after
	held map[string]*Held
	// ckpts orders the held tenures by when the scan next looks at them
	// (ckptqueue.go).
	ckpts ckptQueue
	// looked is the scan's list of the tenures it looks at (Run's
	// goroutine only; its array kept from scan to scan).
	looked []*Held

	tmu sync.Mutex // guards the fields below; a leaf lock
	// ckptHold is the current yield of checkpoints to a throttling store
	// (0: none), ckptHoldUntil when the next ones may start (CheckpointHold).
	ckptHold      time.Duration
	ckptHoldUntil time.Time

	// goneSeen counts the workers newly remembered gone (markGone), so
	// that AliveWorkers recounts only when it moved.
	goneSeen atomic.Uint64

	gmu sync.Mutex // guards the fields below; a leaf lock
	// gone: the workers seen not alive, each with when this Keeper first
	// received a read showing it (monotonic; MayMarkDone counts from it).
	gone      map[string]time.Time
	aliveSeen map[string]time.Time
	// nextSweep is when Orphans next sweeps the DONE records; late, the
	// DONE workers a sweep found owning sessions (queried every pass until
	// they own none).
	nextSweep time.Time
	late      map[string]bool
	// graceEnded: the gone workers whose takeover could not place every
	// session (EndGoneGrace): listed at once, whatever GoneGrace.
	graceEnded map[string]bool
	// listings counts Orphans' listings of by_unowned (4 billion: at one
	// a second, 136 years); unownedSeen is how the listings showed each
	// session unowned (sighting: UnownedGrace, MayClaimUnowned),
	// forgotten unownedKeep listings after the last; sightBase is the
	// clock's time at New, sightings' times offsets from it.
	listings    uint32
	unownedSeen map[string]sighting
	sightBase   time.Time
	// unownedPeak is the most entries unownedSeen had since it was last
	// made (sightings makes it again once it holds at most half of them).
	unownedPeak int

	smu sync.Mutex // guards standbys; a leaf lock
	// standbys: the standby assignments this worker holds, by connection
	// id (standby.go).
	standbys map[string]standbyEntry

	gl    goneListing   // the checks' listing of the GONE workers (gonelist.go)
	sum   summaryState  // the fleet summary (summarize.go)
	bs    backstopState // the summarizer's death declarations (backstop.go)
	ended endedTenures  // the tenures it ended, which the audit skips (ended.go)
}

// trustState is a published copy of the liveness verdict.
type trustState struct {
	valid bool // registered and not ended
	until time.Time
}

// publishLocked publishes live's verdict; the caller holds lmu.
func (k *Keeper) publishLocked() {
	k.trust.Store(&trustState{valid: k.live.registered && k.live.ended == nil, until: k.live.trustedUntil})
}

// NewKeeper returns a Keeper; obs and report may be nil.
func NewKeeper(store Store, clk clock.Clock, cfg Config, obs Observer, report Report) (*Keeper, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if obs == nil {
		obs = nopObserver{}
	}
	k := &Keeper{
		store: store, clk: clk, cfg: cfg, obs: obs, report: report,
		sem:        make(chan struct{}, cfg.MaxConcurrentWrites),
		held:       map[string]*Held{},
		pending:    map[string]bool{},
		watching:   map[string]*watch{},
		gone:       map[string]time.Time{},
		aliveSeen:  map[string]time.Time{},
		late:       map[string]bool{},
		graceEnded: map[string]bool{},
		standbys:   map[string]standbyEntry{},
		gl:         goneListing{sem: make(chan struct{}, 1)},

		unownedSeen: map[string]sighting{},
	}
	k.sightBase = k.clk.Now()
	k.ended.keep = cfg.IndexLagBound + cfg.listTimeout()
	if ss, ok := store.(SummaryStore); ok {
		k.sum.store = ss
	}
	if k.cfg.BootID == "" {
		k.cfg.BootID = rand.Text()
	}
	k.secret = []byte(rand.Text()) // the tenures' secrets (tenureSecret)
	k.heldEnv = &heldEnv{trusted: k.trusted, until: k.trustDeadline, now: k.clk.Now, periodicFor: k.cfg.Periodic}
	k.live = liveness{ttl: cfg.TTL, margin: cfg.SafetyMargin}
	k.publishLocked()
	return k, nil
}

// Config returns the Keeper's timings.
func (k *Keeper) Config() Config { return k.cfg }

// Store returns the store the Keeper writes to.
func (k *Keeper) Store() Store { return k.store }

func (k *Keeper) reported() Load {
	if k.report == nil {
		return Load{Sessions: k.Count()}
	}
	return k.report()
}

// Run heartbeats, enforces the trust deadline, checkpoints and watches until
// ctx is done (nil) or the worker was declared dead (ErrWorkerDead: every
// session has been ended; the worker must exit), then waits for writes in
// flight. Register must have succeeded first.
func (k *Keeper) Run(ctx context.Context) error {
	defer k.wg.Wait()
	nextHB := k.clk.Now().Add(k.cfg.HeartbeatEvery)
	nextWatch := k.clk.Now().Add(k.cfg.WatchEvery())
	nextRefresh := k.clk.Now()
	nextScan := k.clk.Now()
	// One timer for the loop's life: a clk.After per Tick was a timer and
	// a channel of garbage 20 times a second.
	tick := k.clk.NewTimer(k.cfg.Tick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C():
		}
		now := k.clk.Now()
		if !now.Before(nextHB) || k.heartbeatAgain(now) {
			nextHB = now.Add(k.cfg.HeartbeatEvery)
			k.startHeartbeat(ctx)
		}
		if !now.Before(nextWatch) || k.deathDue(now) {
			nextWatch = now.Add(k.cfg.WatchEvery())
			k.wg.Go(func() { k.watchPass(ctx) })
		}
		if !now.Before(nextRefresh) {
			nextRefresh = now.Add(k.cfg.RefreshEvery)
			k.wg.Go(func() { _ = k.refreshWorkers(ctx) }) // a failed listing keeps the last one
		}
		scan := !now.Before(nextScan)
		if scan {
			nextScan = now.Add(checkpointScanEvery)
		}
		if err := k.tick(ctx, scan); err != nil {
			return err
		}
		tick.Reset(k.cfg.Tick) // a Tick after this pass, as an After here was
	}
}

// checkpointScanEvery is how often the Keeper looks for due checkpoints
// (the shortest checkpoint interval is 1 s); the trust deadline is checked
// every Tick.
const checkpointScanEvery = 250 * time.Millisecond

// tick ends every tenure once the worker is no longer trusted and, when
// scan, starts due checkpoints; it returns the liveness error once the
// worker was declared dead and its tenures ended.
func (k *Keeper) tick(ctx context.Context, scan bool) error {
	now := k.clk.Now()
	k.lmu.Lock()
	valid, ended := k.live.valid(now), k.live.ended
	k.lmu.Unlock()
	if !valid {
		reason := ErrUntrusted
		if ended != nil {
			reason = ended
		}
		k.endAll(reason)
		if ended != nil && !errors.Is(ended, errLeft) {
			return ended
		}
		return nil
	}
	if !scan {
		return nil
	}
	heldUntil := k.checkpointsHeldUntil(now)
	k.mu.Lock()
	k.looked = k.dueLocked(k.looked[:0], now)
	k.mu.Unlock()
	batch := make([]ckptWrite, 0, len(k.looked))
	for _, h := range k.looked {
		if !heldUntil.IsZero() && h.Checkpointed() != NoSeq {
			// Periodic checkpoints yield to a throttling store; a session
			// without one does not (FirstCheckpointRetry).
			k.queue(h, heldUntil)
			continue
		}
		seq, due := h.checkpointDue(now)
		if !due {
			// Nothing new, one in flight, or its time moved on (an explicit
			// checkpoint): looked at again at its time, and at the latest
			// at the next scan once that passed, as when every scan
			// looked at every tenure.
			k.queue(h, clock.Latest(h.checkpointAt(), now.Add(checkpointScanEvery)))
			continue
		}
		batch = append(batch, ckptWrite{h: h, seq: seq})
	}
	clear(k.looked) // no reference kept to a tenure between scans
	if len(batch) > 0 {
		k.wg.Go(func() { k.writeCheckpoints(ctx, batch) })
	}
	return nil
}

// checkpointsHeldUntil is when the periodic checkpoints stop yielding to a
// throttling store (no new one starts before it), zero when they do not
// yield at now.
func (k *Keeper) checkpointsHeldUntil(now time.Time) time.Time {
	k.tmu.Lock()
	defer k.tmu.Unlock()
	if now.Before(k.ckptHoldUntil) {
		return k.ckptHoldUntil
	}
	return time.Time{}
}

// checkpointThrottled notes a checkpoint the store throttled at now: the
// periodic checkpoints of every session yield for CheckpointHold (longer at
// each throttle in a row), so that the table's capacity goes to the
// heartbeats, on which every session's trust depends, instead of to retries
// of checkpoints, which only bound the replay after a crash. It returns
// when the session's next one is due.
func (k *Keeper) checkpointThrottled(now time.Time) time.Time {
	k.tmu.Lock()
	defer k.tmu.Unlock()
	k.ckptHold = CheckpointHold(k.ckptHold, k.cfg.CheckpointEvery)
	if until := now.Add(k.ckptHold); until.After(k.ckptHoldUntil) {
		k.ckptHoldUntil = until
	}
	return k.ckptHoldUntil
}

// checkpointSucceeded ends the yield: the store takes checkpoints again.
func (k *Keeper) checkpointSucceeded() {
	k.tmu.Lock()
	k.ckptHold = 0
	k.tmu.Unlock()
}

// endAll ends every tenure with err (the worker is fenced).
func (k *Keeper) endAll(err error) {
	k.mu.Lock()
	var ended []*Held
	for id, h := range k.held {
		if h.end(err) {
			ended = append(ended, h)
		}
		delete(k.held, id)
	}
	k.ckpts = nil
	k.mu.Unlock()
	for _, h := range ended {
		k.obs.Ended(h, err)
	}
}

func (k *Keeper) forget(h *Held) {
	k.mu.Lock()
	if k.held[h.ID()] == h {
		delete(k.held, h.ID())
	}
	k.mu.Unlock()
}
