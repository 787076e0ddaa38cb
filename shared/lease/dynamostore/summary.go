package dynamostore

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
)

// The fleet summary's items (lease.SummaryStore): a head and membership
// pages, each written whole by a conditional PutItem (the head only over a
// lower version, a page only over a version not above it) and read by an
// eventually consistent GetItem: a stale read costs a refresh of
// staleness, never safety (nothing about ownership reads them).

// EncodeSummary is head s's item.
func EncodeSummary(s lease.Summary) (map[string]types.AttributeValue, error) {
	r := sessionitem.Summary{
		Key: schema.SummaryKey, Version: s.Version, Writer: s.Writer, AtMs: s.AtMs, Alive: s.Alive, Load: s.Load,
		Capacity: s.Capacity, Imbalance: s.Imbalance, Members: s.Members, MembersBy: s.MembersBy, Pages: s.Pages,
	}
	for _, p := range s.Peers {
		r.Peers = append(r.Peers, sessionitem.SummaryPeer{ID: p.ID, Addr: p.AdminAddr, Load: p.Load, Capacity: p.Capacity})
	}
	for _, m := range s.Moves {
		r.Moves = append(r.Moves, sessionitem.SummaryMove{From: m.From, To: m.To, Count: m.Count})
	}
	return sessionitem.EncodeSummary(r)
}

func decodeSummary(m map[string]types.AttributeValue) (lease.Summary, error) {
	r, err := sessionitem.DecodeSummary(m)
	if err != nil {
		return lease.Summary{}, err
	}
	s := lease.Summary{
		Version: r.Version, Writer: r.Writer, AtMs: r.AtMs, Alive: r.Alive, Load: r.Load, Capacity: r.Capacity,
		Imbalance: r.Imbalance, Members: r.Members, MembersBy: r.MembersBy, Pages: r.Pages,
	}
	for _, p := range r.Peers {
		s.Peers = append(s.Peers, lease.SummaryPeer{ID: p.ID, AdminAddr: p.Addr, Load: p.Load, Capacity: p.Capacity})
	}
	for _, mv := range r.Moves {
		s.Moves = append(s.Moves, lease.SummaryMove{From: mv.From, To: mv.To, Count: mv.Count})
	}
	return s, nil
}

// EncodeMembers is membership page n's item.
func EncodeMembers(n int, version int64, writer string, ids []string) (map[string]types.AttributeValue, error) {
	return sessionitem.EncodeMembers(sessionitem.MembersPage{Key: schema.MembersKey(n), Version: version, Writer: writer, Page: n, IDs: ids})
}

// GetSummary implements lease.SummaryStore.
func (s *Store) GetSummary(ctx context.Context) (lease.Summary, error) {
	m, err := s.readEventually(ctx, OpGetSummary, schema.SummaryKey)
	if err != nil {
		return lease.Summary{}, fmt.Errorf("get fleet summary: %w", err)
	}
	if m == nil {
		return lease.Summary{}, fmt.Errorf("get fleet summary: %w", lease.ErrNoSummary)
	}
	return decodeSummary(m)
}

// PutSummary implements lease.SummaryStore.
func (s *Store) PutSummary(ctx context.Context, sum lease.Summary) error {
	item, err := EncodeSummary(sum)
	if err != nil {
		return err
	}
	if err := s.putVersioned(ctx, OpPutSummary, item, expression.Name(schema.AttrSumVersion).LessThan(v(sum.Version))); err != nil {
		return fmt.Errorf("put fleet summary %d: %w", sum.Version, err)
	}
	return nil
}

// PutMembers implements lease.SummaryStore.
func (s *Store) PutMembers(ctx context.Context, n int, version int64, writer string, ids []string) error {
	item, err := EncodeMembers(n, version, writer, ids)
	if err != nil {
		return err
	}
	if err := s.putVersioned(ctx, OpPutMembers, item, expression.Name(schema.AttrSumVersion).LessThanEqual(v(version))); err != nil {
		return fmt.Errorf("put membership page %d: %w", n, err)
	}
	return nil
}

// GetMembers implements lease.SummaryStore.
func (s *Store) GetMembers(ctx context.Context, n int) (int64, string, []string, error) {
	m, err := s.readEventually(ctx, OpGetMembers, schema.MembersKey(n))
	if err != nil {
		return 0, "", nil, fmt.Errorf("get membership page %d: %w", n, err)
	}
	if m == nil {
		return 0, "", nil, fmt.Errorf("get membership page %d: %w", n, lease.ErrNoSummary)
	}
	p, err := sessionitem.DecodeMembers(m)
	if err != nil {
		return 0, "", nil, err
	}
	return p.Version, p.Writer, p.IDs, nil
}

// putVersioned is a PutItem of item when no item has its key or cond holds
// on the stored one; a failed condition is lease.ErrSummarySuperseded
// (billed at the stored item's size, which the failure returns).
func (s *Store) putVersioned(ctx context.Context, op string, item map[string]types.AttributeValue, cond expression.ConditionBuilder) error {
	e, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(sessionitem.Pk).Or(cond)).Build()
	if err != nil {
		return err
	}
	m := s.meters[op]
	m.writes.Add(1)
	_, err = s.client(op).PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table, Item: item, ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(),
		ExpressionAttributeValues: e.Values(), ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		m.wrote(nil, item) // no index holds these items' attributes
		return nil
	case errors.As(err, &ccf):
		m.failed.Add(1)
		m.wu.Add(WriteUnits(ItemSize(ccf.Item)))
		return lease.ErrSummarySuperseded
	}
	return edge(err)
}

// readEventually is an eventually consistent GetItem of key, metered under
// op; nil when absent.
func (s *Store) readEventually(ctx context.Context, op, key string) (map[string]types.AttributeValue, error) {
	m := s.meters[op]
	m.reads.Add(1)
	out, err := s.client(op).GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: sessionitem.Key(key)})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, edge(err))
	}
	m.readHalves.Add(ConsistentReadUnits(ItemSize(out.Item))) // eventually consistent: half a unit per 4 KB
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

var _ lease.SummaryStore = (*Store)(nil)
