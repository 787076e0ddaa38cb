// Package lease owns wsfleet's ownership protocol (epoch-based, after
// CockroachDB's epoch-based range leases): the session item and the worker
// record as the protocol sees them, the Store a table must provide, the pure
// rules that decide and classify every transition (register, heartbeat,
// declare dead, leave; acquire, checkpoint, release, fail), and the Keeper
// that keeps one worker alive (one heartbeat per worker, not a renewal per
// session), fences all of its sessions at once when it cannot heartbeat,
// checkpoints them, and watches other workers to declare the dead ones. It
// does no I/O of its own and reads time only from an injected clock.Clock.
// It also owns the hot standby's assignment (assign, drop, promote): a
// second, non-delivering connection another worker holds for a session,
// fenced by its own per-session standby epoch and the preferred receiver of
// a takeover; only an acquire ever makes a worker deliver.
package lease

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// NoSeq is the LastSeq of a session that has no checkpoint yet.
const NoSeq int64 = -1

// Item is a session item as stored, with its checkpoint. Only ingest writes
// the desired fields; only owners write the lease fields, the checkpoint and
// the failure fields (FailedGeneration, LastError), which a start clears;
// the one exception is Disown, a reconciler's removal of the owner of a
// stopped session whose owner ended without releasing it.
type Item struct {
	ConnectionID string
	DesiredState string
	// Spec is the session's desired configuration in its stored form
	// (shared/spec: where to dial, with what headers and source protocol).
	// The ownership protocol carries it and never reads it.
	Spec string
	// CheckpointEvery is the session's own checkpoint interval (0: the
	// worker's default), the spec's checkpoint_every as the protocol reads it.
	CheckpointEvery time.Duration
	Generation      int64

	Owner string // "" = no owner (new, released, failed)
	// HandoffTo is the worker a rebalancing owner released the session to
	// (HandoffAtMs: when, on its wall clock); "" when none. Until someone
	// takes it, only that worker may, or a worker that saw it not alive or
	// the hand-off older than Config.HandoffBound.
	HandoffTo   string
	HandoffAtMs int64
	Epoch       int64 // per-session fencing token: +1 on every acquire
	// LastSeq is where delivery resumes: ResumeSeq of the checkpoint item's
	// last_seq and ReleaseSeq; NoSeq when neither is set.
	LastSeq int64
	// ReleaseSeq is the final checkpoint the last release (or fail) wrote
	// on the session item itself, so that ending a tenure is one write;
	// NoSeq when none did.
	ReleaseSeq  int64
	UpdatedAtMs int64

	// FailedGeneration is the generation at which a holder gave up on the
	// source (Fail); nil when none did. The session is FAILED while it
	// equals Generation and the session is STARTED.
	FailedGeneration *int64
	LastError        string // the last connection error a holder recorded
	LastErrorAtMs    int64
	// LastErrorGen and LastErrorEpoch are the generation and the tenure
	// (lease epoch) LastError was seen in; 0 on an item written before they
	// were recorded.
	LastErrorGen   int64
	LastErrorEpoch int64

	// Standby is the worker holding the session's hot standby (a second,
	// non-delivering connection), "" when none; StandbyEpoch its fencing
	// token (+1 on every assignment, never reset). Only the standby's
	// worker writes them (AssignStandby, DropStandby), and an acquire by
	// that worker (its promotion), or a takeover by a worker that saw it
	// gone, removes Standby.
	Standby      string
	StandbyEpoch int64
	// StandbyRefusedGen is the generation at which the source refused a
	// second connection (0: none): no standby is assigned while the
	// session is at it. StandbyError says why the last standby was
	// dropped ("" after an assignment).
	StandbyRefusedGen int64
	StandbyError      string
	// TenureKey is the current tenure's key: TenureKeyOf a secret only its
	// owner holds, written by its acquire (From.Key; "": none). A given
	// tenure (From.Given) is taken only with the secret, so nobody but the
	// owner can give it.
	TenureKey string
}

// Failed reports whether the session is FAILED: STARTED, and a holder gave up
// on its source at the current generation. Only a new start (a new
// generation) or a stop ends it.
func (it Item) Failed() bool {
	return it.DesiredState == schema.StateStarted && it.FailedGeneration != nil && *it.FailedGeneration == it.Generation
}

// Token identifies one tenure of a session: every side-effect write is
// conditional on its owner and epoch.
type Token struct {
	ConnectionID string
	Owner        string
	Epoch        int64
}

func (t Token) String() string { return fmt.Sprintf("%s@%d(%s)", t.ConnectionID, t.Epoch, t.Owner) }

// Owned is a by_owner index entry: a session some worker owns, with what a
// takeover's conditional acquire and an owner's audit need.
type Owned struct {
	Token
	DesiredState string
	Generation   int64
}

// From says what an acquire may take over besides an unowned session (or
// one already the acquirer's): Prev, the tenure of a worker the acquirer saw
// not alive; Bypass, a worker a directed hand-off named that the acquirer
// saw not alive or not taking it within the bound; Standby, the acquirer's
// own standby of the session (the acquire is its promotion, and succeeds
// only while the standby is still that assignment); StandbyGone, the
// session's standby worker, which the acquirer saw not alive (a takeover
// need not leave the session to it). Spec is the stored configuration the
// acquirer already has (its standby dialed with it): a store that keeps a
// session's configuration in an item of its own need not read it when the
// session's is the same (the same content); the item returned carries the
// session's configuration either way. Given, the tenure its owner ended
// and handed to the acquirer (a directed hand-off without a release).
type From struct {
	Prev        *Token
	Bypass      string
	Standby     *StandbyToken
	StandbyGone string
	Spec        string
	Given       *Given
	// Key is the acquiring tenure's key (TenureKeyOf its secret), stored
	// as the session's TenureKey ("": none stored).
	Key string
}

// Given is a tenure its owner ended and handed to one worker directly (a
// directed hand-off: a shutdown's or a rebalancing move's) instead of
// releasing it: the owner stopped acting for the session (connection
// closed, sink flushed) before it told the receiver, so the receiver's
// acquire may take the session from that tenure while its owner is alive,
// as a takeover takes a dead worker's. Seq is the owner's final
// checkpoint (NoSeq: none), which the acquire records as the session's
// release_seq, as a release would have (never below one stored). Only the
// owner's word makes a Given: Secret is the tenure's secret, which only its
// owner holds (the session's TenureKey is its hash), so a peer's bug or
// anyone reaching a worker's admin port cannot give a live tenure away.
type Given struct {
	Token  Token
	Seq    int64
	Secret string
}

// TenureKeyOf is the key stored for a tenure whose owner holds secret: the
// first 16 bytes of its SHA-256, in hex ("" for no secret).
func TenureKeyOf(secret string) string {
	if secret == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:16])
}

// StandbyToken identifies one assignment of a session's standby: its
// worker and the standby epoch the assignment wrote. A drop and a
// promotion are conditional on it.
type StandbyToken struct {
	ConnectionID string
	Worker       string
	Epoch        int64
}

func (t StandbyToken) String() string {
	return fmt.Sprintf("%s@s%d(%s)", t.ConnectionID, t.Epoch, t.Worker)
}

// Candidate is a session the reconciler may try to acquire: without owner
// (Prev nil), or owned by a worker seen not alive (Prev its tenure).
type Candidate struct {
	ConnectionID string
	Prev         *Token
	// Fresh: an unowned one (Prev nil) that this Keeper's listings have
	// shown unowned for less than Config.UnownedGrace: left to the work
	// queue's fast path (MayClaim says no).
	Fresh bool
	// Relisted: an unowned one (Prev nil) that an earlier listing of this
	// Keeper showed unowned, and past UnownedGrace, too (MayClaimUnowned).
	Relisted bool
}

// WorkerRecord is a worker's liveness record.
type WorkerRecord struct {
	ID            string
	State         string // schema.WorkerAlive | WorkerDead | WorkerLeft
	Epoch         int64  // liveness epoch; death increments it
	HeartbeatSeq  int64  // counter: every heartbeat attempt writes a new, larger value
	HeartbeatAtMs int64  // wall clock of the last heartbeat's send (informational)
	TTL           time.Duration
	Load          int
	Capacity      int
	AdminAddr     string
	Draining      bool     // shutting down: takes nothing, counts for no share
	MovesPerMin   int      // sessions it handed off to rebalance, over the last minute
	Mailbox       []string // connection ids to re-read (stop, new generation)
	List          string   // schema.WorkerList*
	StartedAtMs   int64
	EndedAtMs     int64
	DeclaredBy    string
	Host          string // where the worker runs (informational)
	Pid           int
	// BootID is drawn once per worker process (Keeper): a Register that
	// finds a record with its own boot id is its own earlier attempt, one
	// with another boot id a second process with the same worker id.
	BootID string
	// Zone is the availability zone the worker runs in ("" unknown): a
	// session's standby is placed in another zone than its owner's.
	Zone string
}

// Alive reports whether the record says ALIVE.
func (r WorkerRecord) Alive() bool { return r.State == schema.WorkerAlive }

// Heartbeat is what one heartbeat writes.
type Heartbeat struct {
	Seq         int64 // larger than any earlier attempt's
	AtMs        int64 // wall clock at send
	Load        int
	Capacity    int
	AdminAddr   string
	Draining    bool
	MovesPerMin int
	Ack         []string // mailbox entries handled since the last successful heartbeat
}

// Errors. Stores return them (wrapped) after classifying a failed condition;
// the Keeper returns ErrUntrusted and ErrReleased of its own.
var (
	ErrNotFound   = errors.New("session not found")
	ErrStopped    = errors.New("session not started")
	ErrHeld       = errors.New("session owned by another worker")
	ErrLeaseLost  = errors.New("lease lost to a newer epoch or another owner")
	ErrSeqRegress = errors.New("checkpoint behind the stored last_seq")
	ErrUntrusted  = errors.New("lease untrusted: no heartbeat before the safety deadline")
	ErrReleased   = errors.New("lease released")
	// ErrFailed: the session is FAILED (its source can never be connected)
	// until a new start; nobody may acquire it.
	ErrFailed = errors.New("session failed: waiting for a new start")
	// ErrNewGeneration: Fail named a generation the session no longer has
	// (a start changed its configuration since the failing dial).
	ErrNewGeneration = errors.New("session has a newer generation")

	// ErrWorkerDead: the worker record is not ALIVE at the epoch the
	// writer holds (declared DEAD, or LEFT): it may never write again.
	ErrWorkerDead = errors.New("worker not alive: declared dead or left")
	// ErrWorkerNotFound: no such worker record (never registered, or its
	// DEAD/LEFT record expired).
	ErrWorkerNotFound = errors.New("worker record not found")
	// ErrWorkerExists: Register found a record with the id.
	ErrWorkerExists = errors.New("worker record exists")
	// ErrWorkerAlive: DeclareDead found the worker's heartbeat counter (or
	// epoch) moved: it is alive.
	ErrWorkerAlive = errors.New("worker heartbeat moved: alive")
	// ErrThrottled: the store refused the request for its throughput (a
	// partition, an index or the table over its capacity, or the client's
	// own retry budget spent). Nothing was written; slow down.
	ErrThrottled = errors.New("store throttled the request")

	// ErrStandbyHeld: another worker holds the session's standby (see
	// StandbyHeldError).
	ErrStandbyHeld = errors.New("session standby held by another worker")
	// ErrStandbyLost: the standby token is no longer the session's
	// standby (dropped, replaced, promoted, or taken over from): a drop
	// of it is done, a promotion with it is an ordinary acquire.
	ErrStandbyLost = errors.New("standby lost to a newer assignment or an acquire")
	// ErrStandbyRefused: the source refused a second connection at the
	// session's current generation (standby_refused_gen): no standby
	// until a new generation.
	ErrStandbyRefused = errors.New("standby refused by the source at this generation")
	// ErrNoOwner: a standby needs an owner to stand by for.
	ErrNoOwner = errors.New("session has no owner to stand by for")
	// ErrOwnStandby: the worker asking to stand by owns the session.
	ErrOwnStandby = errors.New("the session's owner cannot be its standby")
)

// StandbyHeldError is ErrStandbyHeld naming the current standby: an
// assignment may replace it (AssignStandby's prev), and a takeover bypass
// it (From.StandbyGone), once its worker is seen not alive; while it is
// alive, its worker is the takeover's preferred receiver.
type StandbyHeldError struct{ Standby StandbyToken }

func (e *StandbyHeldError) Error() string {
	return fmt.Sprintf("%s: %s", ErrStandbyHeld, e.Standby)
}

// Is makes errors.Is(err, ErrStandbyHeld) true.
func (e *StandbyHeldError) Is(target error) bool { return target == ErrStandbyHeld }

// ReservedError: a directed hand-off reserved the session for worker To
// (at AtMs on the releasing worker's wall clock).
type ReservedError struct {
	To   string
	AtMs int64
}

func (e *ReservedError) Error() string { return fmt.Sprintf("%s: reserved for %s", ErrHeld, e.To) }

// Unwrap makes errors.Is(err, ErrHeld) true: someone else is to take it.
func (e *ReservedError) Unwrap() error { return ErrHeld }

// HeldError is ErrHeld with the current tenure, so that an acquirer that
// finds the owner not alive may take the session from it.
type HeldError struct{ Current Token }

func (e *HeldError) Error() string { return fmt.Sprintf("%s: %s", ErrHeld, e.Current) }

// Unwrap makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Unwrap() error { return ErrHeld }

// Definitive reports whether err says a tenure is over (as opposed to a
// transient failure such as a timeout or throttling).
func Definitive(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrStopped) || errors.Is(err, ErrLeaseLost) ||
		errors.Is(err, ErrSeqRegress) || errors.Is(err, ErrHeld) || errors.Is(err, ErrFailed) ||
		errors.Is(err, ErrWorkerDead) || errors.Is(err, ErrWorkerNotFound) ||
		errors.Is(err, ErrStandbyHeld) || errors.Is(err, ErrStandbyLost) ||
		errors.Is(err, ErrStandbyRefused) || errors.Is(err, ErrNoOwner) || errors.Is(err, ErrOwnStandby)
}

// IsTransient reports whether err from a store call may succeed if retried.
func IsTransient(err error) bool {
	return err != nil && !Definitive(err) && !errors.Is(err, ErrUntrusted)
}

// LivenessStore is what the Keeper needs for worker records. Every write is
// one conditional write on one record.
type LivenessStore interface {
	// Register creates rec (ALIVE, its epoch, w_list ALIVE) if no record has
	// its id (else ErrWorkerExists).
	Register(ctx context.Context, rec WorkerRecord) error
	// Heartbeat writes hb on worker id's record while it is ALIVE at epoch
	// (else ErrWorkerDead, or ErrWorkerNotFound) and its counter is below
	// hb.Seq, removes hb.Ack from the mailbox, and returns the record as
	// written. A retry after an ambiguous attempt carries a new Seq, so it
	// succeeds whether or not the first attempt was applied.
	Heartbeat(ctx context.Context, id string, epoch int64, hb Heartbeat) (WorkerRecord, error)
	// DeclareDead sets worker id DEAD (epoch + 1, w_list GONE, ended and
	// expiring) while it is ALIVE at epoch with heartbeat counter seenSeq:
	// ErrWorkerAlive when the counter or epoch moved, ErrWorkerDead when it
	// is already not alive (dead or left), ErrWorkerNotFound.
	DeclareDead(ctx context.Context, id string, epoch, seenSeq int64, by string, atMs int64) error
	// Leave sets worker id LEFT (w_list list: GONE when it may still own
	// sessions, DONE when not) while it is ALIVE at epoch.
	Leave(ctx context.Context, id string, epoch int64, list string, atMs int64) error
	// GetWorker reads a record consistently.
	GetWorker(ctx context.Context, id string) (WorkerRecord, error)
	// ListWorkers lists the ids in one w_list partition (ALIVE, GONE, DONE).
	ListWorkers(ctx context.Context, list string, limit int) ([]string, error)
	// GetWorkers reads the records of ids (eventually consistent; missing
	// ones are left out): the fleet's load for rebalancing.
	GetWorkers(ctx context.Context, ids []string) ([]WorkerRecord, error)
	// MarkDone moves a GONE record (not ALIVE) to DONE: it owns no session
	// (the caller decides, MayMarkDone). A record already DONE stays so
	// (nil); an ALIVE one fails with ErrWorkerAlive, a missing one with
	// ErrWorkerNotFound.
	MarkDone(ctx context.Context, id string) error
}

// SessionStore is what the Keeper needs for sessions.
type SessionStore interface {
	// Acquire makes owner the owner of session id (epoch + 1) when it is
	// STARTED and not FAILED and has no owner, is already owner's, or is
	// still from.Prev's tenure (a worker the caller saw not alive), and is
	// not reserved by a directed hand-off for another worker than owner or
	// from.Bypass; then it clears the reservation, fences the checkpoint
	// item at the new epoch and returns the item with the checkpointed
	// LastSeq. A session owned by someone else fails with a *HeldError
	// naming the current tenure, a reserved one with a *ReservedError.
	//
	// The standby (AcquireDropsStandby): an acquire by the session's
	// standby worker removes standby (its promotion; with from.Standby,
	// only while the standby is still that assignment, else
	// ErrStandbyLost); a takeover (the session owned by another worker) of
	// a session whose standby is another worker than the acquirer and
	// from.StandbyGone fails with a *StandbyHeldError (the standby is the
	// preferred receiver), and with from.StandbyGone naming it removes it.
	// An acquire of an unowned session (a hand-off's included) keeps
	// another worker's standby: it stands by for the new owner.
	Acquire(ctx context.Context, id, owner string, from From) (Item, error)
	// Checkpoint moves last_seq forward while t holds the checkpoint item.
	Checkpoint(ctx context.Context, t Token, lastSeq int64) error
	// Release removes t's ownership and records its final checkpoint
	// lastSeq as the session's release_seq, in one write of the session
	// item (refused with ErrSeqRegress below a release_seq already
	// stored); the session, if still STARTED, is unowned again: anyone may
	// acquire it.
	Release(ctx context.Context, t Token, lastSeq int64) error
	// Handoff is a Release that reserves the session for worker to (a
	// rebalancing move), noting atMs: see Acquire.
	Handoff(ctx context.Context, t Token, lastSeq int64, to string, atMs int64) error
	// AssignStandby makes worker the standby of session id (standby =
	// worker, standby_epoch + 1, standby_error removed) in one conditional
	// write of the session item, written by that worker, while the
	// session is STARTED, not FAILED, at generation gen, owned by another
	// worker, and not refused a standby at gen (standby_refused_gen); and
	// it has no standby, or worker's (a re-assignment: a new epoch), or
	// prev's (a standby the caller replaces: seen not alive, or dropped).
	// It returns the item as written: its Spec and LastSeq are not read
	// (Spec ""; LastSeq the release_seq; Get reads both). Refusals:
	// *StandbyHeldError (another standby), ErrNewGeneration, ErrStopped,
	// ErrFailed, ErrNoOwner, ErrOwnStandby, ErrStandbyRefused,
	// ErrNotFound. Billed as one write of the item (1 KB units); standby
	// is no index key, so no index entry moves. A retry after an attempt
	// that applied is a re-assignment: the epoch returned is the last.
	AssignStandby(ctx context.Context, id, worker string, gen int64, prev *StandbyToken) (Item, error)
	// DropStandby removes t's standby while (standby, standby_epoch) is
	// still t; refusedGen > 0 also records standby_refused_gen (the source
	// refused the second connection at that generation), reason != ""
	// standby_error (cut to MaxStandbyError bytes); atMs is when, kept for
	// the caller's logs (no attribute holds it). A standby that is no
	// longer t (dropped already, replaced, promoted) is ErrStandbyLost,
	// which callers treat as done. One write of the session item, as
	// AssignStandby.
	DropStandby(ctx context.Context, t StandbyToken, refusedGen int64, reason string, atMs int64) error
	// Fail records that t's holder gave up on the source as configured at
	// generation gen, while t owns it and the item's generation is still
	// gen (else ErrNewGeneration): in one write, release_seq = lastSeq (as
	// Release), failed_generation = gen, last_error = reason at atMs (with
	// gen and t's epoch as NoteError records them), no
	// owner. The
	// session is then FAILED: nobody acquires it until a new start.
	Fail(ctx context.Context, t Token, gen, lastSeq int64, reason string, atMs int64) error
	// Disown removes t's owner from a session that is not STARTED (stopped)
	// while it is still t's tenure, and changes nothing else: the epoch
	// stays (the next acquire goes above it), no unowned_shard (a STOPPED
	// session is in no by_unowned), the checkpoint as it is. It is written
	// only by a worker that saw t.Owner not alive (DEAD or LEFT, so it has
	// stopped acting: the same proof a takeover's Acquire from Prev rests
	// on), for a stopped session the owner did not release before it
	// ended. A session already without owner at t's epoch is done (nil);
	// one started since fails with a *HeldError naming t (take it over
	// instead); a newer tenure with ErrLeaseLost.
	Disown(ctx context.Context, t Token) error
	// NoteError records last_error = reason at atMs, seen while dialing
	// the session as configured at generation gen, with gen and t's epoch
	// beside it, while t owns the session.
	NoteError(ctx context.Context, t Token, gen int64, reason string, atMs int64) error
	// Get reads a session and its checkpoint consistently.
	Get(ctx context.Context, id string) (Item, error)
	// Unowned lists STARTED sessions without owner, up to limit.
	Unowned(ctx context.Context, limit int) ([]string, error)
	// OwnedBy lists the sessions worker owner owns, up to limit (0: all).
	// It reads an index: on DynamoDB eventually consistent, so a recent
	// acquire or release may be missing from it (see Config.IndexLagBound).
	OwnedBy(ctx context.Context, owner string, limit int) ([]Owned, error)
}

// Store is a lease table. Implementations: dynamostore, memstore.
type Store interface {
	LivenessStore
	SessionStore
}

// Config holds the ownership timings of one worker.
type Config struct {
	Owner string
	// Host and Pid say where the worker runs (its registration writes them
	// into its record, for people finding the process: wsfleet workers);
	// nothing in the protocol reads them.
	Host string
	Pid  int
	// Zone is the availability zone the worker runs in ("": unknown); its
	// registration writes it (WorkerRecord.Zone) for standby placement.
	Zone string
	// BootID identifies this process's registration ("": NewKeeper draws
	// one). Two processes never share one.
	BootID string
	// TTL is the liveness TTL: how long a successful heartbeat keeps the
	// worker alive in others' eyes. Observers wait at least the larger of
	// their own TTL and the one in the worker's record.
	TTL time.Duration
	// HeartbeatEvery is the heartbeat period.
	HeartbeatEvery time.Duration
	// SafetyMargin: the worker stops trusting its sessions at (monotonic
	// send time of its last successful heartbeat) + TTL - SafetyMargin.
	SafetyMargin time.Duration
	// CheckpointEvery is the default checkpoint interval of a session
	// (written only when last_seq advanced).
	CheckpointEvery time.Duration
	// Periodic reports whether a session, as its item stands, gets periodic
	// checkpoints: the worker's decision from the spec, which this package
	// carries without reading (nil: every session does). A session without
	// them still writes the final one with its release, hand-off or fail,
	// and the explicit ones (Keeper.Checkpoint); it is asked again when a
	// new generation is installed (Held.SetItem).
	Periodic func(Item) bool
	// RPCTimeout bounds each store call the Keeper makes.
	RPCTimeout time.Duration
	// RetryEvery is the wait before retrying a checkpoint that failed
	// transiently.
	RetryEvery time.Duration
	// MaxConcurrentWrites bounds checkpoints in flight.
	MaxConcurrentWrites int
	// Tick is how often the Keeper checks deadlines and due checkpoints.
	Tick time.Duration
	// Watchers is how many workers watch each worker (rendezvous hashing).
	Watchers int
	// RefreshEvery is how often the Keeper lists the alive workers (the
	// watch targets and the AliveWorkers count).
	RefreshEvery time.Duration
	// HandoffBound is how long a directed hand-off keeps a session for its
	// receiver: after it (on this worker's wall clock; a liveness matter
	// only, never safety), anyone may take it.
	HandoffBound time.Duration
	// IndexLagBound is what the Keeper assumes of the table's indexes: a
	// write is in them within this long of being sent (applied, then
	// propagated; DynamoDB's global secondary indexes are eventually
	// consistent with no upper bound). A GONE worker moves to DONE only when
	// a by_owner query sent this long after this Keeper first saw it gone
	// still finds nothing (MayMarkDone). Default 30 s: AWS says an index
	// catches up "within a fraction of a second under normal conditions"
	// and longer "in some unlikely failure scenarios" without a bound; the
	// longest lag reported in the wild we know of is 15 s (guardian/grid
	// #3641, #3642), so 30 s is twice that, and far above an acquire's
	// RPCTimeout (a write in flight when the worker stopped). A larger bound
	// costs only reads (each reconciling worker queries a GONE worker's
	// by_owner every pass until it is DONE) and never delays a takeover.
	IndexLagBound time.Duration
	// UnownedGrace is how long the reconciler leaves a session its
	// listings show unowned to the work queue's fast path (its start
	// notification, normally taken within milliseconds): it tries it only
	// on a listing at least this long after the first that showed it
	// (Candidate.Fresh). 0 (the default, and the worker's for now): on
	// first sight. A lost notification waits for the first listing past
	// the grace; a fresh start is not raced by a reconcile pass that
	// listed it a moment before the fast path's acquire (each such race a
	// refused write). The worker does not set it yet: a rolling deploy's
	// hand-offs wait on it (docs/worker.md, issue 37).
	UnownedGrace time.Duration
}

// DefaultConfig returns the default timings: TTL 10 s, heartbeat every 1 s,
// safety margin 2 s, checkpoints every 60 s.
func DefaultConfig(owner string) Config {
	return Config{
		Owner:               owner,
		TTL:                 10 * time.Second,
		HeartbeatEvery:      time.Second,
		SafetyMargin:        2 * time.Second,
		CheckpointEvery:     time.Minute,
		RPCTimeout:          2 * time.Second,
		RetryEvery:          500 * time.Millisecond,
		MaxConcurrentWrites: 64,
		Tick:                50 * time.Millisecond,
		Watchers:            2,
		RefreshEvery:        5 * time.Second,
		HandoffBound:        5 * time.Second,
		IndexLagBound:       30 * time.Second,
	}
}

// DoneSweepEvery is how often a Keeper looks again for the sessions of the
// DONE workers rendezvous hashing gives it (ten index-lag bounds, 5 min at
// the default): the fallback for an index lagging beyond IndexLagBound,
// until the DONE record expires (schema.EndedRecordTTLSeconds).
func (c Config) DoneSweepEvery() time.Duration { return 10 * c.IndexLagBound }

// WatchEvery is how often a watcher reads the records it watches: half a
// heartbeat, so it first sees a heartbeat at most that long after it was
// applied (crash failover ≤ TTL + WatchEvery + the takeover).
func (c Config) WatchEvery() time.Duration { return c.HeartbeatEvery / 2 }

// listTimeout bounds one listing of the reconcile pass or a takeover (the
// by_unowned shards, the GONE and DONE workers, a worker's by_owner): 4 ×
// RPCTimeout (8 s at the defaults), room for the SDK's retries of a
// throttled page (see rpc in discovery.go).
func (c Config) listTimeout() time.Duration { return 4 * c.RPCTimeout }

// Validate checks that the timings can keep the protocol safe.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Owner == "" {
		bad("owner is empty")
	}
	if c.TTL <= 0 || c.HeartbeatEvery <= 0 || c.CheckpointEvery <= 0 || c.RPCTimeout <= 0 || c.Tick <= 0 || c.RetryEvery <= 0 || c.RefreshEvery <= 0 || c.HandoffBound <= 0 {
		bad("TTL, HeartbeatEvery, CheckpointEvery, RPCTimeout, RetryEvery, Tick, RefreshEvery and HandoffBound must be positive")
	}
	if c.SafetyMargin <= c.Tick {
		bad("SafetyMargin %s must exceed Tick %s", c.SafetyMargin, c.Tick)
	}
	if c.TTL-c.SafetyMargin < c.HeartbeatEvery+c.RPCTimeout {
		bad("TTL %s - SafetyMargin %s leaves no room for a heartbeat every %s that may take %s", c.TTL, c.SafetyMargin, c.HeartbeatEvery, c.RPCTimeout)
	}
	if c.IndexLagBound <= c.RPCTimeout {
		bad("IndexLagBound %s must exceed RPCTimeout %s (an acquire in flight is applied within it)", c.IndexLagBound, c.RPCTimeout)
	}
	if c.MaxConcurrentWrites < 1 {
		bad("MaxConcurrentWrites must be at least 1")
	}
	if c.Watchers < 1 {
		bad("Watchers must be at least 1")
	}
	if c.UnownedGrace < 0 {
		bad("UnownedGrace %s must not be negative", c.UnownedGrace)
	}
	if len(errs) > 0 {
		return fmt.Errorf("lease config: %w", errors.Join(errs...))
	}
	return nil
}
