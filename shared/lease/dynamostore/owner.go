package dynamostore

// The owner's writes on its session (checkpoint, release, hand-off, fail,
// note) and a reconciler's disown.

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
)

// owned is the condition that t is still the session's tenure.
func owned(t lease.Token) expression.ConditionBuilder {
	return sessionitem.LeaseOwner.Equal(v(t.Owner)).And(sessionitem.LeaseEpoch.Equal(v(t.Epoch)))
}

// notFailed is the condition that the session is not FAILED at its generation.
func notFailed() expression.ConditionBuilder {
	return expression.AttributeNotExists(sessionitem.FailedGeneration).Or(sessionitem.FailedGeneration.NotEqual(sessionitem.Generation))
}

// Checkpoint implements lease.Store: one write of the session item's
// last_seq, conditional on t's tenure (owner and epoch) and forward only.
// No index projects last_seq, so it moves no index entry: 1 write unit
// while the session item is below 1 KB (its spec is in its own item).
func (s *Store) Checkpoint(ctx context.Context, t lease.Token, lastSeq int64) error {
	if lastSeq == lease.NoSeq {
		return nil
	}
	if err := s.checkpoint(ctx, t, lastSeq); err != nil {
		return fmt.Errorf("checkpoint %s: %w", t, err)
	}
	return nil
}

func (s *Store) checkpoint(ctx context.Context, t lease.Token, lastSeq int64) error {
	c := owned(t).And(expression.AttributeNotExists(sessionitem.LastSeq).Or(sessionitem.LastSeq.LessThanEqual(v(lastSeq))))
	old, failed, err := s.update(ctx, OpCheckpoint, t.ConnectionID, expression.Set(sessionitem.LastSeq, v(lastSeq)), c, types.ReturnValueAllOld)
	if err != nil {
		return err
	}
	if failed {
		if old == nil {
			return lease.ErrLeaseLost
		}
		r, err := sessionitem.Decode(old)
		if err != nil {
			return err
		}
		// Classified on the stored last_seq itself, not the resume point
		// (which release_seq may raise): the condition named only it.
		return lease.ClassifyOwnerWrite(nil, func(*lease.Item) error {
			return lease.CanCheckpoint(r.LeaseOwner, r.LeaseEpoch, seqOf(r.LastSeq), t, lastSeq)
		})
	}
	s.meters[OpCheckpoint].wrote(old, with(old, map[string]types.AttributeValue{schema.AttrLastSeq: num(lastSeq)}))
	return nil
}

// ownerWrite is a write of t's session under owned(t) and extra: the item
// after is the item before with set and remove applied. classify explains a
// failed condition from the item read after it.
func (s *Store) ownerWrite(ctx context.Context, op string, t lease.Token, u expression.UpdateBuilder, extra *expression.ConditionBuilder,
	set map[string]types.AttributeValue, remove []string, classify func(*lease.Item) error) error {
	c := owned(t)
	if extra != nil {
		c = c.And(*extra)
	}
	old, failed, err := s.update(ctx, op, t.ConnectionID, u, c, types.ReturnValueAllOld)
	if err != nil {
		return err
	}
	if failed {
		it, err := session(old)
		if err != nil {
			return err
		}
		return lease.ClassifyOwnerWrite(it, classify)
	}
	s.meters[op].wrote(old, with(old, set, remove...))
	return nil
}

// errRetry marks a release variant whose condition failed while the item,
// read after it, calls for the other variant.
var errRetry = errors.New("release: the session changed state; retry the other variant")

// errReleased marks a release whose condition failed on a session that
// shows the tenure already released (lease.Released): the SDK retried an
// attempt that was applied. The release is done.
var errReleased = errors.New("release: already applied")

// Release implements lease.Store: the final checkpoint, then the session
// without owner. While the session is STARTED and not FAILED it goes back to
// the by_unowned index; otherwise (stopped, failed) only the owner goes. The
// two variants are conditional on the state they assume; a start or stop
// landing in between sends the release to the other one (bounded).
func (s *Store) Release(ctx context.Context, t lease.Token, lastSeq int64) error {
	return s.release(ctx, OpRelease, t, lastSeq, "", 0)
}

// Handoff implements lease.Store: a Release whose STARTED variant also
// reserves the session for worker to.
func (s *Store) Handoff(ctx context.Context, t lease.Token, lastSeq int64, to string, atMs int64) error {
	return s.release(ctx, OpHandoff, t, lastSeq, to, atMs)
}

// The final checkpoint rides on the session write as release_seq (never
// below one stored), so ending a tenure is one write.
func (s *Store) release(ctx context.Context, op string, t lease.Token, lastSeq int64, to string, atMs int64) error {
	shard := schema.UnownedShardOf(t.ConnectionID)
	startedU := expression.Remove(sessionitem.LeaseOwner).Set(sessionitem.UnownedShard, v(shard))
	stoppedU := expression.Remove(sessionitem.LeaseOwner)
	startedSet := map[string]types.AttributeValue{schema.AttrUnownedShard: str(shard)}
	var stoppedSet map[string]types.AttributeValue
	if to != "" {
		startedU = startedU.Set(sessionitem.HandoffTo, v(to)).Set(sessionitem.HandoffAtMs, v(atMs))
		startedSet[schema.AttrHandoffTo], startedSet[schema.AttrHandoffAtMs] = str(to), num(atMs)
	}
	startedOK := sessionitem.DesiredState.Equal(v(schema.StateStarted)).And(notFailed())
	notStarted := sessionitem.DesiredState.NotEqual(v(schema.StateStarted)).Or(sessionitem.FailedGeneration.Equal(sessionitem.Generation))
	if lastSeq != lease.NoSeq {
		startedU, stoppedU = startedU.Set(sessionitem.ReleaseSeq, v(lastSeq)), stoppedU.Set(sessionitem.ReleaseSeq, v(lastSeq))
		startedSet[schema.AttrReleaseSeq] = num(lastSeq)
		stoppedSet = map[string]types.AttributeValue{schema.AttrReleaseSeq: num(lastSeq)}
		forward := releaseForward(lastSeq)
		startedOK, notStarted = startedOK.And(forward), notStarted.And(forward)
	}
	var err error
	stoppedFirst := s.hints.Take(t.ConnectionID)
	for attempt := 0; attempt < 4; attempt++ {
		if stoppedFirst && attempt == 0 {
			err = errRetry // the session was last seen not STARTED: its variant first
		} else {
			err = s.ownerWrite(ctx, op, t, startedU, &startedOK, startedSet, []string{schema.AttrLeaseOwner},
				func(it *lease.Item) error {
					if lease.Released(it, t, lastSeq, to) {
						return errReleased
					}
					if err := lease.CanRelease(it, t, lastSeq); err != nil {
						return err
					}
					if it.DesiredState != schema.StateStarted || it.Failed() {
						return errRetry
					}
					return nil
				})
		}
		if !errors.Is(err, errRetry) {
			break
		}
		err = s.ownerWrite(ctx, op, t, stoppedU, &notStarted,
			stoppedSet, []string{schema.AttrLeaseOwner},
			func(it *lease.Item) error {
				if lease.Released(it, t, lastSeq, to) {
					return errReleased
				}
				if err := lease.CanRelease(it, t, lastSeq); err != nil {
					return err
				}
				if it.DesiredState == schema.StateStarted && !it.Failed() {
					return errRetry
				}
				return nil
			})
		if !errors.Is(err, errRetry) {
			break
		}
	}
	if err != nil && !errors.Is(err, errReleased) {
		return fmt.Errorf("release %s: %w", t, err)
	}
	return nil
}

// Fail implements lease.Store: one write, the session without owner,
// FAILED at gen (not in by_unowned), with the final checkpoint as
// release_seq.
func (s *Store) Fail(ctx context.Context, t lease.Token, gen, lastSeq int64, reason string, atMs int64) error {
	u := expression.Remove(sessionitem.LeaseOwner).
		Set(sessionitem.FailedGeneration, v(gen)).
		Set(sessionitem.LastError, v(reason)).
		Set(sessionitem.LastErrorAtMs, v(atMs)).
		Set(sessionitem.LastErrorGen, v(gen)).
		Set(sessionitem.LastErrorEpoch, v(t.Epoch))
	c := sessionitem.Generation.Equal(v(gen))
	set := map[string]types.AttributeValue{schema.AttrFailedGeneration: num(gen), schema.AttrLastError: str(reason), schema.AttrLastErrorAtMs: num(atMs),
		schema.AttrLastErrorGen: num(gen), schema.AttrLastErrorEpoch: num(t.Epoch)}
	if lastSeq != lease.NoSeq {
		u = u.Set(sessionitem.ReleaseSeq, v(lastSeq))
		c = c.And(releaseForward(lastSeq))
		set[schema.AttrReleaseSeq] = num(lastSeq)
	}
	err := s.ownerWrite(ctx, OpFail, t, u, &c, set,
		[]string{schema.AttrLeaseOwner},
		func(it *lease.Item) error {
			if lease.FailedAs(it, t, gen, lastSeq, reason, atMs) {
				return errReleased // the SDK's retry of an attempt that was applied
			}
			return lease.CanFail(it, t, gen, lastSeq)
		})
	if err != nil && !errors.Is(err, errReleased) {
		return fmt.Errorf("fail %s: %w", t, err)
	}
	return nil
}

// releaseForward is the condition that release_seq does not go below lastSeq.
func releaseForward(lastSeq int64) expression.ConditionBuilder {
	return expression.AttributeNotExists(sessionitem.ReleaseSeq).Or(sessionitem.ReleaseSeq.LessThanEqual(v(lastSeq)))
}

// NoteError implements lease.Store.
func (s *Store) NoteError(ctx context.Context, t lease.Token, gen int64, reason string, atMs int64) error {
	u := expression.Set(sessionitem.LastError, v(reason)).Set(sessionitem.LastErrorAtMs, v(atMs)).
		Set(sessionitem.LastErrorGen, v(gen)).Set(sessionitem.LastErrorEpoch, v(t.Epoch))
	err := s.ownerWrite(ctx, OpNoteError, t, u, nil,
		map[string]types.AttributeValue{schema.AttrLastError: str(reason), schema.AttrLastErrorAtMs: num(atMs),
			schema.AttrLastErrorGen: num(gen), schema.AttrLastErrorEpoch: num(t.Epoch)}, nil,
		func(it *lease.Item) error { return lease.CanOwnerWrite(it, t) })
	if err != nil {
		return fmt.Errorf("note error %s: %w", t, err)
	}
	return nil
}

// Disown implements lease.Store: one conditional write on the session item
// (lease_owner and lease_epoch still t's, desired_state not STARTED) that
// removes lease_owner. Billed on the item's size (1 write unit: the
// configuration is in its spec item) plus the by_owner entry's delete (1); nothing else indexed moves
// (a STOPPED session is in no by_unowned, and by_state keys on
// desired_state). A failed condition costs the same units and a consistent
// read to classify it.
func (s *Store) Disown(ctx context.Context, t lease.Token) error {
	c := sessionitem.DesiredState.NotEqual(v(schema.StateStarted))
	err := s.ownerWrite(ctx, OpDisown, t, expression.Remove(sessionitem.LeaseOwner), &c, nil,
		[]string{schema.AttrLeaseOwner},
		func(it *lease.Item) error {
			if lease.Disowned(it, t) {
				return errReleased // the SDK's retry of an attempt that was applied
			}
			return lease.CanDisown(it, t)
		})
	if err != nil && !errors.Is(err, errReleased) {
		return fmt.Errorf("disown %s: %w", t, err)
	}
	return nil
}
