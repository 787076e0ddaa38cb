package dynamostore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
)

// API is the part of the DynamoDB client the store calls.
type API = sessionitem.API

// Op names the store's request kinds in Stats.
const (
	OpAcquire        = "acquire"
	OpAcquireFailed  = "acquire_failed"
	OpRenew          = "renew"
	OpRenewFailed    = "renew_failed"
	OpCheckpoint     = "checkpoint"
	OpRelease        = "release"
	OpFail           = "fail"
	OpNoteError      = "note_error"
	OpClassifyRead   = "classify_read"
	OpGet            = "get"
	OpOrphanQuery    = "orphan_query_page"
	OpOrphanItemRead = "orphan_items_read"
)

var allOps = []string{OpAcquire, OpAcquireFailed, OpRenew, OpRenewFailed, OpCheckpoint, OpRelease, OpFail, OpNoteError, OpClassifyRead, OpGet, OpOrphanQuery, OpOrphanItemRead}

// Store is a lease.Store on one DynamoDB table.
type Store struct {
	api   API
	table string
	stats map[string]*atomic.Int64
}

// New returns a store on table.
func New(api API, table string) *Store {
	s := &Store{api: api, table: table, stats: map[string]*atomic.Int64{}}
	for _, op := range allOps {
		s.stats[op] = new(atomic.Int64)
	}
	return s
}

// Stats returns how many requests of each kind the store made (for the cost
// benchmark: every kind is one request; failed writes still consume a write
// unit).
func (s *Store) Stats() map[string]int64 {
	out := make(map[string]int64, len(s.stats))
	for k, v := range s.stats {
		out[k] = v.Load()
	}
	return out
}

func (s *Store) count(op string) { s.stats[op].Add(1) }

func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// Acquire implements lease.Store.
func (s *Store) Acquire(ctx context.Context, id, owner string, staleBeforeMs, expiresAtMs int64) (lease.Item, error) {
	in, err := sessionitem.Update(s.table, id,
		expression.Set(sessionitem.LeaseOwner, expression.Value(owner)).
			Set(sessionitem.LeaseExpiresAtMs, expression.Value(expiresAtMs)).
			Add(sessionitem.LeaseEpoch, expression.Value(1)),
		expression.AttributeExists(sessionitem.Pk).
			And(sessionitem.DesiredState.Equal(expression.Value(schema.StateStarted))).
			And(expression.AttributeNotExists(sessionitem.FailedGeneration).Or(sessionitem.FailedGeneration.NotEqual(sessionitem.Generation))).
			And(expression.AttributeNotExists(sessionitem.LeaseExpiresAtMs).Or(sessionitem.LeaseExpiresAtMs.LessThan(expression.Value(staleBeforeMs)))))
	if err != nil {
		return lease.Item{}, err
	}
	in.ReturnValues = types.ReturnValueAllNew
	out, err := s.api.UpdateItem(ctx, in)
	if err == nil {
		s.count(OpAcquire)
		return decode(out.Attributes)
	}
	if !isConditionFailed(err) {
		return lease.Item{}, fmt.Errorf("update %s: %w", id, err)
	}
	s.count(OpAcquireFailed)
	it, gerr := s.read(ctx, id)
	if gerr != nil {
		return lease.Item{}, gerr
	}
	if cerr := lease.ClassifyAcquire(it, owner, staleBeforeMs, expiresAtMs); cerr != nil {
		return lease.Item{}, cerr
	}
	return *it, nil
}

// Renew implements lease.Store.
func (s *Store) Renew(ctx context.Context, t lease.Token, nowMs, expiresAtMs, lastSeq int64) (lease.Item, error) {
	update := expression.Set(sessionitem.LeaseExpiresAtMs, expression.Value(expiresAtMs))
	if lastSeq != lease.NoSeq {
		update = update.Set(sessionitem.LastSeq, expression.Value(lastSeq))
	}
	in, err := sessionitem.Update(s.table, t.ConnectionID, update,
		sessionitem.LeaseOwner.Equal(expression.Value(t.Owner)).
			And(sessionitem.LeaseEpoch.Equal(expression.Value(t.Epoch))).
			And(sessionitem.LeaseExpiresAtMs.GreaterThanEqual(expression.Value(nowMs))).
			And(sessionitem.DesiredState.Equal(expression.Value(schema.StateStarted))).
			And(seqForward(lastSeq)))
	if err != nil {
		return lease.Item{}, err
	}
	in.ReturnValues = types.ReturnValueAllNew
	out, err := s.api.UpdateItem(ctx, in)
	if err == nil {
		s.count(OpRenew)
		return decode(out.Attributes)
	}
	if !isConditionFailed(err) {
		return lease.Item{}, fmt.Errorf("update %s: %w", t, err)
	}
	s.count(OpRenewFailed)
	it, gerr := s.read(ctx, t.ConnectionID)
	if gerr != nil {
		return lease.Item{}, gerr
	}
	if cerr := lease.ClassifyRenew(it, t, nowMs, expiresAtMs, lastSeq); cerr != nil {
		return lease.Item{}, cerr
	}
	return *it, nil
}

// Checkpoint implements lease.Store.
func (s *Store) Checkpoint(ctx context.Context, t lease.Token, lastSeq int64) error {
	if lastSeq == lease.NoSeq {
		return nil
	}
	return s.fenced(ctx, OpCheckpoint, t, lastSeq, expression.Set(sessionitem.LastSeq, expression.Value(lastSeq)))
}

// Release implements lease.Store.
func (s *Store) Release(ctx context.Context, t lease.Token, lastSeq int64) error {
	update := expression.Set(sessionitem.LeaseExpiresAtMs, expression.Value(0))
	if lastSeq != lease.NoSeq {
		update = update.Set(sessionitem.LastSeq, expression.Value(lastSeq))
	}
	return s.fenced(ctx, OpRelease, t, lastSeq, update)
}

// Fail implements lease.Store: one write that moves the index key to
// lease.FailedExpiresAtMs (once per failure, not a hot path).
func (s *Store) Fail(ctx context.Context, t lease.Token, gen, lastSeq int64, reason string, atMs int64) error {
	update := expression.Set(sessionitem.FailedGeneration, expression.Value(gen)).
		Set(sessionitem.LastError, expression.Value(reason)).
		Set(sessionitem.LastErrorAtMs, expression.Value(atMs)).
		Set(sessionitem.LeaseExpiresAtMs, expression.Value(lease.FailedExpiresAtMs))
	if lastSeq != lease.NoSeq {
		update = update.Set(sessionitem.LastSeq, expression.Value(lastSeq))
	}
	cond := owned(t).And(seqForward(lastSeq)).And(sessionitem.Generation.Equal(expression.Value(gen)))
	return s.conditional(ctx, OpFail, t, update, cond, func(it *lease.Item) error { return lease.ClassifyFail(it, t, gen, lastSeq) })
}

// NoteError implements lease.Store.
func (s *Store) NoteError(ctx context.Context, t lease.Token, reason string, atMs int64) error {
	update := expression.Set(sessionitem.LastError, expression.Value(reason)).Set(sessionitem.LastErrorAtMs, expression.Value(atMs))
	return s.conditional(ctx, OpNoteError, t, update, owned(t), func(it *lease.Item) error { return lease.ClassifyNoteError(it, t) })
}

// owned is the condition that t still owns the lease (owner and epoch).
func owned(t lease.Token) expression.ConditionBuilder {
	return sessionitem.LeaseOwner.Equal(expression.Value(t.Owner)).And(sessionitem.LeaseEpoch.Equal(expression.Value(t.Epoch)))
}

// seqForward is the condition that lastSeq does not move last_seq back.
func seqForward(lastSeq int64) expression.ConditionBuilder {
	return expression.AttributeNotExists(sessionitem.LastSeq).Or(sessionitem.LastSeq.LessThanEqual(expression.Value(lastSeq)))
}

// fenced runs an update conditional on owner, epoch and a forward last_seq.
func (s *Store) fenced(ctx context.Context, op string, t lease.Token, lastSeq int64, update expression.UpdateBuilder) error {
	return s.conditional(ctx, op, t, update, owned(t).And(seqForward(lastSeq)), func(it *lease.Item) error {
		return lease.ClassifyFenced(it, t, lastSeq)
	})
}

// conditional runs t's update under cond; a failed condition is explained
// by classify from a consistent read (nil: the item shows it applied).
func (s *Store) conditional(ctx context.Context, op string, t lease.Token, update expression.UpdateBuilder, cond expression.ConditionBuilder, classify func(*lease.Item) error) error {
	in, err := sessionitem.Update(s.table, t.ConnectionID, update, cond)
	if err != nil {
		return err
	}
	_, err = s.api.UpdateItem(ctx, in)
	s.count(op)
	if err == nil {
		return nil
	}
	if !isConditionFailed(err) {
		return fmt.Errorf("%s %s: %w", op, t, err)
	}
	it, gerr := s.read(ctx, t.ConnectionID)
	if gerr != nil {
		return gerr
	}
	return classify(it)
}

// read is the consistent GetItem that classifies a failed condition; nil
// when the item does not exist.
func (s *Store) read(ctx context.Context, id string) (*lease.Item, error) {
	s.count(OpClassifyRead)
	return s.getItem(ctx, id)
}

func (s *Store) getItem(ctx context.Context, id string) (*lease.Item, error) {
	r, err := sessionitem.Get(ctx, s.api, s.table, id)
	if err != nil || r == nil {
		return nil, err
	}
	it := toLease(r)
	return &it, nil
}

// Get implements lease.Store.
func (s *Store) Get(ctx context.Context, id string) (lease.Item, error) {
	s.count(OpGet)
	it, err := s.getItem(ctx, id)
	if err != nil {
		return lease.Item{}, err
	}
	if it == nil {
		return lease.Item{}, fmt.Errorf("get %s: %w", id, lease.ErrNotFound)
	}
	return *it, nil
}

// Orphans implements lease.Store with a paginated query on each of the
// index's STARTED shards; the candidates come back in expiry order, the
// longest expired first.
func (s *Store) Orphans(ctx context.Context, expiresBeforeMs int64, limit int) ([]lease.Candidate, error) {
	var out []lease.Candidate
	for k := range schema.IndexShards {
		got, err := s.orphansIn(ctx, schema.IndexShardKey(schema.StateStarted, k), expiresBeforeMs, limit)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	slices.SortStableFunc(out, func(a, b lease.Candidate) int { return cmp.Compare(a.ExpiresAtMs, b.ExpiresAtMs) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// orphansIn queries one index shard for up to limit (0: all) candidates.
func (s *Store) orphansIn(ctx context.Context, shard string, expiresBeforeMs int64, limit int) ([]lease.Candidate, error) {
	var out []lease.Candidate
	var start map[string]types.AttributeValue
	for {
		page := int32(100)
		if limit > 0 && int32(limit-len(out)) < page {
			page = int32(limit - len(out))
		}
		in, err := sessionitem.ShardQuery(s.table, shard, &expiresBeforeMs, page, start)
		if err != nil {
			return nil, err
		}
		res, err := s.api.Query(ctx, in)
		s.count(OpOrphanQuery)
		if err != nil {
			return nil, fmt.Errorf("query %s %s: %w", schema.IndexByShardExpiry, shard, err)
		}
		s.stats[OpOrphanItemRead].Add(int64(len(res.Items)))
		for _, raw := range res.Items {
			c, err := sessionitem.Decode(raw)
			if err != nil {
				return nil, fmt.Errorf("decode orphan: %w", err)
			}
			out = append(out, lease.Candidate{ConnectionID: c.ConnectionID, ExpiresAtMs: c.LeaseExpiresAtMs})
		}
		if len(res.LastEvaluatedKey) == 0 || (limit > 0 && len(out) >= limit) {
			return out, nil
		}
		start = res.LastEvaluatedKey
	}
}

func decode(m map[string]types.AttributeValue) (lease.Item, error) {
	r, err := sessionitem.Decode(m)
	if err != nil {
		return lease.Item{}, err
	}
	return toLease(&r), nil
}

func toLease(r *sessionitem.Item) lease.Item {
	it := lease.Item{
		ConnectionID: r.ConnectionID, DesiredState: r.DesiredState, WSURL: r.WSURL, Headers: r.Headers,
		SeqField: r.SeqField, ResumeParam: r.ResumeParam, Subprotocols: r.Subprotocols,
		FollowRedirects: r.FollowRedirects, Owner: r.LeaseOwner, ExpiresAtMs: r.LeaseExpiresAtMs, Epoch: r.LeaseEpoch, LastSeq: lease.NoSeq, UpdatedAtMs: r.UpdatedAtMs,
	}
	if r.Generation != nil {
		it.Generation = *r.Generation
	}
	if r.LastSeq != nil {
		it.LastSeq = *r.LastSeq
	}
	it.FailedGeneration, it.LastError, it.LastErrorAtMs = r.FailedGeneration, r.LastError, r.LastErrorAtMs
	return it
}

// Encode turns an item into attributes (tests and the local stack seed with
// it; ingest has its own writes).
func Encode(it lease.Item) (map[string]types.AttributeValue, error) {
	gen := it.Generation
	r := sessionitem.Item{
		ConnectionID: it.ConnectionID, DesiredState: it.DesiredState, WSURL: it.WSURL, Headers: it.Headers,
		SeqField: it.SeqField, ResumeParam: it.ResumeParam, Subprotocols: it.Subprotocols, FollowRedirects: it.FollowRedirects, Generation: &gen,
		LeaseOwner: it.Owner, LeaseExpiresAtMs: it.ExpiresAtMs, LeaseEpoch: it.Epoch, UpdatedAtMs: it.UpdatedAtMs,
		FailedGeneration: it.FailedGeneration, LastError: it.LastError, LastErrorAtMs: it.LastErrorAtMs,
	}
	if it.LastSeq != lease.NoSeq {
		ls := it.LastSeq
		r.LastSeq = &ls
	}
	if it.DesiredState != "" {
		r.IndexShard = schema.IndexShardFor(it.DesiredState, it.ConnectionID)
	}
	return sessionitem.Encode(r)
}

var _ lease.Store = (*Store)(nil)
