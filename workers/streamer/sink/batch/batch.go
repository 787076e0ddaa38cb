// Package batch owns the worker's group commit: it sits between the sessions
// and a sink that takes batches (sqssink, kinesissink), gathers the messages
// of every session into requests bounded by count, bytes and delay, keeps a
// bounded number of requests in flight, retries only the entries a request
// failed, and tells each session which of its messages were acknowledged so
// that the session checkpoints only past those (sink.Pipeline).
//
// Per-session order: a session's messages are sent in sequence order; a
// failed entry is sent again before any later entry of its session. With
// Sender.Ordered, a session has at most one request in flight, so requests
// of a session reach the destination in order (SQS FIFO, Kinesis). The one
// exception is a partial failure: the entries of the same request that
// succeeded after a failed one are already written when the failed one is
// retried (PutRecords documents this). Every record carries its seq and
// lease_epoch, so a consumer that needs strict order can restore it.
//
// Acknowledged prefix: a tenure is told (Tenure.Acked) only the end of the
// contiguous run of its messages the destination took. An entry dropped (its
// tenure could no longer deliver when its turn came) or given up on (refused
// for good, without skip) ends that run: no later message of the tenure is
// ever acknowledged past it, so no checkpoint, release or hand-off passes a
// message the destination does not hold.
//
// Trust window: a request is sent only when its timeout (Config.
// RequestTimeout) ends within the Remaining trust of every tenure in it,
// and it runs under that deadline, so no request of a tenure is still in
// flight after the tenure's trust deadline. Entries whose tenure has less
// trust left wait (a heartbeat may extend it) and are dropped once it has
// none.
//
// Refusals: an entry refused transiently (throttling, 5xx, a timeout) is
// retried with backoff for as long as its tenure may deliver; one refused
// permanently (sink.IsPermanent) Config.PermanentAttempts times is given up
// on, and its tenure decides (Tenure.Refused): skip it, or end; one refused
// finally (sink.IsFinal: the destination applied it, altered) is given up
// on at once, since sending it again would only add copies. A request
// refused permanently as a whole names no entry: its entries are sent again
// each in a request of its own, so that only an entry refused alone counts
// (an innocent entry that shared a request with a refused one is not given
// up on).
//
// Repeated failures: an entry that keeps failing the same way (the same
// error code, or text) while the destination takes other records is a
// refusal of that entry, whatever the destination calls it: after
// Config.RepeatFailures such failures it is given up on like a permanent
// refusal (RepeatedError), so that no message holds its session in a retry
// loop for its whole tenure, nor, replayed by the next owner, across
// tenures. A failure counts only when the destination acknowledged another
// record in the same request or since the entry's previous failure (an
// outage fails everything and counts nothing), and throttling
// (sink.IsThrottled) and timeouts never count. A whole request that fails
// twice the same way while others get through is split: its entries are
// sent each alone, and only a failure of an entry alone counts. (A
// message that fails while nothing else is written, its session quiet and
// no other session sending, gives no such evidence: it is retried for as
// long as its tenure may deliver, as in an outage.)
//
// Backpressure: each session buffers at most Config.SessionBufferBytes of
// encoded records not yet acknowledged, and the worker at most
// Config.BufferBudget bytes for all sessions together. Submit blocks while
// either is full, so the session stops reading its socket and TCP pushes
// back on the source; the session counts the stall.
//
// Packing: a Sender that is a Packer (PackLimit > 0) carries several
// messages in one wire record (a pack, of at most PackLimit bytes): the
// queued messages of every session whose records are of one pack group
// (Packer.PackGroup), each session's consecutive, in order and of one
// tenure. A group per session keeps a pack to one session (SQS FIFO, whose
// deduplication and order are per session); one group for all lets any
// sessions share a pack. A request visits the sessions in turn and keeps
// an open pack per group: a session's messages join the open pack of
// their group, which another session may have begun, else begin one.
// Packs count against MaxCount and their sizes against MaxBytes. With
// packing a request is full when the queued bytes reach MaxBytes or the
// packs they would make (estimated per group from the bytes and
// PackLimit) reach MaxCount, not at MaxCount messages: small messages wait
// up to MaxDelay to share packs (a slow session's, in a shared group, up
// to PackWait: pack.go; on an unordered sink a request goes at once when
// a group's sendable messages fill a pack), which bounds what packing adds
// to the latency; a session with a request in flight (Ordered) gathers its next
// pack meanwhile. A wire record's outcome is every message's in it:
// acknowledged, retried or refused together, and the acknowledged prefix,
// the checkpoint, repeated failures and Tenure.Refused see each message
// (a final refusal of a pack gives up on each of its messages once, each
// session's tenure deciding). A pack of one session that fails is sent
// again as the same wire record (the same messages, the same bytes), so a
// retry is a copy of what may already have been written; a pack of several
// sessions that fails is not kept: its messages go back to their sessions'
// queues, in order, and are packed again. A pack refused permanently names
// none of its messages: they are sent again each alone, like the entries
// of a whole request refused permanently. A pack whose encoding exceeds
// its bound (or fails) falls back to its messages' own records, and the
// request's later packs of each of its sessions wait for the next request.
// Stats count messages (Records) and wire records (WireRecords, Packs)
// apart.
//
// Order with packing: on an Ordered sink a request carries at most one wire
// record of each session (its messages in one pack, shared or not, up to
// PackLimit; what does not fit waits for the next request), so the partial
// failure that reorders (a later record of the session written while an
// earlier one failed) cannot happen: a session's records reach the
// destination in order within a tenure, repeated only when a request the
// destination applied is sent again (a timeout: the same record again).
// On any sink a session's messages go to the request's wire records in
// order: never to a record before one holding an earlier message of it.
//
// Goroutines: Run is the dispatcher (its caller owns it and stops it by
// cancelling its context); each request runs in a goroutine Run waits for.
package batch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/workers/streamer/internal/backoff"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// Record is one message encoded for a sink.
type Record struct {
	ConnectionID string
	Seq          int64
	Sub          int64  // sink.Message.Sub: a message without its own seq, after Seq
	Epoch        int64  // sink.Message.LeaseEpoch
	Body         []byte // what the sink sends (its own copy)
}

// Limits are a sink's request limits.
type Limits struct {
	MaxCount       int // entries per request
	MaxBytes       int // sum of the records' sizes per request
	MaxRecordBytes int // one record
}

// Sender is a sink that takes batches.
type Sender interface {
	// Encode turns m into a record (copying m.Data). An error means the
	// message can never be sent (too large): the batcher reports it as
	// permanent (sink.IsPermanent).
	Encode(m sink.Message) (Record, error)
	// Send sends recs in one request, giving up when ctx ends. err fails
	// the whole request; otherwise failed holds one error per record (nil:
	// accepted), or is nil when every record was accepted. Errors that
	// sending again cannot fix are marked permanent (sink.Permanent).
	Send(ctx context.Context, recs []Record) (failed []error, err error)
	// Limits are the destination's request limits.
	Limits() Limits
	// Ordered: a session may have only one request in flight, so that
	// its requests reach the destination in order.
	Ordered() bool
	// Size is what a record counts against Limits.MaxBytes.
	Size(r Record) int
}

// Config bounds batches. Zero MaxCount / MaxBytes take the sink's limits.
type Config struct {
	MaxCount int           // entries per request (≤ the sink's limit)
	MaxBytes int           // bytes per request (≤ the sink's limit)
	MaxDelay time.Duration // the longest a message waits for a batch to fill
	// PackWait is the longest a message of a slow session waits for other
	// sessions' messages to share its pack, when its pack group is shared
	// (Packing): a message waits max(MaxDelay, min(PackWait, gap/4)), gap
	// the session's smoothed time between messages. 0: MaxDelay only.
	PackWait time.Duration
	// MaxInFlight bounds the requests in flight for the whole worker.
	MaxInFlight int
	// SessionBufferBytes bounds a session's records not yet acknowledged;
	// a full buffer stalls the session's reads.
	SessionBufferBytes int
	// BufferBudget bounds the records not yet acknowledged of all sessions
	// together (the worker's memory budget for the sink); 0: no bound
	// beyond the sessions' own. A full budget stalls reads like a full
	// session buffer.
	BufferBudget int64
	// RequestTimeout bounds one request. A request is sent only when it
	// ends within the trust left to every tenure in it; the worker keeps it
	// inside its safety margin (streamer.Config.Validate).
	RequestTimeout time.Duration
	// PermanentAttempts is how many times an entry refused permanently is
	// sent before the batcher gives up on it (Tenure.Refused).
	PermanentAttempts int
	// RepeatFailures is how many times an entry may fail the same way
	// while the destination takes other records before the batcher gives
	// up on it as refused (RepeatedError, Tenure.Refused).
	RepeatFailures int
	// Retry is the backoff of a failed entry (per entry, by its attempts).
	Retry backoff.Policy
}

// DefaultConfig are the defaults.
func DefaultConfig() Config {
	return Config{
		MaxDelay:           10 * time.Millisecond,
		PackWait:           DefaultPackWait,
		MaxInFlight:        32,
		SessionBufferBytes: 4 << 20,
		RequestTimeout:     time.Second,
		PermanentAttempts:  3,
		RepeatFailures:     8,
		Retry:              backoff.Policy{Base: 50 * time.Millisecond, Max: 5 * time.Second},
	}
}

// Validate checks c against the sink's limits; it reports every problem.
func (c Config) Validate(l Limits) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.MaxCount < 0 || c.MaxCount > l.MaxCount {
		bad("batch max count %d: want 0 (the sink's %d) up to %d", c.MaxCount, l.MaxCount, l.MaxCount)
	}
	if c.MaxBytes < 0 || c.MaxBytes > l.MaxBytes || (c.MaxBytes > 0 && c.MaxBytes < l.MaxRecordBytes) {
		bad("batch max bytes %d: want 0 (the sink's %d) or %d..%d (a request must hold the largest record)", c.MaxBytes, l.MaxBytes, l.MaxRecordBytes, l.MaxBytes)
	}
	if c.MaxDelay < 0 {
		bad("batch max delay %s must not be negative", c.MaxDelay)
	}
	if c.PackWait < 0 || c.PackWait > MaxPackWait {
		bad("batch pack wait %s: want 0 (the max delay only) up to %s", c.PackWait, MaxPackWait)
	}
	if c.MaxInFlight < 1 {
		bad("batch requests in flight %d: want at least 1", c.MaxInFlight)
	}
	if c.SessionBufferBytes < l.MaxRecordBytes {
		bad("session buffer %d bytes: want at least the sink's largest record, %d", c.SessionBufferBytes, l.MaxRecordBytes)
	}
	if c.BufferBudget < 0 || (c.BufferBudget > 0 && c.BufferBudget < int64(l.MaxRecordBytes)) {
		bad("buffer budget %d bytes: want 0 (none) or at least the sink's largest record, %d", c.BufferBudget, l.MaxRecordBytes)
	}
	if c.RequestTimeout <= 0 {
		bad("batch request timeout %s must be positive", c.RequestTimeout)
	}
	if c.PermanentAttempts < 1 {
		bad("batch permanent attempts %d: want at least 1", c.PermanentAttempts)
	}
	if c.RepeatFailures < 2 {
		bad("batch repeat failures %d: want at least 2", c.RepeatFailures)
	}
	if err := c.Retry.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("batch retry: %w", err))
	}
	return errors.Join(errs...)
}

// ErrStopped: Submit gave up because the session is ending.
var ErrStopped = errors.New("batch: session ending while its buffer was full")

// Stats are cumulative counts since the batcher started.
type Stats struct {
	Requests      int64 `json:"requests"`       // requests sent
	RequestErrors int64 `json:"request_errors"` // requests that failed whole
	Records       int64 `json:"records"`        // messages acknowledged
	// WireRecords are the records the destination acknowledged (a pack is
	// one, whatever the messages in it); Packs the packs of two or more
	// messages sent; PackFallbacks the packs whose encoding exceeded their
	// bound, whose messages went out as plain records.
	WireRecords    int64 `json:"wire_records"`
	Packs          int64 `json:"packs"`
	PackFallbacks  int64 `json:"pack_fallbacks"`
	EntryErrors    int64 `json:"entry_errors"`    // entries a request failed (then retried)
	DroppedInvalid int64 `json:"dropped_invalid"` // entries dropped: their lease was no longer valid
	// Refused are entries given up on after their permanent refusals
	// (then skipped or ending their tenure, as it decided); Skipped those
	// of them the tenure skipped.
	Refused int64 `json:"refused"`
	Skipped int64 `json:"skipped"`
	// HeldForTrust counts the times a session's entries waited because
	// their tenure's trust would end before a request's timeout.
	HeldForTrust int64 `json:"held_for_trust"`
	// BudgetStalls counts the Submits that waited for the worker's buffer
	// budget; BufferedBytes is what is buffered now.
	BudgetStalls  int64 `json:"budget_stalls"`
	BufferedBytes int64 `json:"buffered_bytes"`
}

type entry struct {
	rec       Record
	size      int
	group     string // Packer.PackGroup (packing only)
	ord       uint64 // submission order in its stream
	t         sink.Tenure
	enq       time.Time
	due       time.Time // when a request is due for it: enq + its wait (waitLocked)
	notBefore time.Time
	attempts  int
	permanent int  // permanent refusals so far
	alone     bool // sent in a request of its own (a whole request was refused permanently)
	// pinned is the pack the entry failed in: it is sent again as that
	// same wire record. unpacked: the entry goes out as its own record
	// (its pack could not be built within its bound).
	pinned   *pack
	unpacked bool
	acked    bool
	dropped  bool // never delivered: its tenure's acknowledgments end here
	skipped  bool // given up on, and its tenure chose to pass it

	// The entry's run of failures of one kind (failureKind): those that
	// counted (the destination took other records meanwhile), the whole
	// requests it failed in so, and the destination's acknowledged
	// records at its previous failure.
	kind              string
	repeats, sameRuns int
	recordsAtFail     int64
}

// stream is one session's entries.
type stream struct {
	id      string
	entries []*entry // not yet acknowledged (or dropped), in seq order
	queue   []*entry // to send, in seq order
	bytes   int      // sizes of entries
	// inflight counts the requests holding entries of this stream.
	inflight int
	dead     sink.Tenure // a tenure whose entries were dropped: Submit refuses it
	// cut is a tenure whose acknowledged prefix ended at a dropped entry:
	// its later entries are freed, never acknowledged.
	cut      sink.Tenure
	nextOrd  uint64
	inActive bool // st is in Batcher.active
	space    chan struct{}
	empty    chan struct{}
	flushing int
}

// Batcher is the group commit. It implements sink.Handler (Handle waits for
// the message's acknowledgment) and sink.Pipeline.
type Batcher struct {
	snd    Sender
	cfg    Config
	limits Limits
	log    zerolog.Logger
	// packer is snd when it packs (packLimit > 0), else nil.
	packer    Packer
	packLimit int
	// onePack: an ordered sink that packs takes one wire record of a
	// session per request (Packing).
	onePack bool

	kick chan struct{}

	mu       sync.Mutex
	streams  map[string]*stream
	active   []*stream // streams with queued entries (order = fairness)
	scratch  []*stream
	inflight int
	flushing int
	// queued and queuedBytes count the entries waiting in the queues;
	// with packing, groupBytes are their bytes per pack group and
	// queuedPacks the packs they would make (countGroupLocked).
	queued, queuedBytes int
	groupBytes          map[string]int
	queuedPacks         int
	// open is nextLocked's open pack per group (kept to reuse its map);
	// ready is packReadyLocked's bytes per group (likewise).
	open  map[string]*pack
	ready map[string]int
	// paces are the sessions' message spacing, for the pack wait
	// (waitLocked); swept of sessions quiet for paceForget at sweptAt.
	paces   map[string]pace
	sweptAt time.Time
	// buffered is the size of every entry not yet settled (BufferBudget);
	// budget is closed (and replaced) when it shrinks while Submits wait.
	buffered int64
	budget   chan struct{}

	requests, requestErrors, records, entryErrors, dropped atomic.Int64
	wireRecords, packs, packFallbacks                      atomic.Int64
	refused, skipped, heldForTrust, budgetStalls           atomic.Int64
}

// New returns a batcher on snd; zero MaxCount and MaxBytes take the sink's
// limits.
func New(snd Sender, cfg Config, log zerolog.Logger) (*Batcher, error) {
	l := snd.Limits()
	if err := cfg.Validate(l); err != nil {
		return nil, err
	}
	if cfg.MaxCount == 0 {
		cfg.MaxCount = l.MaxCount
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = l.MaxBytes
	}
	b := &Batcher{snd: snd, cfg: cfg, limits: l, log: log, kick: make(chan struct{}, 1), streams: map[string]*stream{}}
	b.packer, b.packLimit = packLimit(snd, cfg, l)
	b.onePack = b.packer != nil && snd.Ordered()
	if b.packer != nil {
		b.groupBytes, b.open = map[string]int{}, map[string]*pack{}
	}
	return b, nil
}

// Stats returns the cumulative counts.
func (b *Batcher) Stats() Stats {
	b.mu.Lock()
	buffered := b.buffered
	b.mu.Unlock()
	return Stats{
		Requests: b.requests.Load(), RequestErrors: b.requestErrors.Load(), Records: b.records.Load(),
		WireRecords: b.wireRecords.Load(), Packs: b.packs.Load(), PackFallbacks: b.packFallbacks.Load(),
		EntryErrors: b.entryErrors.Load(), DroppedInvalid: b.dropped.Load(),
		Refused: b.refused.Load(), Skipped: b.skipped.Load(), HeldForTrust: b.heldForTrust.Load(),
		BudgetStalls: b.budgetStalls.Load(), BufferedBytes: buffered,
	}
}

func (b *Batcher) wake() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// Submit queues m for t's session (sink.Pipeline).
func (b *Batcher) Submit(ctx context.Context, m sink.Message, t sink.Tenure, stop <-chan struct{}) error {
	rec, err := b.snd.Encode(m)
	if err != nil {
		return sink.Permanent(err)
	}
	size := b.snd.Size(rec)
	if size > b.limits.MaxRecordBytes {
		return sink.Permanent(fmt.Errorf("batch: %s seq %d: record of %d bytes exceeds the sink's %d", m.ConnectionID, m.Seq, size, b.limits.MaxRecordBytes))
	}
	stalled, budgetStalled := false, false
	b.mu.Lock()
	for {
		st := b.streamLocked(m.ConnectionID)
		if st.dead != nil && st.dead == t {
			b.mu.Unlock()
			return ErrTenureEndedError(m.ConnectionID)
		}
		var space chan struct{}
		switch {
		case st.bytes > 0 && st.bytes+size > b.cfg.SessionBufferBytes:
			if st.space == nil {
				st.space = make(chan struct{})
			}
			space = st.space
		case b.cfg.BufferBudget > 0 && b.buffered > 0 && b.buffered+int64(size) > b.cfg.BufferBudget:
			if !budgetStalled {
				budgetStalled = true
				b.budgetStalls.Add(1)
			}
			if b.budget == nil {
				b.budget = make(chan struct{})
			}
			space = b.budget
		}
		if space == nil {
			break
		}
		if !stalled {
			stalled = true
			t.Stalled()
		}
		b.mu.Unlock()
		select {
		case <-space:
		case <-stop:
			return ErrStopped
		case <-ctx.Done():
			return ctx.Err()
		}
		b.mu.Lock()
	}
	st := b.streamLocked(m.ConnectionID)
	now := time.Now()
	e := &entry{rec: rec, size: size, ord: st.nextOrd, t: t, enq: now, recordsAtFail: b.records.Load()}
	if b.packer != nil {
		e.group = b.packer.PackGroup(rec)
	}
	e.due = now.Add(b.waitLocked(e, now))
	if len(st.queue) > 0 && e.due.Before(st.queue[0].due) {
		st.queue[0].due = e.due // the session sped up: its head waits no longer than its newest
	}
	st.nextOrd++
	st.entries = append(st.entries, e)
	st.bytes += size
	b.buffered += int64(size)
	first := len(st.queue) == 0
	wasFull := b.fullLocked()
	b.activateLocked(st)
	st.queue = append(st.queue, e)
	b.countQueuedLocked(e, 1)
	// The dispatcher's timer covers the MaxDelay of the entries it saw; it
	// needs a wake-up for a session that had nothing queued (to arm it, or
	// to send at once when a request is due) and when a request fills.
	wake := first || (!wasFull && b.fullLocked()) || st.flushing > 0 || b.packFilledLocked(size)
	b.mu.Unlock()
	if wake {
		b.wake()
	}
	return nil
}

// ErrTenureEndedError wraps sink.ErrTenureEnded with the session.
func ErrTenureEndedError(id string) error {
	return fmt.Errorf("batch: %s: %w", id, sink.ErrTenureEnded)
}

func (b *Batcher) streamLocked(id string) *stream {
	st := b.streams[id]
	if st == nil {
		st = &stream{id: id}
		b.streams[id] = st
	}
	return st
}

// Handle queues m and waits until it is acknowledged (sink.Handler).
func (b *Batcher) Handle(ctx context.Context, m sink.Message) error {
	w := &waiter{done: make(chan struct{}), seq: m.Seq}
	w.deadline, _ = ctx.Deadline()
	if err := b.Submit(ctx, m, w, ctx.Done()); err != nil {
		return err
	}
	select {
	case <-w.done:
		if err := w.refused.Load(); err != nil {
			return sink.Permanent(*err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("batch: %s seq %d not acknowledged: %w", m.ConnectionID, m.Seq, ctx.Err())
	}
}

// waiter is the tenure of one Handle call: it may deliver until the call's
// deadline, and ends the call on a permanent refusal.
type waiter struct {
	seq      int64
	deadline time.Time // zero: none
	once     sync.Once
	done     chan struct{}
	refused  atomic.Pointer[error]
}

func (w *waiter) Remaining() time.Duration {
	if w.deadline.IsZero() {
		return math.MaxInt64
	}
	return time.Until(w.deadline)
}
func (w *waiter) Stalled() {}
func (w *waiter) Refused(_, _ int64, err error) bool {
	w.refused.Store(&err)
	w.once.Do(func() { close(w.done) })
	return false
}
func (w *waiter) Acked(seq int64) {
	if seq >= w.seq {
		w.once.Do(func() { close(w.done) })
	}
}

// FlushSession waits until every message queued for id is acknowledged,
// sending what is queued without waiting for MaxDelay (sink.Pipeline).
func (b *Batcher) FlushSession(ctx context.Context, id string) error {
	b.mu.Lock()
	st := b.streams[id]
	if st == nil || len(st.entries) == 0 { // nothing left (a stream kept only to refuse a dropped tenure)
		b.mu.Unlock()
		return nil
	}
	if st.empty == nil {
		st.empty = make(chan struct{})
	}
	empty := st.empty
	st.flushing++
	b.flushing++
	b.mu.Unlock()
	b.wake()
	defer func() {
		b.mu.Lock()
		st.flushing--
		b.flushing--
		b.mu.Unlock()
	}()
	select {
	case <-empty:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("batch: flush %s: %w", id, ctx.Err())
	}
}

// Flush waits until every message queued before the call is acknowledged
// (sink.Flusher).
func (b *Batcher) Flush(ctx context.Context) error {
	b.mu.Lock()
	ids := make([]string, 0, len(b.streams))
	for id := range b.streams {
		ids = append(ids, id)
	}
	b.mu.Unlock()
	for _, id := range ids {
		if err := b.FlushSession(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// Quiesce returns once no request is in flight and nothing queued may still
// be sent (every queued entry's tenure has no trust left), or with ctx's
// error. A worker that leaves sessions behind calls it before it tells the
// table it left, so that no request of theirs is in flight once others may
// take them.
func (b *Batcher) Quiesce(ctx context.Context) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		b.wake() // drops what may no longer be sent
		b.mu.Lock()
		idle := b.inflight == 0
		for _, st := range b.streams {
			for _, e := range st.queue {
				if e.t.Remaining() > 0 {
					idle = false
					break
				}
			}
		}
		b.mu.Unlock()
		if idle {
			return nil
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("batch: requests still in flight: %w", ctx.Err())
		}
	}
}

// request is one request's wire records and the deadline it runs under.
type request struct {
	packs    []*pack
	deadline time.Time
}

// Run dispatches batches until ctx ends, then waits for the requests in
// flight (cancelled with ctx) and returns. Messages still queued then are
// not acknowledged: their sessions' checkpoints stay before them.
func (b *Batcher) Run(ctx context.Context) {
	sendCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		b.mu.Lock()
		var reqs []request
		for b.inflight < b.cfg.MaxInFlight {
			batch := b.nextLocked(now)
			if batch == nil {
				break
			}
			b.inflight++
			// Every tenure in it had at least RequestTimeout of trust
			// left at now (nextLocked).
			reqs = append(reqs, request{packs: batch, deadline: now.Add(b.cfg.RequestTimeout)})
		}
		wait := b.nextWakeLocked(now)
		b.mu.Unlock()
		for _, r := range reqs {
			wg.Go(func() { b.send(sendCtx, r) })
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if wait > 0 {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return
		case <-b.kick:
		case <-timer.C:
		}
	}
}

// sendable reports whether st may add entries to a request now.
func (b *Batcher) sendable(st *stream, now time.Time) bool {
	return len(st.queue) > 0 && !st.queue[0].notBefore.After(now) && (!b.snd.Ordered() || st.inflight == 0)
}

// trustPoll is how often entries held for trust look again (a heartbeat may
// have extended it).
const trustPoll = 20 * time.Millisecond

// admitLocked decides whether st's head tenure may send now: false after it
// dropped the tenure (no trust left; look at st again) or held st back (too
// little trust left for a request's timeout).
func (b *Batcher) admitLocked(st *stream, now time.Time) (ok, dropped bool) {
	rem := st.queue[0].t.Remaining()
	switch {
	case rem <= 0:
		b.endTenureLocked(st, st.queue[0].t)
		return false, true
	case rem < b.cfg.RequestTimeout:
		b.heldForTrust.Add(1)
		st.queue[0].notBefore = now.Add(min(rem, trustPoll))
		return false, false
	}
	return true, false
}

// countQueuedLocked counts e into (sign 1) or out of (sign -1) the queued
// entries.
func (b *Batcher) countQueuedLocked(e *entry, sign int) {
	b.queued += sign
	b.queuedBytes += sign * e.size
	b.countGroupLocked(e, sign)
}

// fullLocked reports whether the queued entries fill a request: its bytes,
// or its count of wire records (with packing, of the packs they would
// make: queued messages of one group wait to share a pack).
func (b *Batcher) fullLocked() bool {
	if b.packer != nil {
		return b.queuedBytes >= b.cfg.MaxBytes || b.queuedPacks >= b.cfg.MaxCount
	}
	return b.queuedBytes >= b.cfg.MaxBytes || b.queued >= b.cfg.MaxCount
}

// nextLocked takes the next request's wire records when a request is due:
// full (fullLocked), its oldest entry waited MaxDelay, or a flush waits.
// Packing groups what is queued (it waits for nothing more): an entry joins
// the open pack of its group, which another session may have begun, else
// begins one. It visits only the streams it takes from (and those it
// skips), so that a request costs the same with 10 or 10,000 sessions
// queued.
func (b *Batcher) nextLocked(now time.Time) []*pack {
	if b.queued == 0 {
		return nil
	}
	if !b.fullLocked() && b.flushing == 0 {
		due := b.earliestDueLocked(now)
		if due.IsZero() || (now.Before(due) && !b.packReadyLocked(now)) {
			return nil
		}
	}
	var batch []*pack
	// skipped: the streams visited that keep queued entries; open: per
	// group, the pack its next entries may join.
	skipped, open := b.scratch[:0], b.open
	defer clear(open)
	bytes, i := 0, 0
	// Once the request holds MaxCount wire records, sessions may still
	// join its open packs.
	for i < len(b.active) && (len(batch) < b.cfg.MaxCount || len(open) > 0) && bytes < b.cfg.MaxBytes && !(len(batch) == 1 && batch[0].entries[0].alone) {
		st := b.active[i]
		if len(st.queue) == 0 {
			st.inActive = false
			i++
			continue
		}
		if !b.sendable(st, now) {
			skipped = append(skipped, st)
			i++
			continue
		}
		if ok, dropped := b.admitLocked(st, now); !ok {
			if !dropped {
				skipped = append(skipped, st)
				i++
			}
			continue // a drop: look at st again
		}
		took := 0
		var mine *pack // the wire record st's last entry taken went to
		for took < len(st.queue) {
			e := st.queue[took]
			if e.notBefore.After(now) || e.t != st.queue[0].t || (e.alone && len(batch) > 0) {
				break
			}
			if p := b.joinable(open[e.group], mine); p != nil {
				if grew, ok := b.growPackLocked(p, e, b.cfg.MaxBytes-bytes); ok {
					bytes += grew
					took++
					mine = p
					continue
				}
			}
			if len(batch) >= b.cfg.MaxCount || (took > 0 && b.onePack) {
				break
			}
			if e.pinned != nil {
				if p, ok := pinnedAt(st.queue[took:]); ok {
					if bytes+p.size > b.cfg.MaxBytes {
						break
					}
					p.at = len(batch)
					batch = append(batch, p)
					bytes += p.size
					took += len(p.entries)
					mine = p
					continue
				}
			}
			p := b.startPackLocked(e)
			if bytes+p.size > b.cfg.MaxBytes {
				break
			}
			p.at = len(batch)
			batch = append(batch, p)
			bytes += p.size
			took++
			mine = p
			if !p.plain {
				open[e.group] = p
			}
			if e.alone {
				break
			}
		}
		if took == 0 && len(batch) > 0 {
			break // st stays first for the next request
		}
		i++
		if took > 0 {
			for _, e := range st.queue[:took] {
				b.countQueuedLocked(e, -1)
			}
			st.queue = st.queue[took:]
			st.inflight++
		}
		if len(st.queue) == 0 {
			st.inActive = false
			continue
		}
		// What is left of st (it did not fit, or may not go in this
		// request: one wire record of a session on an ordered sink, another
		// tenure, a retry not yet due) waits behind the other sessions,
		// which the request goes on with while it has room.
		skipped = append(skipped, st)
	}
	// The streams visited go to the back: the next request starts with
	// another session.
	b.active = append(b.active[i:], skipped...)
	clear(skipped)
	b.scratch = skipped[:0]
	return batch
}

// earliestDueLocked is the earliest due time of the entries that may be
// sent now (zero: none).
func (b *Batcher) earliestDueLocked(now time.Time) time.Time {
	var due time.Time
	for _, st := range b.active {
		if b.sendable(st, now) && (due.IsZero() || st.queue[0].due.Before(due)) {
			due = st.queue[0].due
		}
	}
	return due
}

// activateLocked puts st among the streams with entries to send.
func (b *Batcher) activateLocked(st *stream) {
	if !st.inActive {
		st.inActive = true
		b.active = append(b.active, st)
	}
}

// endTenureLocked drops st's queued entries of tenure t, which may deliver
// nothing more. Submit refuses t from then on, and its acknowledgments end
// before its first dropped entry (settleLocked), so no later message of it
// is acknowledged past one the destination does not have.
func (b *Batcher) endTenureLocked(st *stream, t sink.Tenure) {
	st.dead = t
	kept := st.queue[:0]
	for _, e := range st.queue {
		if e.t == t {
			e.dropped = true
			b.dropped.Add(1)
			b.countQueuedLocked(e, -1)
			continue
		}
		kept = append(kept, e)
	}
	clear(st.queue[len(kept):])
	st.queue = kept
	b.settleLocked(st)
}

// nextWakeLocked is how long until a request may be due (0: nothing to
// wait for but a wake-up: nothing queued, or every request slot busy, whose
// completion wakes the dispatcher).
func (b *Batcher) nextWakeLocked(now time.Time) time.Duration {
	if b.inflight >= b.cfg.MaxInFlight {
		return 0
	}
	var next time.Time
	for _, st := range b.active {
		if len(st.queue) == 0 || (b.snd.Ordered() && st.inflight > 0) {
			continue
		}
		e := st.queue[0]
		at := e.due
		if e.notBefore.After(at) {
			at = e.notBefore
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	if next.IsZero() {
		return 0
	}
	return max(next.Sub(now), time.Millisecond)
}

// send runs one request under its deadline and applies its outcome to
// every message of its wire records.
func (b *Batcher) send(ctx context.Context, r request) {
	packs, withheld, unfit := b.buildWire(r.packs)
	var failed []error
	var err error
	entries := 0
	for _, p := range packs {
		entries += len(p.entries)
	}
	if len(packs) > 0 {
		recs := make([]Record, len(packs))
		for i, p := range packs {
			recs[i] = *p.wire
		}
		ctx, cancel := context.WithDeadline(ctx, r.deadline)
		failed, err = b.snd.Send(ctx, recs)
		cancel()
		b.requests.Add(1)
		if err != nil {
			b.requestErrors.Add(1)
			if b.requestErrors.Load()%100 == 1 {
				b.log.Warn().Err(err).Int("entries", entries).Msg("sink request failed: retrying its entries")
			}
		}
	}
	now := time.Now()
	b.mu.Lock()
	touched := map[*stream]struct{}{}
	touch := func(e *entry) *stream {
		st := b.streams[e.rec.ConnectionID]
		if _, ok := touched[st]; !ok {
			touched[st] = struct{}{}
			st.inflight--
		}
		return st
	}
	for _, p := range unfit {
		for _, e := range p.entries {
			e.pinned, e.unpacked = nil, true
		}
	}
	for _, p := range withheld { // never sent: queued again as they were
		for _, e := range p.entries {
			b.requeueLocked(touch(e), e)
		}
	}
	var firstErr error
	// accepted: the destination took records of this request (then an
	// entry it failed was failed for itself).
	accepted := err == nil && len(failed) == 0
	if err == nil && failed != nil {
		for _, f := range failed {
			accepted = accepted || f == nil
		}
	}
	for i, p := range packs {
		var perr error
		if err != nil {
			perr = err
		} else if failed != nil {
			perr = failed[i]
		}
		if perr == nil {
			b.wireRecords.Add(1)
		}
		// shared: the failure names several messages, none of them in
		// particular (a whole request, or a pack).
		shared := (err != nil && entries > 1) || (err == nil && len(p.entries) > 1)
		for _, e := range p.entries {
			st := touch(e)
			if perr == nil {
				e.acked = true
				b.records.Add(1)
				continue
			}
			if err == nil {
				b.entryErrors.Add(1)
				if firstErr == nil {
					firstErr = perr
				}
			}
			if rerr := b.repeatedLocked(e, perr, accepted, shared); rerr != nil {
				b.giveUpLocked(st, e, rerr)
				continue
			}
			switch {
			case err == nil && sink.IsFinal(perr):
				// The destination applied the wire record, altered: every
				// message in it was written, so none is ever sent again
				// (a pack's: which one was altered is unknown); each
				// message's tenure decides (Tenure.Refused).
				b.giveUpLocked(st, e, perr)
				continue
			case shared && sink.IsPermanent(perr):
				e.alone = true // which message the destination refused is unknown
			case sink.IsPermanent(perr):
				e.permanent++
				if e.permanent >= b.cfg.PermanentAttempts || sink.IsFinal(perr) {
					b.giveUpLocked(st, e, perr)
					continue
				}
			}
			e.notBefore = now.Add(b.cfg.Retry.Next(e.attempts, nil))
			e.attempts++
			b.requeueLocked(st, e)
		}
		if perr != nil && !p.plain && len(p.sessions()) == 1 {
			b.pinLocked(p)
		}
	}
	for st := range touched {
		b.settleLocked(st)
	}
	b.inflight--
	b.mu.Unlock()
	if firstErr != nil && b.entryErrors.Load()%100 == 1 {
		b.log.Warn().Err(firstErr).Msg("sink refused entries of a request: retrying them")
	}
	b.wake()
}

// buildWire builds the wire record of every pack of a request. A pack that
// cannot be built within its bound (unfit) is withheld with every later
// pack of each of its sessions (they must not pass it), and so on for the
// sessions of those: its entries go out as plain records, the withheld
// ones as they are queued again.
func (b *Batcher) buildWire(all []*pack) (packs, withheld, unfit []*pack) {
	var stopped map[string]bool
	stop := func(p *pack) {
		if stopped == nil {
			stopped = map[string]bool{}
		}
		for _, id := range p.sessions() {
			stopped[id] = true
		}
		withheld = append(withheld, p)
	}
	for _, p := range all {
		if stopped != nil && slices.ContainsFunc(p.sessions(), func(id string) bool { return stopped[id] }) {
			stop(p)
			continue
		}
		r, err := b.wireRecord(p)
		if err != nil {
			b.packFallbacks.Add(1)
			b.log.Warn().Err(err).Strs("connection_ids", p.sessions()).Int("messages", len(p.entries)).Msg("pack over its bound: sending its messages as plain records")
			unfit = append(unfit, p)
			stop(p)
			continue
		}
		if !p.plain && len(p.entries) > 1 {
			b.packs.Add(1)
		}
		p.wire = &r
		packs = append(packs, p)
	}
	return packs, withheld, unfit
}

// pinLocked keeps the entries of a pack of one session that failed
// together, so that its retry is a copy of the same wire record (a
// destination that deduplicates sees the same record), unless any of them
// is now sent alone or settled: then none is pinned and they go out as
// plain records.
func (b *Batcher) pinLocked(p *pack) {
	keep := true
	for _, e := range p.entries {
		keep = keep && !e.alone && !e.acked && !e.dropped && !e.skipped
	}
	var at time.Time
	for _, e := range p.entries {
		if !keep {
			e.pinned, e.alone = nil, e.alone || len(p.entries) > 1 && !e.acked && !e.dropped && !e.skipped
			continue
		}
		e.pinned = p
		if e.notBefore.After(at) {
			at = e.notBefore
		}
	}
	if keep {
		for _, e := range p.entries {
			e.notBefore = at // the pack is sent again once, whole
		}
	}
}

// RepeatedError: an entry failed the same way Config.RepeatFailures times
// while the destination took other records. It is a refusal of the entry
// (sink.IsPermanent): its tenure decides (Tenure.Refused).
type RepeatedError struct {
	Failures int
	Err      error // the last failure
}

func (e *RepeatedError) Error() string {
	return fmt.Sprintf("refused: failed the same way %d times while the destination took other records: %v", e.Failures, e.Err)
}
func (e *RepeatedError) Unwrap() error   { return e.Err }
func (e *RepeatedError) Permanent() bool { return true }

// failureKind is what makes two failures "the same way": the error code
// when the error names one (an API error, a rejected entry), else its text.
func failureKind(err error) string {
	var coded interface{ ErrorCode() string }
	if errors.As(err, &coded) {
		return coded.ErrorCode()
	}
	return err.Error()
}

// repeatedLocked counts e's failure eerr and returns a RepeatedError once
// e failed the same way Config.RepeatFailures times, each while the
// destination took other records: in this request (accepted) or since its
// previous failure. Throttling and timeouts never count. whole: a request
// of several entries failed as a whole, which names none of them: a
// second such failure of one kind with others getting through sends e
// alone from then on, and only its failures alone count.
func (b *Batcher) repeatedLocked(e *entry, eerr error, accepted, whole bool) error {
	records := b.records.Load()
	progress := accepted || records > e.recordsAtFail
	e.recordsAtFail = records
	if sink.IsThrottled(eerr) || errors.Is(eerr, context.DeadlineExceeded) || errors.Is(eerr, context.Canceled) {
		e.kind, e.repeats, e.sameRuns = "", 0, 0
		return nil
	}
	if kind := failureKind(eerr); kind != e.kind {
		e.kind, e.repeats, e.sameRuns = kind, 0, 0
	}
	if !progress {
		return nil // every request may be failing: an outage, not this entry
	}
	if whole {
		if e.sameRuns++; e.sameRuns >= 2 {
			e.alone = true
		}
		return nil
	}
	if e.repeats++; e.repeats < b.cfg.RepeatFailures {
		return nil
	}
	return &RepeatedError{Failures: e.repeats, Err: eerr}
}

// giveUpLocked ends e after its permanent refusals: its tenure skips it
// (the later entries may be acknowledged past it) or ends with it.
func (b *Batcher) giveUpLocked(st *stream, e *entry, err error) {
	b.refused.Add(1)
	if st.cut != e.t && st.dead != e.t && e.t.Refused(e.rec.Seq, e.rec.Sub, err) {
		e.skipped = true
		b.skipped.Add(1)
		return
	}
	e.dropped = true
	if st.dead != e.t {
		b.endTenureLocked(st, e.t)
	}
}

// requeueLocked puts a failed entry back in st's queue, in submission order
// (which keeps the (seq, sub) order of the messages that share a seq).
func (b *Batcher) requeueLocked(st *stream, e *entry) {
	b.activateLocked(st)
	i, _ := slices.BinarySearchFunc(st.queue, e.ord, func(x *entry, ord uint64) int {
		switch {
		case x.ord < ord:
			return -1
		case x.ord > ord:
			return 1
		}
		return 0
	})
	st.queue = slices.Insert(st.queue, i, e)
	b.countQueuedLocked(e, 1)
}

// settleLocked acknowledges st's leading acknowledged entries to their
// tenures, frees their bytes, and forgets st once it holds nothing. A
// dropped entry ends its tenure's acknowledged prefix: the tenure's later
// entries are freed when they settle, never acknowledged.
func (b *Batcher) settleLocked(st *stream) {
	n, freed := 0, 0
	for n < len(st.entries) {
		e := st.entries[n]
		if !e.acked && !e.dropped && !e.skipped {
			break
		}
		switch {
		case e.dropped:
			st.cut = e.t
		case (e.acked || e.skipped) && e.t != st.cut:
			// A skipped entry passes like an acknowledged one: the
			// session chose to go on without it.
			e.t.Acked(e.rec.Seq)
		}
		freed += e.size
		n++
	}
	if n == 0 {
		return
	}
	clear(st.entries[:n])
	st.entries = st.entries[n:]
	st.bytes -= freed
	b.buffered -= int64(freed)
	if st.space != nil {
		close(st.space)
		st.space = nil
	}
	if b.budget != nil {
		close(b.budget)
		b.budget = nil
	}
	if len(st.entries) == 0 {
		if st.empty != nil {
			close(st.empty)
			st.empty = nil
		}
		if st.dead == nil && st.inflight == 0 && len(st.queue) == 0 {
			delete(b.streams, st.id)
		}
	}
}

var (
	_ sink.Pipeline = (*Batcher)(nil)
	_ sink.Flusher  = (*Batcher)(nil)
	_ sink.Handler  = (*Batcher)(nil)
)
