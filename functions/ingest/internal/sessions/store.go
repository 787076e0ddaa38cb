// Package sessions owns ingest's writes and reads of the sessions table: the
// desired state of each connection (desired_state with its index_shard,
// the spec (shared/spec's stored form) in a spec item of its own that the
// session names (spec_ref; spec.go), checkpoint_every_ms, the generation,
// created/updated times) and the by_unowned entry
// (unowned_shard) of a STARTED session without owner, so that reconciliation
// finds every new start. It never writes lease_owner or lease_epoch: a start
// or a stop of an owned session instead puts the connection id in the
// owner's mailbox (its worker record), which the owner reads at its next
// heartbeat. It reads the worker records (GET /workers). Every session write is one conditional UpdateItem; SDK
// types and errors stay inside this package.
package sessions

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
	"github.com/wsfleet/wsfleet/shared/spec"
)

// API is the part of the DynamoDB client the store calls.
type API interface {
	sessionitem.API
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// Errors callers classify with errors.Is.
var (
	// ErrNotFound: no session has that connection_id.
	ErrNotFound = errors.New("session not found")
	// ErrConflict: concurrent writers kept changing the item; retry later.
	ErrConflict = errors.New("session changed concurrently")
	// ErrUnavailable: the table could not take the request now (throttling,
	// no connection, a read that timed out, a 5xx on a read). Nothing was
	// written: retry.
	ErrUnavailable = errors.New("session table unavailable")
	// ErrRejected: DynamoDB refused the request for what it is (a 4xx the
	// request caused: a ValidationException, an item over 400 KB among
	// them; a missing table or index; access denied). Nothing was written,
	// and sending the same request again cannot succeed.
	ErrRejected = errors.New("session table rejected the request")
	// ErrOutcomeUnknown: a write's answer never came (a timeout, a broken
	// connection, a 5xx, which DynamoDB documents as "may or may not have
	// succeeded"). The write may have been applied. Retrying the same
	// start or stop is safe: both are idempotent, and a repeated one sends
	// its notification again.
	ErrOutcomeUnknown = errors.New("session table write outcome unknown")
	// ErrInvalidCursor: a list cursor that this store did not produce.
	ErrInvalidCursor = errors.New("invalid list cursor")
)

// Desired is what a start asks for: the whole desired configuration (an
// omitted field clears it), checked (spec.Check).
type Desired struct {
	ConnectionID string
	// Spec may carry credentials (header values, open messages): never
	// logged or returned.
	Spec spec.Spec
}

// Outcome says what a start or a stop changed.
type Outcome string

// Outcomes.
const (
	Created   Outcome = "created"   // a new session (generation 1)
	Updated   Outcome = "updated"   // a STARTED session's configuration changed (generation bumped)
	Restarted Outcome = "restarted" // a STOPPED session started again (generation bumped)
	Stopped   Outcome = "stopped"   // a STARTED session is now STOPPED
	Unchanged Outcome = "unchanged" // the item already said so: nothing written
)

// Result is the effect of a start or a stop.
type Result struct {
	Generation int64
	Outcome    Outcome
	// Owner is the worker that owned the session when it was written
	// ("": none); OwnerNotified tells whether the connection id was put in
	// its mailbox (false when the owner is no longer alive: whoever takes
	// the session over reads the new desired state anyway).
	Owner         string
	OwnerNotified bool
	// MailboxErr is why the mailbox write failed, other than the owner not
	// being alive (the session write stands: the owner's audit of its
	// sessions finds the change within a reconcile interval).
	MailboxErr error
	// Standby is the worker holding the session's hot standby when a stop
	// was written ("": none); StandbyNotified tells whether the id went
	// into its mailbox too, and StandbyMailboxErr why not (other than that
	// worker not being alive): its backstop check re-reads the session
	// within WSFLEET_STANDBY_CHECK_EVERY.
	Standby           string
	StandbyNotified   bool
	StandbyMailboxErr error
}

// Session is one item as ingest reads it.
type Session struct {
	ConnectionID string
	DesiredState string
	// Spec is as stored: it may carry credentials (header values, open
	// messages, the URL's query); show only its View.
	Spec          spec.Spec
	Generation    int64
	LeaseOwner    string
	LeaseEpoch    int64
	LastSeq       *int64 // the larger of last_seq (the checkpoint) and release_seq; nil until a worker checkpoints or releases
	CreatedAtMs   int64
	UpdatedAtMs   int64
	Failed        bool   // FAILED: a worker gave up on the source at this generation
	LastError     string // the last connection error a worker recorded
	LastErrorAtMs int64
	// LastErrorGen and LastErrorEpoch: the generation and tenure it was
	// seen in (0: recorded before they were).
	LastErrorGen   int64
	LastErrorEpoch int64
	// The hot standby, as its worker wrote it: the worker holding it and
	// its standby epoch ("", 0: none), the generation at which the source
	// refused a second connection (0: never) and why the last standby was
	// refused or dropped.
	Standby           string
	StandbyEpoch      int64
	StandbyRefusedGen int64
	StandbyError      string
}

// Page is one page of a list.
type Page struct {
	Sessions []Session
	Next     string // empty on the last page
}

// Store reads and writes sessions in one table.
type Store struct {
	api         API
	table       string
	clock       clock.Clock
	maxAttempts int
}

// Option changes a Store.
type Option func(*Store)

// WithClock sets the clock stamping created_at_ms / updated_at_ms.
func WithClock(c clock.Clock) Option { return func(s *Store) { s.clock = c } }

// WithMaxAttempts sets how many times a start or stop re-reads and retries
// after losing a race with another writer (default 8).
func WithMaxAttempts(n int) Option {
	return func(s *Store) {
		if n > 0 {
			s.maxAttempts = n
		}
	}
}

// New returns a Store on table.
func New(api API, table string, opts ...Option) *Store {
	s := &Store{api: api, table: table, clock: clock.Real{}, maxAttempts: 8}
	for _, o := range opts {
		o(s)
	}
	return s
}

// record is an item's desired part, as Start compares it.
type record struct {
	state      string
	hash       string // the stored configuration's (sessionitem.SpecHashOf): equal text is the same configuration
	ref        string // its spec item's ref; "" for an inline spec
	generation int64
	hasGen     bool
	owner      string
	standby    string // the hot standby's worker ("": none)
	// failedGen is failed_generation (nil: none). A start of an item that
	// carries one always writes: it clears it (sessionitem.ClearFailed) and
	// puts the session back in by_unowned.
	failedGen *int64
}

func toRecord(it *sessionitem.Item) record {
	ref := it.SpecRef
	if it.Spec != "" {
		ref = "" // an inline spec is the item's configuration (a ref beside it is older)
	}
	return record{
		state: it.DesiredState, hash: sessionitem.SpecHashOf(*it), ref: ref,
		generation: generation(*it), hasGen: it.Generation != nil, owner: it.LeaseOwner, standby: it.Standby, failedGen: it.FailedGeneration,
	}
}

// toSession is item it with its stored configuration (inline, or its spec
// item's).
func toSession(it *sessionitem.Item, stored string) Session {
	// A stored spec that breaks the run rules (a hand-edited item) is shown
	// as decoded; one stored under an older admission rule is shown as is
	// (spec.Decode never admits it again).
	sp, _ := spec.Decode(stored)
	return Session{
		ConnectionID: it.ConnectionID, DesiredState: it.DesiredState, Spec: sp,
		Generation: generation(*it), LeaseOwner: it.LeaseOwner, LeaseEpoch: it.LeaseEpoch,
		CreatedAtMs: it.CreatedAtMs, UpdatedAtMs: it.UpdatedAtMs,
		Failed: it.Failed(), LastError: it.LastError, LastErrorAtMs: it.LastErrorAtMs,
		LastErrorGen: it.LastErrorGen, LastErrorEpoch: it.LastErrorEpoch,
		Standby: it.Standby, StandbyEpoch: it.StandbyEpoch, StandbyRefusedGen: it.StandbyRefusedGen, StandbyError: it.StandbyError,
		LastSeq: resumeSeq(it.LastSeq, it.ReleaseSeq),
	}
}

// generation is the item's generation, 0 when it has none.
func generation(it sessionitem.Item) int64 {
	if it.Generation == nil {
		return 0
	}
	return *it.Generation
}

func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return err != nil && errors.As(err, &ccf)
}

// backoff sleeps a jittered 2..10 ms × attempt before a retry after a lost race.
func backoff(ctx context.Context, attempt int) error {
	d := time.Duration(attempt) * (2*time.Millisecond + rand.N(8*time.Millisecond))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
