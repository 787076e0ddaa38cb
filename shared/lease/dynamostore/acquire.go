package dynamostore

// The acquire: its conditional write and the spec item it reads.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
)

// Acquire implements lease.Store: the session write (ALL_OLD: the item
// after is the item before with the new tenure), then the read of its spec
// item unless from names the content it has. The checkpoint is on the same
// item, so the write fences the last owner's checkpoints (its epoch) and
// its ALL_OLD answer holds last_seq: the tenure resumes after the larger of
// it and the session's release_seq, with no second write.
//
// Whether the write removes the standby (lease.AcquireDropsStandby) is
// part of its condition: the write assumes one answer (removes it when
// from names the acquirer's standby or one seen gone) and, when the item
// read after a failed condition allows the acquire with the other one, is
// sent again so (at most acquireVariants writes).
func (s *Store) Acquire(ctx context.Context, id, owner string, from lease.From) (lease.Item, error) {
	drops := AcquireDropsFirst(from)
	var old map[string]types.AttributeValue
	for attempt := 1; ; attempt++ {
		c, u := acquireWrite(owner, from, drops)
		var failed bool
		var err error
		old, failed, err = s.update(ctx, OpAcquire, id, u, c, types.ReturnValueAllOld)
		if err != nil {
			return lease.Item{}, fmt.Errorf("acquire %s: %w", id, err)
		}
		if !failed {
			break
		}
		it, err := session(old)
		if err != nil {
			return lease.Item{}, fmt.Errorf("acquire %s: %w", id, err)
		}
		if it != nil && attempt < acquireVariants && lease.CanAcquire(it, owner, from) == nil && lease.AcquireDropsStandby(it, owner, from) != drops {
			drops = !drops // the other variant
			continue
		}
		cause := lease.ClassifyAcquire(it, owner, from)
		if lease.AcquiredUnawares(it, owner) {
			// An earlier attempt of this call was applied (the SDK retried
			// it after a 500 or a lost reply) and a stop or a failure then
			// landed: the session is owner's, though the caller will be
			// told it is not. Its tenure ends here, or nobody would
			// release it: a start would tell an owner that never knew.
			t := lease.Token{ConnectionID: id, Owner: owner, Epoch: it.Epoch}
			if rerr := s.Release(ctx, t, lease.NoSeq); rerr != nil && !errors.Is(rerr, lease.ErrLeaseLost) {
				return lease.Item{}, fmt.Errorf("acquire %s: %w (and ending the tenure an earlier attempt took: %w)", id, cause, rerr)
			}
		}
		return lease.Item{}, fmt.Errorf("acquire %s: %w", id, cause)
	}
	removed := []string{schema.AttrUnownedShard, schema.AttrHandoffTo, schema.AttrHandoffAtMs}
	if from.Key == "" {
		removed = append(removed, schema.AttrTenureKey)
	}
	if drops {
		removed = append(removed, schema.AttrStandby)
	}
	epoch := numOf(old, schema.AttrLeaseEpoch) + 1
	set := map[string]types.AttributeValue{schema.AttrLeaseOwner: str(owner), schema.AttrLeaseEpoch: num(epoch)}
	if seq := lease.GivenSeq(from); seq != lease.NoSeq {
		set[schema.AttrReleaseSeq] = num(seq)
	}
	if from.Key != "" {
		set[schema.AttrTenureKey] = str(from.Key)
	}
	after := with(old, set, removed...)
	s.meters[OpAcquire].wrote(old, after)
	it, err := session(after)
	if err != nil {
		return lease.Item{}, fmt.Errorf("acquire %s: %w", id, err)
	}
	if err := s.acquiredSpec(ctx, it, after, from.Spec); err != nil {
		// Nobody would run the session: the tenure ends here (as when an
		// earlier attempt took it unawares).
		t := lease.Token{ConnectionID: id, Owner: owner, Epoch: epoch}
		if rerr := s.Release(ctx, t, lease.NoSeq); rerr != nil && !errors.Is(rerr, lease.ErrLeaseLost) {
			return lease.Item{}, fmt.Errorf("acquire %s: %w (and ending the tenure: %w)", t, err, rerr)
		}
		return lease.Item{}, fmt.Errorf("acquire %s: %w", t, err)
	}
	return *it, nil
}

// AcquireDropsFirst is the answer an acquire with from first assumes to
// whether it removes the standby (lease.AcquireDropsStandby): yes when from
// names the acquirer's standby or one seen gone. A wrong guess costs a
// refused write and its read, then the other variant.
func AcquireDropsFirst(from lease.From) bool { return from.Standby != nil || from.StandbyGone != "" }

// acquireVariants bounds an acquire's writes: one per answer to whether
// it removes the standby, and one more for a standby that changed between.
const acquireVariants = 3

// acquireWrite is the condition and the update of an acquire by owner with
// from, assuming drops (lease.AcquireDropsStandby) of the item it lands on.
func acquireWrite(owner string, from lease.From, drops bool) (expression.ConditionBuilder, expression.UpdateBuilder) {
	owners := expression.AttributeNotExists(sessionitem.LeaseOwner).Or(sessionitem.LeaseOwner.Equal(v(owner)))
	if from.Prev != nil {
		// A takeover leaves the session to its standby unless that is the
		// acquirer or a worker it saw gone.
		free := expression.AttributeNotExists(sessionitem.Standby).Or(sessionitem.Standby.Equal(v(owner)))
		if from.StandbyGone != "" {
			free = free.Or(sessionitem.Standby.Equal(v(from.StandbyGone)))
		}
		owners = owners.Or(sessionitem.LeaseOwner.Equal(v(from.Prev.Owner)).And(sessionitem.LeaseEpoch.Equal(v(from.Prev.Epoch)), free))
	}
	if g := from.Given; g != nil {
		// Its owner chose the receiver: the standby stays (kept below)
		// unless the receiver is the standby.
		owners = owners.Or(sessionitem.LeaseOwner.Equal(v(g.Token.Owner)).And(sessionitem.LeaseEpoch.Equal(v(g.Token.Epoch)),
			sessionitem.TenureKey.Equal(v(lease.TenureKeyOf(g.Secret)))))
	}
	reserved := expression.AttributeNotExists(sessionitem.HandoffTo).Or(sessionitem.HandoffTo.Equal(v(owner)))
	if from.Bypass != "" {
		reserved = reserved.Or(sessionitem.HandoffTo.Equal(v(from.Bypass)))
	}
	c := expression.AttributeExists(sessionitem.Pk).
		And(sessionitem.DesiredState.Equal(v(schema.StateStarted)), notFailed(), owners, reserved)
	if from.Standby != nil { // lease.CanAcquire's promotable
		c = c.And(sessionitem.StandbyEpoch.Equal(v(from.Standby.Epoch)), sessionitem.Standby.Equal(v(owner)).
			Or(expression.AttributeNotExists(sessionitem.Standby).And(sessionitem.LeaseOwner.Equal(v(owner)))))
	}
	// takeover: the session is owned by another worker.
	takeover := expression.AttributeExists(sessionitem.LeaseOwner).And(sessionitem.LeaseOwner.NotEqual(v(owner)))
	u := expression.Set(sessionitem.LeaseOwner, v(owner)).Add(sessionitem.LeaseEpoch, v(1)).
		Remove(sessionitem.UnownedShard).Remove(sessionitem.HandoffTo).Remove(sessionitem.HandoffAtMs)
	if seq := lease.GivenSeq(from); seq != lease.NoSeq {
		c, u = c.And(releaseForward(seq)), u.Set(sessionitem.ReleaseSeq, v(seq))
	}
	if from.Key != "" {
		u = u.Set(sessionitem.TenureKey, v(from.Key))
	} else {
		u = u.Remove(sessionitem.TenureKey)
	}
	if drops {
		dropped := sessionitem.Standby.Equal(v(owner))
		if from.StandbyGone != "" {
			dropped = dropped.Or(takeover.And(sessionitem.Standby.Equal(v(from.StandbyGone))))
		}
		return c.And(dropped), u.Remove(sessionitem.Standby)
	}
	kept := sessionitem.Standby.NotEqual(v(owner))
	if from.StandbyGone != "" {
		kept = kept.And(expression.AttributeNotExists(sessionitem.LeaseOwner).
			Or(sessionitem.LeaseOwner.Equal(v(owner)), sessionitem.Standby.NotEqual(v(from.StandbyGone))))
	}
	return c.And(expression.AttributeNotExists(sessionitem.Standby).Or(kept)), u
}

// specAttempts bounds the reads of a session whose spec item was
// superseded (and deleted) between the session's read and the spec's.
const specAttempts = 4

// specOf is the configuration session item r names: its inline spec (an
// item an older ingest wrote; an inline spec is newer than a ref beside it,
// which only an older ingest's start over a newer one's item leaves), or
// its spec item's, read consistently and metered under op. ok is false when
// the spec item is gone: ingest superseded and deleted it, so the session
// now names a newer one.
func (s *Store) specOf(ctx context.Context, op, id string, r sessionitem.Item) (stored string, ok bool, err error) {
	if r.Spec != "" || r.SpecRef == "" {
		return r.Spec, true, nil
	}
	m := s.meters[op]
	m.reads.Add(1)
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: sessionitem.Key(schema.SpecKey(id, r.SpecRef)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return "", false, fmt.Errorf("read spec %s: %w", r.SpecRef, edge(err))
	}
	m.readHalves.Add(2 * ConsistentReadUnits(ItemSize(out.Item)))
	if len(out.Item) == 0 {
		return "", false, nil
	}
	sp, err := sessionitem.DecodeSpec(out.Item)
	if err != nil {
		return "", false, err
	}
	return sp.Spec, true, nil
}

// acquiredSpec fills it, the session an acquire wrote (raw: the item
// after), with its configuration. When ingest superseded the spec item
// meanwhile, the session is re-read and it takes the newer configuration
// with its generation and checkpoint interval (the start that wrote it put
// its entry in the owner's mailbox: the owner re-reads it anyway). known
// is the configuration the acquirer has (lease.From.Spec): when the
// session's ref names the same content, nothing is read.
func (s *Store) acquiredSpec(ctx context.Context, it *lease.Item, raw map[string]types.AttributeValue, known string) error {
	r, err := sessionitem.Decode(raw)
	if err != nil {
		return err
	}
	if known != "" && r.Spec == "" && r.SpecRef != "" && sessionitem.HashOfRef(r.SpecRef) == sessionitem.SpecHash(known) {
		it.Spec = known
		return nil
	}
	for attempt := 1; ; attempt++ {
		stored, ok, err := s.specOf(ctx, OpAcquire, it.ConnectionID, r)
		if err != nil {
			return err
		}
		if ok {
			it.Spec = stored
			return nil
		}
		if attempt == specAttempts {
			return fmt.Errorf("spec superseded %d times while read", attempt)
		}
		cur, err := s.read(ctx, OpAcquire, it.ConnectionID)
		if err != nil {
			return err
		}
		if cur == nil {
			return lease.ErrNotFound
		}
		if r, err = sessionitem.Decode(cur); err != nil {
			return err
		}
		if r.Generation != nil {
			it.Generation = *r.Generation
		}
		it.CheckpointEvery = time.Duration(r.CheckpointEveryMs) * time.Millisecond
	}
}
