package dynamostore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// API is the part of the DynamoDB client the store calls.
type API interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Op names the store's request kinds in Stats.
const (
	OpAcquire        = "acquire"
	OpAcquireFailed  = "acquire_failed"
	OpRenew          = "renew"
	OpRenewFailed    = "renew_failed"
	OpCheckpoint     = "checkpoint"
	OpRelease        = "release"
	OpClassifyRead   = "classify_read"
	OpGet            = "get"
	OpOrphanQuery    = "orphan_query_page"
	OpOrphanItemRead = "orphan_items_read"
)

var allOps = []string{OpAcquire, OpAcquireFailed, OpRenew, OpRenewFailed, OpCheckpoint, OpRelease, OpClassifyRead, OpGet, OpOrphanQuery, OpOrphanItemRead}

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

var names = map[string]string{
	"#pk": schema.AttrPk,
	"#ds": schema.AttrDesiredState,
	"#sh": schema.AttrIndexShard,
	"#o":  schema.AttrLeaseOwner,
	"#e":  schema.AttrLeaseExpiresAtMs,
	"#ep": schema.AttrLeaseEpoch,
	"#ls": schema.AttrLastSeq,
}

// pick returns the expression attribute names an expression uses (DynamoDB
// rejects unused ones).
func pick(keys ...string) map[string]string {
	m := make(map[string]string, len(keys))
	for _, k := range keys {
		m[k] = names[k]
	}
	return m
}

func num(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}
func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func (s *Store) key(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{schema.AttrPk: str(id)}
}

func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// Acquire implements lease.Store.
func (s *Store) Acquire(ctx context.Context, id, owner string, staleBeforeMs, expiresAtMs int64) (lease.Item, error) {
	out, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &s.table,
		Key:                      s.key(id),
		UpdateExpression:         aws.String("SET #o = :o, #e = :exp ADD #ep :one"),
		ConditionExpression:      aws.String("attribute_exists(#pk) AND #ds = :started AND (attribute_not_exists(#e) OR #e < :stale)"),
		ExpressionAttributeNames: pick("#pk", "#ds", "#o", "#e", "#ep"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":o": str(owner), ":exp": num(expiresAtMs), ":one": num(1),
			":started": str(schema.StateStarted), ":stale": num(staleBeforeMs),
		},
		ReturnValues: types.ReturnValueAllNew,
	})
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
	update := "SET #e = :exp"
	if lastSeq != lease.NoSeq {
		update += ", #ls = :seq"
	}
	out, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &s.table,
		Key:                      s.key(t.ConnectionID),
		UpdateExpression:         aws.String(update),
		ConditionExpression:      aws.String("#o = :o AND #ep = :ep AND #e >= :now AND #ds = :started AND (attribute_not_exists(#ls) OR #ls <= :seq)"),
		ExpressionAttributeNames: pick("#ds", "#o", "#e", "#ep", "#ls"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":o": str(t.Owner), ":ep": num(t.Epoch), ":now": num(nowMs), ":exp": num(expiresAtMs),
			":started": str(schema.StateStarted), ":seq": num(lastSeq),
		},
		ReturnValues: types.ReturnValueAllNew,
	})
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
	return s.fenced(ctx, OpCheckpoint, t, lastSeq, "SET #ls = :seq", nil)
}

// Release implements lease.Store.
func (s *Store) Release(ctx context.Context, t lease.Token, lastSeq int64) error {
	update := "SET #e = :zero"
	if lastSeq != lease.NoSeq {
		update += ", #ls = :seq"
	}
	return s.fenced(ctx, OpRelease, t, lastSeq, update, map[string]types.AttributeValue{":zero": num(0)})
}

// fenced runs an update conditional on owner, epoch and a forward last_seq.
func (s *Store) fenced(ctx context.Context, op string, t lease.Token, lastSeq int64, update string, extra map[string]types.AttributeValue) error {
	values := map[string]types.AttributeValue{":o": str(t.Owner), ":ep": num(t.Epoch), ":seq": num(lastSeq)}
	for k, v := range extra {
		values[k] = v
	}
	nameKeys := []string{"#o", "#ep", "#ls"}
	if extra != nil {
		nameKeys = append(nameKeys, "#e")
	}
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       s.key(t.ConnectionID),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("#o = :o AND #ep = :ep AND (attribute_not_exists(#ls) OR #ls <= :seq)"),
		ExpressionAttributeNames:  pick(nameKeys...),
		ExpressionAttributeValues: values,
	})
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
	if cerr := lease.ClassifyFenced(it, t, lastSeq); cerr != nil {
		return cerr
	}
	return nil
}

// read is the consistent GetItem that classifies a failed condition; nil
// when the item does not exist.
func (s *Store) read(ctx context.Context, id string) (*lease.Item, error) {
	s.count(OpClassifyRead)
	return s.getItem(ctx, id)
}

func (s *Store) getItem(ctx context.Context, id string) (*lease.Item, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: s.key(id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", id, err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	it, err := decode(out.Item)
	if err != nil {
		return nil, err
	}
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
		res, err := s.api.Query(ctx, &dynamodb.QueryInput{
			TableName:                &s.table,
			IndexName:                aws.String(schema.IndexByShardExpiry),
			KeyConditionExpression:   aws.String("#sh = :shard AND #e < :before"),
			ExpressionAttributeNames: pick("#sh", "#e"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":shard": str(shard), ":before": num(expiresBeforeMs),
			},
			Limit:             aws.Int32(page),
			ExclusiveStartKey: start,
		})
		s.count(OpOrphanQuery)
		if err != nil {
			return nil, fmt.Errorf("query %s %s: %w", schema.IndexByShardExpiry, shard, err)
		}
		s.stats[OpOrphanItemRead].Add(int64(len(res.Items)))
		for _, raw := range res.Items {
			var c struct {
				Pk  string `dynamodbav:"Pk"`
				Exp int64  `dynamodbav:"lease_expires_at_ms"`
			}
			if err := attributevalue.UnmarshalMap(raw, &c); err != nil {
				return nil, fmt.Errorf("decode orphan: %w", err)
			}
			out = append(out, lease.Candidate{ConnectionID: c.Pk, ExpiresAtMs: c.Exp})
		}
		if len(res.LastEvaluatedKey) == 0 || (limit > 0 && len(out) >= limit) {
			return out, nil
		}
		start = res.LastEvaluatedKey
	}
}

type record struct {
	Pk           string            `dynamodbav:"Pk"`
	DesiredState string            `dynamodbav:"desired_state"`
	IndexShard   string            `dynamodbav:"index_shard,omitempty"`
	WSURL        string            `dynamodbav:"ws_url"`
	Headers      map[string]string `dynamodbav:"headers"`
	SeqField     string            `dynamodbav:"seq_field"`
	ResumeParam  string            `dynamodbav:"resume_query_param"`
	Generation   int64             `dynamodbav:"generation"`
	Owner        string            `dynamodbav:"lease_owner"`
	ExpiresAtMs  int64             `dynamodbav:"lease_expires_at_ms"`
	Epoch        int64             `dynamodbav:"lease_epoch"`
	LastSeq      *int64            `dynamodbav:"last_seq"`
	UpdatedAtMs  int64             `dynamodbav:"updated_at_ms"`
}

func decode(m map[string]types.AttributeValue) (lease.Item, error) {
	var r record
	if err := attributevalue.UnmarshalMap(m, &r); err != nil {
		return lease.Item{}, fmt.Errorf("decode item: %w", err)
	}
	it := lease.Item{
		ConnectionID: r.Pk, DesiredState: r.DesiredState, WSURL: r.WSURL, Headers: r.Headers,
		SeqField: r.SeqField, ResumeParam: r.ResumeParam, Generation: r.Generation,
		Owner: r.Owner, ExpiresAtMs: r.ExpiresAtMs, Epoch: r.Epoch, LastSeq: lease.NoSeq, UpdatedAtMs: r.UpdatedAtMs,
	}
	if r.LastSeq != nil {
		it.LastSeq = *r.LastSeq
	}
	return it, nil
}

// Encode turns an item into attributes (tests and the local stack seed with
// it; ingest has its own writes).
func Encode(it lease.Item) (map[string]types.AttributeValue, error) {
	r := record{
		Pk: it.ConnectionID, DesiredState: it.DesiredState, WSURL: it.WSURL, Headers: it.Headers,
		SeqField: it.SeqField, ResumeParam: it.ResumeParam, Generation: it.Generation,
		Owner: it.Owner, ExpiresAtMs: it.ExpiresAtMs, Epoch: it.Epoch, UpdatedAtMs: it.UpdatedAtMs,
	}
	if it.LastSeq != lease.NoSeq {
		ls := it.LastSeq
		r.LastSeq = &ls
	}
	if it.DesiredState != "" {
		r.IndexShard = schema.IndexShardFor(it.DesiredState, it.ConnectionID)
	}
	m, err := attributevalue.MarshalMap(r)
	if err != nil {
		return nil, fmt.Errorf("encode item %s: %w", it.ConnectionID, err)
	}
	for k, v := range m {
		if _, isNull := v.(*types.AttributeValueMemberNULL); isNull {
			delete(m, k)
		}
	}
	if it.Owner == "" {
		delete(m, schema.AttrLeaseOwner)
	}
	return m, nil
}

var _ lease.Store = (*Store)(nil)
