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
	"fmt"
	"maps"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/schema"
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
	// failedGen is failed_generation (nil: none). A start of an item that
	// carries one always writes: it clears it (sessionitem.ClearFailed) and
	// puts the session back in by_unowned.
	failedGen *int64
}

// Start makes d the desired configuration of d.ConnectionID and sets it
// STARTED. A new item gets generation 1 and its by_unowned entry. On an
// existing item it bumps the generation when the item was STOPPED or FAILED
// or when its configuration differs, and writes nothing when the item
// already says exactly d. Each write is conditional on the generation and
// state it read, and on whether the item has an owner: without one the
// start (re)sets unowned_shard, so that a reconciler claims the session;
// with one it leaves unowned_shard absent and then puts the id in the
// owner's mailbox, so that the owner re-reads the new generation at its
// next heartbeat. Concurrent starts and stops never lose an update: every
// write gets its own generation.
func (s *Store) Start(ctx context.Context, d Desired) (Result, error) {
	stored, err := d.Spec.Encode()
	if err != nil {
		return Result{}, fmt.Errorf("start %s: %w", d.ConnectionID, err)
	}
	w := write{id: d.ConnectionID, spec: stored, hash: sessionitem.SpecHash(stored), ckptMs: d.Spec.CheckpointInterval().Milliseconds()}
	var pending string // a spec item this start put that no session write of it stored (yet)
	for attempt := 0; attempt < s.maxAttempts; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				return Result{}, fmt.Errorf("%w: start %s: %v", ErrUnavailable, d.ConnectionID, err)
			}
		}
		item, err := s.getItem(ctx, d.ConnectionID)
		if err != nil {
			return Result{}, fmt.Errorf("start %s: %w", d.ConnectionID, err)
		}
		if pending != "" && item != nil && generation(*item) >= refGeneration(pending) && item.SpecRef != pending {
			// The write that was to name it lost; no later one can (it
			// names its own generation's), unless a racer stored the
			// same ref (same generation, same content).
			s.dropSpec(ctx, d.ConnectionID, pending)
			pending = ""
		}
		now := s.clock.Now().UnixMilli()
		if item == nil {
			w.ref = sessionitem.SpecRef(1, w.spec)
			if err := s.putSpec(ctx, d.ConnectionID, w.ref, w.spec); err != nil {
				return Result{}, fmt.Errorf("start %s: %w", d.ConnectionID, err)
			}
			pending = w.ref
			err := s.create(ctx, w, now)
			if isConditionFailed(err) {
				continue // someone created it first: re-read
			}
			if err != nil {
				return Result{}, writeFailed("start (create)", d.ConnectionID, err)
			}
			return Result{Generation: 1, Outcome: Created}, nil
		}
		cur := toRecord(item)
		if cur.state == schema.StateStarted && cur.hash == w.hash && cur.failedGen == nil {
			return Result{Generation: cur.generation, Outcome: Unchanged}, nil
		}
		// The same configuration keeps its spec item (a restart); another
		// one gets a spec item of its own, put before the write names it.
		w.ref = cur.ref
		if cur.hash != w.hash || cur.ref == "" || item.Spec != "" {
			w.ref = sessionitem.SpecRef(cur.generation+1, w.spec)
			if err := s.putSpec(ctx, d.ConnectionID, w.ref, w.spec); err != nil {
				return Result{}, fmt.Errorf("start %s: %w", d.ConnectionID, err)
			}
			pending = w.ref
		}
		outcome := Updated
		if cur.state != schema.StateStarted || item.Failed() {
			outcome = Restarted
		}
		owner, err := s.replace(ctx, w, cur, item.Spec != "", now)
		if isConditionFailed(err) {
			continue // a concurrent start, stop or acquire got there first: re-read
		}
		if err != nil {
			return Result{}, writeFailed("start (update)", d.ConnectionID, err)
		}
		if cur.ref != "" && cur.ref != w.ref {
			s.dropSpec(ctx, d.ConnectionID, cur.ref) // superseded
		}
		res := Result{Generation: cur.generation + 1, Outcome: outcome}
		// Every replace is a new generation (or a restart): the owner must
		// re-read the session.
		s.tellOwner(ctx, &res, owner, d.ConnectionID, schema.StateStarted)
		return res, nil
	}
	return Result{}, fmt.Errorf("start %s: %w after %d attempts", d.ConnectionID, ErrConflict, s.maxAttempts)
}

// tellOwner puts id's entry for the write res describes (its generation,
// and state, the desired state it left: schema.MailboxEntry) in owner's
// mailbox (none when owner is ""), recording the outcome in res. A worker that is no longer ALIVE (or whose record is
// gone) fails the condition: that is no error, its sessions are taken over.
func (s *Store) tellOwner(ctx context.Context, res *Result, owner, id, state string) {
	res.Owner = owner
	if owner == "" {
		return
	}
	in, err := sessionitem.MailboxAdd(s.table, owner, schema.MailboxEntry(id, res.Generation, state))
	if err == nil {
		_, err = s.api.UpdateItem(ctx, in)
	}
	switch {
	case err == nil:
		res.OwnerNotified = true
	case isConditionFailed(err):
	default:
		res.MailboxErr = fmt.Errorf("mailbox of %s for %s: %w", owner, id, err)
	}
}

// write is a start's desired configuration as stored.
type write struct {
	id     string
	spec   string // spec.Encode
	hash   string // sessionitem.SpecHash(spec)
	ref    string // the spec item's ref the write names
	ckptMs int64  // the spec's checkpoint interval, for the ownership core; 0: the worker's default
}

// desiredSet is the update that makes w the desired configuration, STARTED:
// the session names w's spec item (put before).
func desiredSet(w write, now int64) expression.UpdateBuilder {
	u := expression.Set(sessionitem.DesiredState, expression.Value(schema.StateStarted)).
		Set(sessionitem.IndexShard, expression.Value(schema.IndexShardFor(schema.StateStarted, w.id))).
		Set(sessionitem.SpecRefName, expression.Value(w.ref)).
		Set(sessionitem.UpdatedAtMs, expression.Value(now))
	if w.ckptMs > 0 {
		u = u.Set(sessionitem.CheckpointEvery, expression.Value(w.ckptMs))
	} else {
		u = u.Remove(sessionitem.CheckpointEvery)
	}
	return u
}

func (s *Store) create(ctx context.Context, w write, now int64) error {
	u := desiredSet(w, now).Set(sessionitem.Generation, expression.Value(1)).Set(sessionitem.CreatedAtMs, expression.Value(now))
	in, err := sessionitem.Update(s.table, w.id, sessionitem.Unowned(u, w.id),
		expression.AttributeNotExists(sessionitem.Pk))
	if err != nil {
		return err
	}
	_, err = s.api.UpdateItem(ctx, in)
	return err
}

// replace writes d over the item read as cur and returns the owner the
// written item names ("": none). It is one of two conditional variants: the
// item has no owner (then unowned_shard is set) or it has one (then
// unowned_shard stays absent, and the owner is read back from the written
// item, so that the one told is the one that owns it now). An acquire or a
// release between the read and the write fails the condition: re-read. An
// owner that is no longer ALIVE needs nothing more here: its record stays
// GONE while by_owner lists the session, reconcilers take over its STARTED
// sessions and clear the owner of its stopped ones (lease Store.Disown), so
// a session whose owner died while it was stopped is restarted without
// owner, in by_unowned.
// An inline spec (an older ingest's item) is removed: the item names its
// spec item from then on.
func (s *Store) replace(ctx context.Context, w write, cur record, inline bool, now int64) (string, error) {
	cond := expression.AttributeExists(sessionitem.Pk).And(sessionitem.DesiredState.Equal(expression.Value(cur.state)))
	if cur.hasGen {
		cond = cond.And(sessionitem.Generation.Equal(expression.Value(cur.generation)))
	} else {
		cond = cond.And(expression.AttributeNotExists(sessionitem.Generation))
	}
	u := desiredSet(w, now).Set(sessionitem.Generation, expression.Value(cur.generation+1))
	if inline {
		u = u.Remove(sessionitem.Spec)
	}
	// A FAILED item (or one that was when it stopped) is cleared only while
	// failed_generation is still what was read.
	if cur.failedGen != nil {
		cond = cond.And(sessionitem.FailedAt(*cur.failedGen))
		u = sessionitem.ClearFailed(u)
	} else {
		cond = cond.And(expression.AttributeNotExists(sessionitem.FailedGeneration))
	}
	if cur.owner == "" {
		cond = cond.And(sessionitem.NoOwner())
		u = sessionitem.Unowned(u, w.id)
	} else {
		cond = cond.And(sessionitem.HasOwner())
	}
	in, err := sessionitem.Update(s.table, w.id, u, cond)
	if err != nil {
		return "", err
	}
	if cur.owner == "" {
		_, err = s.api.UpdateItem(ctx, in)
		return "", err
	}
	in.ReturnValues = types.ReturnValueAllNew
	out, err := s.api.UpdateItem(ctx, in)
	if err != nil {
		return "", err
	}
	it, err := sessionitem.Decode(out.Attributes)
	if err != nil {
		return cur.owner, nil // written; the owner read is the best guess
	}
	return it.LeaseOwner, nil
}

// Stop sets a session STOPPED and takes it out of by_unowned. It writes
// only when the item is STARTED, so a repeated stop changes nothing (Outcome
// Unchanged); an unknown id is ErrNotFound and creates nothing. The write
// returns the item: when it names an owner, the id goes into the owner's
// mailbox (one more write), so that the owner closes the connection at its
// next heartbeat whichever worker the queue's stop notification reaches. A
// repeated stop of a session still owned tells the owner again (a set add:
// idempotent), in case the first stop's mailbox write was lost.
func (s *Store) Stop(ctx context.Context, id string) (Result, error) {
	for attempt := 0; attempt < s.maxAttempts; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				return Result{}, fmt.Errorf("%w: stop %s: %v", ErrUnavailable, id, err)
			}
		}
		in, err := sessionitem.Update(s.table, id,
			expression.Set(sessionitem.DesiredState, expression.Value(schema.StateStopped)).
				Set(sessionitem.IndexShard, expression.Value(schema.IndexShardFor(schema.StateStopped, id))).
				Set(sessionitem.UpdatedAtMs, expression.Value(s.clock.Now().UnixMilli())).
				Remove(sessionitem.UnownedShard),
			expression.AttributeExists(sessionitem.Pk).And(sessionitem.DesiredState.Equal(expression.Value(schema.StateStarted))))
		if err != nil {
			return Result{}, fmt.Errorf("stop %s: %w", id, err)
		}
		in.ReturnValues = types.ReturnValueAllNew
		out, err := s.api.UpdateItem(ctx, in)
		if err == nil {
			it, err := sessionitem.Decode(out.Attributes)
			if err != nil {
				return Result{}, fmt.Errorf("stop %s: %w", id, err)
			}
			res := Result{Generation: generation(it), Outcome: Stopped}
			s.tellOwner(ctx, &res, it.LeaseOwner, id, schema.StateStopped)
			return res, nil
		}
		if !isConditionFailed(err) {
			return Result{}, writeFailed("stop", id, err)
		}
		// Missing, or already STOPPED, or raced with a restart: a consistent
		// read tells which (dynalite does not return the old item).
		item, err := s.getItem(ctx, id)
		if err != nil {
			return Result{}, fmt.Errorf("stop %s: %w", id, err)
		}
		if item == nil {
			return Result{}, fmt.Errorf("stop %s: %w", id, ErrNotFound)
		}
		cur := toRecord(item)
		if cur.state == schema.StateStopped {
			res := Result{Generation: cur.generation, Outcome: Unchanged}
			s.tellOwner(ctx, &res, cur.owner, id, schema.StateStopped)
			return res, nil
		}
	}
	return Result{}, fmt.Errorf("stop %s: %w after %d attempts", id, ErrConflict, s.maxAttempts)
}

// Get reads one session (and its spec item) with consistent reads.
func (s *Store) Get(ctx context.Context, id string) (Session, error) {
	got, err := s.batchGet(ctx, []string{id})
	if err != nil {
		return Session{}, fmt.Errorf("get %s: %w", id, err)
	}
	sess, ok := got[id]
	if !ok {
		return Session{}, fmt.Errorf("get %s: %w", id, ErrNotFound)
	}
	return sess, nil
}

// getItem reads id's item consistently; nil when there is none.
func (s *Store) getItem(ctx context.Context, id string) (*sessionitem.Item, error) {
	it, err := sessionitem.Get(ctx, s.api, s.table, id)
	if err != nil {
		return nil, readFailed("read", id, err)
	}
	return it, nil
}

// MaxListLimit is the largest page List returns.
const MaxListLimit = 100

// List returns up to limit sessions whose desired state is state, starting
// after cursor (empty for the first page). It reads the by_state index
// shard by shard (within a shard, by connection id), so the order is stable
// across pages but not global. The index is eventually consistent: items
// are re-read consistently and those no longer
// in state are left out, so a page may hold fewer than limit sessions while
// Next is set.
func (s *Store) List(ctx context.Context, state string, limit int, cursor string) (Page, error) {
	if state != schema.StateStarted && state != schema.StateStopped {
		return Page{}, fmt.Errorf("list: state %q is neither %s nor %s", state, schema.StateStarted, schema.StateStopped)
	}
	if limit <= 0 || limit > MaxListLimit {
		limit = MaxListLimit
	}
	shard := 0
	var start map[string]types.AttributeValue
	if cursor != "" {
		var err error
		if shard, start, err = decodeCursor(cursor, state); err != nil {
			return Page{}, fmt.Errorf("list %s: %w", state, err)
		}
	}
	var page Page
	ids := make([]string, 0, limit)
	for shard < schema.IndexShards && len(ids) < limit {
		in, err := sessionitem.StateQuery(s.table, schema.IndexShardKey(state, shard), int32(limit-len(ids)), start)
		if err != nil {
			return Page{}, fmt.Errorf("list %s: %w", state, err)
		}
		out, err := s.api.Query(ctx, in)
		if err != nil {
			return Page{}, readFailed("list", state, err)
		}
		for _, raw := range out.Items {
			it, err := sessionitem.Decode(raw)
			if err != nil {
				return Page{}, fmt.Errorf("list %s: %w", state, err)
			}
			ids = append(ids, it.ConnectionID)
		}
		if len(out.LastEvaluatedKey) > 0 {
			start = out.LastEvaluatedKey
			continue
		}
		shard, start = shard+1, nil
	}
	if shard < schema.IndexShards {
		next, err := encodeCursor(state, shard, start)
		if err != nil {
			return Page{}, fmt.Errorf("list %s: %w", state, err)
		}
		page.Next = next
	}
	got, err := s.batchGet(ctx, ids)
	if err != nil {
		return Page{}, fmt.Errorf("list %s: %w", state, err)
	}
	for _, id := range ids {
		sess, ok := got[id]
		if !ok || sess.DesiredState != state {
			continue
		}
		page.Sessions = append(page.Sessions, sess)
	}
	return page, nil
}

// resumeSeq is the larger of two optional sequence numbers (lease.ResumeSeq).
func resumeSeq(a, b *int64) *int64 {
	if a == nil || (b != nil && *b > *a) {
		return b
	}
	return a
}

// batchKeys is how many keys one BatchGetItem request may carry.
const batchKeys = 100

// batchGet reads the session items of ids consistently, retrying
// unprocessed keys, then the spec items they name. A session's last_seq is
// the larger of its checkpoint (last_seq) and the release_seq its last
// release wrote (nil when neither is set).
func (s *Store) batchGet(ctx context.Context, ids []string) (map[string]Session, error) {
	return s.batchGetDepth(ctx, ids, 0)
}

// specRereads bounds the re-reads of sessions whose spec item was
// superseded between the session's read and the spec's.
const specRereads = 3

func (s *Store) batchGetDepth(ctx context.Context, ids []string, depth int) (map[string]Session, error) {
	keys := make([]map[string]types.AttributeValue, 0, len(ids))
	for _, id := range ids {
		keys = append(keys, sessionitem.Key(id))
	}
	raws, err := s.batchRead(ctx, keys)
	if err != nil {
		return nil, err
	}
	got := make(map[string]Session, len(ids))
	var items []*sessionitem.Item
	for _, raw := range raws {
		if pk, _ := raw[schema.AttrPk].(*types.AttributeValueMemberS); pk == nil {
			continue
		}
		it, err := sessionitem.Decode(raw)
		if err != nil {
			return nil, fmt.Errorf("batch read: %w", err)
		}
		items = append(items, &it)
	}
	specs, err := s.specsOf(ctx, items)
	if err != nil {
		return nil, err
	}
	var superseded []string
	for _, it := range items {
		stored, ok := it.Spec, true
		if stored == "" && it.SpecRef != "" {
			stored, ok = specs[it.ConnectionID]
		}
		if !ok {
			superseded = append(superseded, it.ConnectionID)
			continue
		}
		got[it.ConnectionID] = toSession(it, stored)
	}
	if len(superseded) > 0 {
		// A start replaced their configuration between the two reads: the
		// sessions name newer spec items.
		if depth >= specRereads {
			return nil, fmt.Errorf("%w: batch read: configurations replaced %d times while read", ErrConflict, depth)
		}
		again, err := s.batchGetDepth(ctx, superseded, depth+1)
		if err != nil {
			return nil, err
		}
		maps.Copy(got, again)
	}
	return got, nil
}

// batchRead reads keys consistently, batchKeys at a time, retrying
// unprocessed keys up to maxAttempts times per batch.
func (s *Store) batchRead(ctx context.Context, keys []map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
	var items []map[string]types.AttributeValue
	for len(keys) > 0 {
		n := min(batchKeys, len(keys))
		req := map[string]types.KeysAndAttributes{s.table: {Keys: keys[:n], ConsistentRead: aws.Bool(true)}}
		keys = keys[n:]
		for attempt := 0; len(req) > 0; attempt++ {
			if attempt >= s.maxAttempts {
				return nil, fmt.Errorf("%w: batch read: unprocessed keys after %d attempts", ErrUnavailable, attempt)
			}
			if attempt > 0 {
				if err := backoff(ctx, attempt); err != nil {
					return nil, fmt.Errorf("%w: batch read: %v", ErrUnavailable, err)
				}
			}
			out, err := s.api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, readFailed("batch read", s.table, err)
			}
			items = append(items, out.Responses[s.table]...)
			req = out.UnprocessedKeys
		}
	}
	return items, nil
}

func toRecord(it *sessionitem.Item) record {
	ref := it.SpecRef
	if it.Spec != "" {
		ref = "" // an inline spec is the item's configuration (a ref beside it is older)
	}
	return record{
		state: it.DesiredState, hash: sessionitem.SpecHashOf(*it), ref: ref,
		generation: generation(*it), hasGen: it.Generation != nil, owner: it.LeaseOwner, failedGen: it.FailedGeneration,
	}
}

// toSession is item it with its stored configuration (inline, or its spec
// item's).
func toSession(it *sessionitem.Item, stored string) Session {
	// A stored spec that no longer checks (a hand-edited item) is shown as
	// decoded.
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
