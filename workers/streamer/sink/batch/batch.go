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
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

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

func (b *Batcher) wake() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

var (
	_ sink.Pipeline = (*Batcher)(nil)
	_ sink.Flusher  = (*Batcher)(nil)
	_ sink.Handler  = (*Batcher)(nil)
)
