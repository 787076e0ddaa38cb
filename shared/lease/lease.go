// Package lease owns wsfleet's ownership protocol: the session item as the
// lease sees it, the Store a lease table must provide, the pure rules that
// decide and classify every transition (acquire, renew, checkpoint, release,
// expire), and the Keeper that holds a worker's leases, renews them and
// fences itself before a lease can expire. It does no I/O of its own and reads
// time only from an injected clock.Clock.
package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// NoSeq is the LastSeq of a session that has no checkpoint yet.
const NoSeq int64 = -1

// Item is a session item as stored. Only ingest writes the desired fields;
// only lease holders write the lease fields and the failure fields
// (FailedGeneration, LastError), which a start (ingest) clears.
type Item struct {
	ConnectionID string
	DesiredState string
	WSURL        string
	Headers      map[string]string
	SeqField     string
	ResumeParam  string
	Subprotocols []string // offered on the handshake, in order of preference
	// FollowRedirects is how many handshake redirects the worker may follow
	// (0: none; each hop is checked against the allowlist and the address
	// policy, and credentials never go to another origin).
	FollowRedirects int
	Generation      int64

	Owner       string
	ExpiresAtMs int64 // wall-clock ms; 0 = released or never leased
	Epoch       int64 // fencing token: +1 on every acquire
	LastSeq     int64 // NoSeq when absent
	UpdatedAtMs int64

	// FailedGeneration is the generation at which a holder gave up on the
	// source (Fail); nil when none did. The session is FAILED while it
	// equals Generation and the session is STARTED.
	FailedGeneration *int64
	LastError        string // the last connection error a holder recorded
	LastErrorAtMs    int64
}

// Failed reports whether the session is FAILED: STARTED, and a holder gave up
// on its source at the current generation. Only a new start (a new
// generation) or a stop ends it.
func (it Item) Failed() bool {
	return it.DesiredState == schema.StateStarted && it.FailedGeneration != nil && *it.FailedGeneration == it.Generation
}

// FailedExpiresAtMs is the lease expiry Fail writes: far in the future
// (9999-12-31T23:59:59.999Z), so that Orphans (expiry before now plus a
// look-ahead) never lists a FAILED session, while a list of the whole
// by_shard_expiry index still does. A new start sets the expiry back to 0.
const FailedExpiresAtMs = schema.FailedLeaseExpiresAtMs

// Token identifies one tenure of a lease: every side-effect write is
// conditional on its owner and epoch.
type Token struct {
	ConnectionID string
	Owner        string
	Epoch        int64
}

func (t Token) String() string { return fmt.Sprintf("%s@%d(%s)", t.ConnectionID, t.Epoch, t.Owner) }

// Candidate is a session the reconciler may try to acquire.
type Candidate struct {
	ConnectionID string
	ExpiresAtMs  int64
}

// Errors. Stores return them (wrapped) after classifying a failed condition;
// the Keeper returns ErrUntrusted and ErrReleased of its own.
var (
	ErrNotFound   = errors.New("session not found")
	ErrStopped    = errors.New("session not started")
	ErrHeld       = errors.New("lease held by another owner")
	ErrLeaseLost  = errors.New("lease lost to a newer epoch or another owner")
	ErrNotOwner   = ErrLeaseLost
	ErrExpired    = errors.New("lease expired")
	ErrSeqRegress = errors.New("checkpoint behind the stored last_seq")
	ErrUntrusted  = errors.New("lease untrusted: not renewed before its safety deadline")
	ErrReleased   = errors.New("lease released")
	// ErrFailed: the session is FAILED (its source can never be connected)
	// until a new start; nobody may acquire it.
	ErrFailed = errors.New("session failed: waiting for a new start")
	// ErrNewGeneration: Fail named a generation the session no longer has
	// (a start changed its configuration since the failing dial).
	ErrNewGeneration = errors.New("session has a newer generation")
)

// Definitive reports whether err says the lease is over (as opposed to a
// transient failure such as a timeout or throttling, after which a renew may
// be retried).
func Definitive(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrStopped) || errors.Is(err, ErrLeaseLost) ||
		errors.Is(err, ErrExpired) || errors.Is(err, ErrSeqRegress) || errors.Is(err, ErrHeld) || errors.Is(err, ErrFailed)
}

// Store is what the lease protocol needs from a table. Every method is one
// conditional write (or read); a failed condition is classified with
// Classify* into the errors above. Implementations: dynamostore, memstore.
type Store interface {
	// Acquire sets owner, expiresAtMs and epoch+1 when the session is STARTED
	// and not FAILED, and its lease is absent or expires before
	// staleBeforeMs (released leases have 0). It never writes desired_state.
	Acquire(ctx context.Context, id, owner string, staleBeforeMs, expiresAtMs int64) (Item, error)
	// Renew moves the expiry of t's lease to expiresAtMs and the checkpoint
	// to lastSeq, when t still owns it, it has not expired at nowMs, the
	// session is STARTED and lastSeq does not go backwards. Retrying a renew
	// whose outcome was unknown succeeds while the lease is still t's.
	Renew(ctx context.Context, t Token, nowMs, expiresAtMs, lastSeq int64) (Item, error)
	// Checkpoint moves last_seq forward while t owns the lease.
	Checkpoint(ctx context.Context, t Token, lastSeq int64) error
	// Release sets the expiry to 0 (and the final checkpoint) while t owns
	// the lease, so another worker may take it at once.
	Release(ctx context.Context, t Token, lastSeq int64) error
	// Fail records that t's holder gave up on the source as configured at
	// generation gen, while t owns the lease and the item's generation is
	// still gen (else ErrNewGeneration): failed_generation = gen,
	// last_error = reason (short, never a header value or URL query) at
	// atMs, the final checkpoint lastSeq, and the expiry FailedExpiresAtMs.
	// The session is then FAILED: nobody acquires it until a new start.
	Fail(ctx context.Context, t Token, gen, lastSeq int64, reason string, atMs int64) error
	// NoteError records last_error = reason at atMs while t owns the lease.
	NoteError(ctx context.Context, t Token, reason string, atMs int64) error
	// Get reads an item consistently.
	Get(ctx context.Context, id string) (Item, error)
	// Orphans lists STARTED sessions whose lease expires before
	// expiresBeforeMs, oldest first, up to limit, following pages.
	Orphans(ctx context.Context, expiresBeforeMs int64, limit int) ([]Candidate, error)
}

// Config holds the lease timings of one worker.
type Config struct {
	Owner string
	// TTL is how long a successful write keeps the lease.
	TTL time.Duration
	// RenewEvery is the renewal period (with ±RenewJitter fraction).
	RenewEvery  time.Duration
	RenewJitter float64
	// MaxSkew bounds the wall-clock difference between any two workers; a
	// lease is taken over only once it expired by more than MaxSkew.
	MaxSkew time.Duration
	// SafetyMargin: the holder stops trusting a lease at (monotonic send
	// time of its last successful renew) + TTL - SafetyMargin.
	SafetyMargin time.Duration
	// RPCTimeout bounds each store call the Keeper makes.
	RPCTimeout time.Duration
	// RetryEvery is the wait before retrying a renew that failed transiently.
	RetryEvery time.Duration
	// MaxConcurrentRenews bounds renewals in flight.
	MaxConcurrentRenews int
	// Tick is how often the Keeper checks deadlines and due renewals.
	Tick time.Duration
}

// DefaultConfig returns the default timings: TTL 10 s, renew every TTL/3,
// skew 500 ms, safety margin 2 s.
func DefaultConfig(owner string) Config {
	return Config{
		Owner:               owner,
		TTL:                 10 * time.Second,
		RenewEvery:          10 * time.Second / 3,
		RenewJitter:         0.1,
		MaxSkew:             500 * time.Millisecond,
		SafetyMargin:        2 * time.Second,
		RPCTimeout:          2 * time.Second,
		RetryEvery:          500 * time.Millisecond,
		MaxConcurrentRenews: 64,
		Tick:                50 * time.Millisecond,
	}
}

// Validate checks that the timings can keep the protocol safe.
func (c Config) Validate() error {
	switch {
	case c.Owner == "":
		return errors.New("lease config: owner is empty")
	case c.TTL <= 0 || c.RenewEvery <= 0 || c.RPCTimeout <= 0 || c.Tick <= 0 || c.RetryEvery <= 0:
		return errors.New("lease config: TTL, RenewEvery, RPCTimeout, RetryEvery and Tick must be positive")
	case c.MaxSkew < 0 || c.SafetyMargin < 0:
		return errors.New("lease config: MaxSkew and SafetyMargin must not be negative")
	case c.RenewJitter < 0 || c.RenewJitter >= 0.5:
		return fmt.Errorf("lease config: RenewJitter %.2f not in [0, 0.5)", c.RenewJitter)
	case c.SafetyMargin <= c.Tick:
		return fmt.Errorf("lease config: SafetyMargin %s must exceed Tick %s", c.SafetyMargin, c.Tick)
	case c.TTL-c.SafetyMargin <= time.Duration(float64(c.RenewEvery)*(1+c.RenewJitter)):
		return fmt.Errorf("lease config: TTL %s - SafetyMargin %s leaves no room for a renewal every %s", c.TTL, c.SafetyMargin, c.RenewEvery)
	case c.MaxConcurrentRenews < 1:
		return errors.New("lease config: MaxConcurrentRenews must be at least 1")
	}
	return nil
}
