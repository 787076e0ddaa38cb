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
	"crypto/sha256"
	"encoding/hex"
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
	// worker's default), the spec's checkpoint_every as the protocol reads it
	// (stored twice: schema.AttrCheckpointEvery says why).
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
	// LastSeq is where delivery resumes: ResumeSeq of the session's
	// last_seq (its checkpoint) and ReleaseSeq; NoSeq when neither is set.
	// A store that seeds an item (Put) stores it as last_seq.
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
	// Seen: an unowned one (Prev nil) that an earlier listing of this
	// Keeper showed unowned too, whatever the grace (a reconciler whose
	// fast path is down counts it relisted: no notification is coming).
	Seen bool
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
