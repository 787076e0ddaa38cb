package dynamostore

// Sessions read: one item, and the index listings.

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
)

func toLease(r *sessionitem.Item) lease.Item {
	it := lease.Item{
		ConnectionID: r.ConnectionID, DesiredState: r.DesiredState, Spec: r.Spec,
		CheckpointEvery: time.Duration(r.CheckpointEveryMs) * time.Millisecond,
		Owner:           r.LeaseOwner, Epoch: r.LeaseEpoch, HandoffTo: r.HandoffTo, HandoffAtMs: r.HandoffAtMs,
		LastSeq: lease.NoSeq, ReleaseSeq: lease.NoSeq, UpdatedAtMs: r.UpdatedAtMs,
		FailedGeneration: r.FailedGeneration, LastError: r.LastError, LastErrorAtMs: r.LastErrorAtMs,
		LastErrorGen: r.LastErrorGen, LastErrorEpoch: r.LastErrorEpoch,
		Standby: r.Standby, StandbyEpoch: r.StandbyEpoch, StandbyRefusedGen: r.StandbyRefusedGen, StandbyError: r.StandbyError,
		TenureKey: r.TenureKey,
	}
	if r.Generation != nil {
		it.Generation = *r.Generation
	}
	if r.ReleaseSeq != nil {
		it.ReleaseSeq = *r.ReleaseSeq
	}
	it.LastSeq = lease.ResumeSeq(seqOf(r.LastSeq), it.ReleaseSeq)
	return it
}

// session decodes a session item read from the table (nil: absent).
func session(m map[string]types.AttributeValue) (*lease.Item, error) {
	if m == nil {
		return nil, nil
	}
	r, err := sessionitem.Decode(m)
	if err != nil {
		return nil, err
	}
	it := toLease(&r)
	return &it, nil
}

// Get implements lease.Store: one consistent GetItem of the session item
// (its checkpoint with it), then one of the spec item the session names
// (none for an inline item). A spec item superseded and
// deleted in between sends it back to the session.
func (s *Store) Get(ctx context.Context, id string) (lease.Item, error) {
	for attempt := 1; ; attempt++ {
		it, r, err := s.get(ctx, id)
		if err != nil {
			return lease.Item{}, fmt.Errorf("get %s: %w", id, err)
		}
		stored, ok, err := s.specOf(ctx, OpGet, id, r)
		if err != nil {
			return lease.Item{}, fmt.Errorf("get %s: %w", id, err)
		}
		if ok {
			it.Spec = stored
			return it, nil
		}
		if attempt == specAttempts {
			return lease.Item{}, fmt.Errorf("get %s: spec superseded %d times while read", id, attempt)
		}
	}
}

// GetHead implements lease.HeadReader: one consistent GetItem of the
// session item (its checkpoint with it), not of its spec item; Spec is
// empty, even for an inline item.
func (s *Store) GetHead(ctx context.Context, id string) (lease.Item, error) {
	it, _, err := s.get(ctx, id)
	if err != nil {
		return lease.Item{}, fmt.Errorf("get %s: %w", id, err)
	}
	it.Spec = ""
	return it, nil
}

// get reads the session item consistently: the session (its Spec only if
// inline; its checkpoint) and its item as stored, and notes whether it
// is to run (hints).
func (s *Store) get(ctx context.Context, id string) (lease.Item, sessionitem.Item, error) {
	m, err := s.read(ctx, OpGet, id)
	if err != nil {
		return lease.Item{}, sessionitem.Item{}, err
	}
	if m == nil {
		return lease.Item{}, sessionitem.Item{}, lease.ErrNotFound
	}
	r, err := sessionitem.Decode(m)
	if err != nil {
		return lease.Item{}, sessionitem.Item{}, err
	}
	it := toLease(&r)
	s.hints.Note(id, it.DesiredState == schema.StateStarted && !it.Failed())
	return it, r, nil
}

// Unowned implements lease.Store: queries of the by_unowned shards (limit
// 0: all), starting at a rotating shard so that a small limit does not
// always favour the same ones.
func (s *Store) Unowned(ctx context.Context, limit int) ([]string, error) {
	var out []string
	first := int(s.shard.Add(1)) % schema.IndexShards
	for i := range schema.IndexShards {
		if limit > 0 && len(out) >= limit {
			break
		}
		key := schema.UnownedShardKey((first + i) % schema.IndexShards)
		err := s.query(ctx, OpUnowned, schema.IndexByUnowned, schema.AttrUnownedShard, key, limit, func(m map[string]types.AttributeValue) error {
			if k, ok := m[schema.AttrPk].(*types.AttributeValueMemberS); ok {
				out = append(out, k.Value)
			}
			return nil
		}, func() int { return len(out) })
		if err != nil {
			return nil, fmt.Errorf("unowned: %w", err)
		}
	}
	return out, nil
}

// OwnedBy implements lease.Store: a query of by_owner (limit 0: all).
func (s *Store) OwnedBy(ctx context.Context, owner string, limit int) ([]lease.Owned, error) {
	var out []lease.Owned
	err := s.query(ctx, OpOwnedBy, schema.IndexByOwner, schema.AttrLeaseOwner, owner, limit, func(m map[string]types.AttributeValue) error {
		r, err := sessionitem.Decode(m)
		if err != nil {
			return err
		}
		o := lease.Owned{Token: lease.Token{ConnectionID: r.ConnectionID, Owner: r.LeaseOwner, Epoch: r.LeaseEpoch}, DesiredState: r.DesiredState}
		if r.Generation != nil {
			o.Generation = *r.Generation
		}
		out = append(out, o)
		return nil
	}, func() int { return len(out) })
	if err != nil {
		return nil, fmt.Errorf("owned by %s: %w", owner, err)
	}
	return out, nil
}
