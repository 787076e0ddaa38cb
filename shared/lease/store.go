package lease

// What a table must provide: the consumer-defined interfaces every store
// implements (memstore, dynamostore, simddb) and the conformance suite
// (leasetest) checks.

import (
	"context"
)

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
	// from.Bypass; then it clears the reservation and returns the item
	// with the checkpointed LastSeq (the checkpoint is on the session item:
	// the new epoch fences the last owner's checkpoints in the same write). A session owned by someone else fails with a *HeldError
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
	// Checkpoint moves the session's last_seq forward while t is its tenure.
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

// OwnedByAppender is a SessionStore that lists by_owner into its caller's
// array: AppendOwnedBy(ctx, dst, owner) appends to dst what OwnedBy(ctx,
// owner, 0) returns, in the same order, and allocates only when dst lacks
// the room. The Keeper's audit lists its own sessions every AuditEvery
// through it, reusing the last pass's array (Keeper.Audit), where a listing
// of its own would be 64 B of garbage per held session a pass (memstore:
// the capacity bench's store). A store without it is listed through
// OwnedBy; leasetest checks the two agree.
type OwnedByAppender interface {
	AppendOwnedBy(ctx context.Context, dst []Owned, owner string) ([]Owned, error)
}

// AppendOwnedBy lists the sessions owner owns (by_owner, all of them) after
// dst: into dst's array where s can (OwnedByAppender), else through
// OwnedBy. A store wrapping another implements OwnedByAppender with it, so
// that its inner store's stays reachable (the worker's healthStore).
func AppendOwnedBy(ctx context.Context, s SessionStore, dst []Owned, owner string) ([]Owned, error) {
	if a, ok := s.(OwnedByAppender); ok {
		return a.AppendOwnedBy(ctx, dst, owner)
	}
	owned, err := s.OwnedBy(ctx, owner, 0)
	return append(dst, owned...), err
}

// HeadReader is a SessionStore that reads a session without its
// configuration: GetHead(ctx, id) returns what Get(ctx, id) returns with
// Spec empty, and a store that keeps the configuration in an item of its
// own (the spec item) does not read that item: one consistent read of the
// session item instead of two. A standby's periodic check of its session
// (the owner, the checkpoint, the generation, the state) needs no spec
// unless the generation moved. leasetest checks it agrees with Get.
type HeadReader interface {
	GetHead(ctx context.Context, id string) (Item, error)
}

// GetHead reads session id without its configuration through s's
// HeadReader, else through Get (its Spec then emptied: the caller sees one
// contract). A store wrapping another implements HeadReader with it (the
// worker's healthStore).
func GetHead(ctx context.Context, s SessionStore, id string) (Item, error) {
	if h, ok := s.(HeadReader); ok {
		return h.GetHead(ctx, id)
	}
	it, err := s.Get(ctx, id)
	it.Spec = ""
	return it, err
}

// Store is a lease table. Implementations: dynamostore, memstore.
type Store interface {
	LivenessStore
	SessionStore
}
