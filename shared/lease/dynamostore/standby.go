package dynamostore

// The hot standby's writes on the session item.

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
)

// AssignStandby implements lease.Store: one conditional write of the
// session item (ALL_OLD; a failed condition is classified on a consistent
// read, as every write's). Billed on the item's size (1 write unit at the
// sizes the session item has: its configuration is in its spec item); no
// index entry moves, standby being no index key.
func (s *Store) AssignStandby(ctx context.Context, id, worker string, gen int64, prev *lease.StandbyToken) (lease.Item, error) {
	free := expression.AttributeNotExists(sessionitem.Standby).Or(sessionitem.Standby.Equal(v(worker)))
	if prev != nil {
		free = free.Or(sessionitem.Standby.Equal(v(prev.Worker)).And(sessionitem.StandbyEpoch.Equal(v(prev.Epoch))))
	}
	c := expression.AttributeExists(sessionitem.Pk).And(
		sessionitem.DesiredState.Equal(v(schema.StateStarted)), notFailed(), sessionitem.Generation.Equal(v(gen)),
		sessionitem.HasOwner(), sessionitem.LeaseOwner.NotEqual(v(worker)),
		expression.AttributeNotExists(sessionitem.StandbyRefusedGen).Or(sessionitem.StandbyRefusedGen.NotEqual(v(gen))),
		free)
	u := expression.Set(sessionitem.Standby, v(worker)).Add(sessionitem.StandbyEpoch, v(1)).Remove(sessionitem.StandbyError)
	old, failed, err := s.update(ctx, OpAssignStandby, id, u, c, types.ReturnValueAllOld)
	if err != nil {
		return lease.Item{}, fmt.Errorf("assign standby %s to %s: %w", id, worker, err)
	}
	if failed {
		it, err := session(old)
		if err != nil {
			return lease.Item{}, fmt.Errorf("assign standby %s to %s: %w", id, worker, err)
		}
		return lease.Item{}, fmt.Errorf("assign standby %s to %s: %w", id, worker, lease.ClassifyAssignStandby(it, worker, gen, prev))
	}
	after := with(old, map[string]types.AttributeValue{
		schema.AttrStandby: str(worker), schema.AttrStandbyEpoch: num(numOf(old, schema.AttrStandbyEpoch) + 1),
	}, schema.AttrStandbyError)
	s.meters[OpAssignStandby].wrote(old, after)
	it, err := session(after)
	if err != nil {
		return lease.Item{}, fmt.Errorf("assign standby %s to %s: %w", id, worker, err)
	}
	it.Spec = "" // as written: the spec is not read (Get)
	return *it, nil
}

// DropStandby implements lease.Store: one conditional write of the session
// item, billed as AssignStandby.
func (s *Store) DropStandby(ctx context.Context, t lease.StandbyToken, refusedGen int64, reason string, _ int64) error {
	c := sessionitem.Standby.Equal(v(t.Worker)).And(sessionitem.StandbyEpoch.Equal(v(t.Epoch)))
	u := expression.Remove(sessionitem.Standby)
	set := map[string]types.AttributeValue{}
	if refusedGen > 0 {
		u = u.Set(sessionitem.StandbyRefusedGen, v(refusedGen))
		set[schema.AttrStandbyRefusedGen] = num(refusedGen)
	}
	if reason != "" {
		r := lease.StandbyReason(reason)
		u = u.Set(sessionitem.StandbyError, v(r))
		set[schema.AttrStandbyError] = str(r)
	}
	old, failed, err := s.update(ctx, OpDropStandby, t.ConnectionID, u, c, types.ReturnValueAllOld)
	if err != nil {
		return fmt.Errorf("drop standby %s: %w", t, err)
	}
	if failed {
		it, err := session(old)
		if err != nil {
			return fmt.Errorf("drop standby %s: %w", t, err)
		}
		return fmt.Errorf("drop standby %s: %w", t, lease.ClassifyDropStandby(it, t))
	}
	s.meters[OpDropStandby].wrote(old, with(old, set, schema.AttrStandby))
	return nil
}
