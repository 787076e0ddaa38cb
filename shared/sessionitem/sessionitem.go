// Package sessionitem owns the encoding of the sessions table's items and
// the table itself: the session item (one per connection, with its checkpoint),
// its spec item, the worker records, whose dynamodbav tags are the attribute names of
// schema.Attr*; their keys; the expression names that ingest
// (functions/ingest/internal/sessions) and the lease store
// (shared/lease/dynamostore) build their conditional writes from; the index
// queries; and the table definition (CreateTableInput). Both stores read
// items only through Decode*. A new attribute is one field here.
package sessionitem

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// Item is a session item. Omitted (omitempty) attributes are absent from an
// encoded item; pointers tell an absent attribute from a zero one.
type Item struct {
	ConnectionID      string `dynamodbav:"Pk"`
	DesiredState      string `dynamodbav:"desired_state"`
	IndexShard        string `dynamodbav:"index_shard,omitempty"`
	Spec              string `dynamodbav:"spec,omitempty"`     // shared/spec's stored form, inline: only as an older ingest wrote it
	SpecRef           string `dynamodbav:"spec_ref,omitempty"` // the spec item's ref (SpecItem); "" on an inline item
	Generation        *int64 `dynamodbav:"generation,omitempty"`
	CheckpointEveryMs int64  `dynamodbav:"checkpoint_every_ms,omitempty"`
	LeaseOwner        string `dynamodbav:"lease_owner,omitempty"`
	LeaseEpoch        int64  `dynamodbav:"lease_epoch"`
	UnownedShard      string `dynamodbav:"unowned_shard,omitempty"`
	HandoffTo         string `dynamodbav:"handoff_to,omitempty"`
	HandoffAtMs       int64  `dynamodbav:"handoff_at_ms,omitempty"`
	LastSeq           *int64 `dynamodbav:"last_seq,omitempty"` // the checkpoint: only the owner writes it, only forward
	ReleaseSeq        *int64 `dynamodbav:"release_seq,omitempty"`
	CreatedAtMs       int64  `dynamodbav:"created_at_ms,omitempty"`
	UpdatedAtMs       int64  `dynamodbav:"updated_at_ms"`
	FailedGeneration  *int64 `dynamodbav:"failed_generation,omitempty"`
	LastError         string `dynamodbav:"last_error,omitempty"`
	LastErrorAtMs     int64  `dynamodbav:"last_error_at_ms,omitempty"`
	LastErrorGen      int64  `dynamodbav:"last_error_generation,omitempty"`
	LastErrorEpoch    int64  `dynamodbav:"last_error_epoch,omitempty"`

	// The hot standby (lease.Item.Standby): only the standby's worker and
	// an acquire write them.
	Standby           string `dynamodbav:"standby,omitempty"`
	StandbyEpoch      int64  `dynamodbav:"standby_epoch,omitempty"`
	StandbyRefusedGen int64  `dynamodbav:"standby_refused_gen,omitempty"`
	StandbyError      string `dynamodbav:"standby_error,omitempty"`

	// TenureKey (lease.Item.TenureKey): written by every acquire.
	TenureKey string `dynamodbav:"tenure_key,omitempty"`
}

// Failed reports whether the item is FAILED: STARTED, and a worker gave up on
// its source at its current generation.
func (it Item) Failed() bool {
	return it.DesiredState == schema.StateStarted && it.FailedGeneration != nil &&
		*it.FailedGeneration == generationOf(it)
}

// generationOf is the item's generation, 0 when it has none.
func generationOf(it Item) int64 {
	if it.Generation == nil {
		return 0
	}
	return *it.Generation
}

// Names of the attributes, for the expression builder.
var (
	Pk               = expression.Name(schema.AttrPk)
	DesiredState     = expression.Name(schema.AttrDesiredState)
	IndexShard       = expression.Name(schema.AttrIndexShard)
	Spec             = expression.Name(schema.AttrSpec)
	SpecRefName      = expression.Name(schema.AttrSpecRef)
	Generation       = expression.Name(schema.AttrGeneration)
	CheckpointEvery  = expression.Name(schema.AttrCheckpointEvery)
	LeaseOwner       = expression.Name(schema.AttrLeaseOwner)
	LeaseEpoch       = expression.Name(schema.AttrLeaseEpoch)
	UnownedShard     = expression.Name(schema.AttrUnownedShard)
	HandoffTo        = expression.Name(schema.AttrHandoffTo)
	HandoffAtMs      = expression.Name(schema.AttrHandoffAtMs)
	LastSeq          = expression.Name(schema.AttrLastSeq)
	ReleaseSeq       = expression.Name(schema.AttrReleaseSeq)
	CreatedAtMs      = expression.Name(schema.AttrCreatedAtMs)
	UpdatedAtMs      = expression.Name(schema.AttrUpdatedAtMs)
	FailedGeneration = expression.Name(schema.AttrFailedGeneration)
	LastError        = expression.Name(schema.AttrLastError)
	LastErrorAtMs    = expression.Name(schema.AttrLastErrorAtMs)
	LastErrorGen     = expression.Name(schema.AttrLastErrorGen)
	LastErrorEpoch   = expression.Name(schema.AttrLastErrorEpoch)

	// The hot standby.
	Standby           = expression.Name(schema.AttrStandby)
	StandbyEpoch      = expression.Name(schema.AttrStandbyEpoch)
	StandbyRefusedGen = expression.Name(schema.AttrStandbyRefusedGen)
	StandbyError      = expression.Name(schema.AttrStandbyError)

	// A given tenure's key.
	TenureKey = expression.Name(schema.AttrTenureKey)

	// ExpiresAt is the table's TTL attribute, on the items that are not
	// sessions (ingest's request nonces).
	ExpiresAt = expression.Name(schema.AttrExpiresAt)
)

// ClearFailed adds to a start's update what a start of an item carrying
// failed_generation needs: failed_generation removed. A FAILED item has no
// owner (Fail removes it), so the start also puts it back in the by_unowned
// index (see Unowned). Write it only under FailedAt's condition: the item is
// then still as its holder left it.
func ClearFailed(u expression.UpdateBuilder) expression.UpdateBuilder {
	return u.Remove(FailedGeneration)
}

// Unowned adds to an update of a STARTED session without owner its
// by_unowned entry; write it under NoOwner.
func Unowned(u expression.UpdateBuilder, id string) expression.UpdateBuilder {
	return u.Set(UnownedShard, expression.Value(schema.UnownedShardOf(id)))
}

// NoOwner is the condition that the session has no owner.
func NoOwner() expression.ConditionBuilder { return expression.AttributeNotExists(LeaseOwner) }

// HasOwner is the condition that the session has an owner.
func HasOwner() expression.ConditionBuilder { return expression.AttributeExists(LeaseOwner) }

// FailedAt is the condition that the item still carries failed_generation
// = gen (what a start read).
func FailedAt(gen int64) expression.ConditionBuilder {
	return FailedGeneration.Equal(expression.Value(gen))
}

// Decode reads a session item, or an index entry of one (the keys and
// projected attributes).
func Decode(m map[string]types.AttributeValue) (Item, error) {
	var it Item
	if err := attributevalue.UnmarshalMap(m, &it); err != nil {
		return Item{}, fmt.Errorf("decode session item: %w", err)
	}
	return it, nil
}

// Encode is the item's attributes.
func Encode(it Item) (map[string]types.AttributeValue, error) {
	m, err := attributevalue.MarshalMap(it)
	if err != nil {
		return nil, fmt.Errorf("encode session item %s: %w", it.ConnectionID, err)
	}
	return m, nil
}

// Getter is the DynamoDB call Get makes.
type Getter interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// API is the part of the DynamoDB client that the stores of session items
// (ingest's and the lease store) both call: Get, the writes Update builds and
// the queries ShardQuery builds.
type API interface {
	Getter
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Get reads the item of connection id in table with a consistent read; nil
// when there is none.
func Get(ctx context.Context, api Getter, table, id string) (*Item, error) {
	out, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: Key(id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", id, err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	it, err := Decode(out.Item)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", id, err)
	}
	return &it, nil
}

// Key is the table key of connection id.
func Key(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{schema.AttrPk: &types.AttributeValueMemberS{Value: id}}
}

// StateIndexKey is the by_state key of an item: a query's ExclusiveStartKey.
func StateIndexKey(id, shard string) map[string]types.AttributeValue {
	k := Key(id)
	k[schema.AttrIndexShard] = &types.AttributeValueMemberS{Value: shard}
	return k
}

// Update is the conditional UpdateItem of connection id in table: update
// under cond, with the names and values the builder allotted.
func Update(table, id string, update expression.UpdateBuilder, cond expression.ConditionBuilder) (*dynamodb.UpdateItemInput, error) {
	e, err := expression.NewBuilder().WithUpdate(update).WithCondition(cond).Build()
	if err != nil {
		return nil, fmt.Errorf("build update of %s: %w", id, err)
	}
	return &dynamodb.UpdateItemInput{
		TableName:                 &table,
		Key:                       Key(id),
		UpdateExpression:          e.Update(),
		ConditionExpression:       flattened(e.Condition()),
		ExpressionAttributeNames:  e.Names(),
		ExpressionAttributeValues: e.Values(),
	}, nil
}

// IndexQuery is a query of index for the entries whose partition key attr
// equals value, up to limit (0: DynamoDB's page size) starting after start
// (nil: the first). Queries of indexes are eventually consistent.
func IndexQuery(table, index, attr, value string, limit int32, start map[string]types.AttributeValue) (*dynamodb.QueryInput, error) {
	e, err := expression.NewBuilder().WithKeyCondition(expression.Key(attr).Equal(expression.Value(value))).Build()
	if err != nil {
		return nil, fmt.Errorf("build query of %s %s: %w", index, value, err)
	}
	in := &dynamodb.QueryInput{
		TableName:                 &table,
		IndexName:                 &index,
		KeyConditionExpression:    flattened(e.KeyCondition()),
		ExpressionAttributeNames:  e.Names(),
		ExpressionAttributeValues: e.Values(),
		ExclusiveStartKey:         start,
	}
	if limit > 0 {
		in.Limit = &limit
	}
	return in, nil
}

// StateQuery is a query of one by_state shard (index_shard = shard).
func StateQuery(table, shard string, limit int32, start map[string]types.AttributeValue) (*dynamodb.QueryInput, error) {
	return IndexQuery(table, schema.IndexByState, schema.AttrIndexShard, shard, limit, start)
}
