package sessions

// The writes: a start (create, replace, restart) and a stop, each one
// conditional UpdateItem retried on a conflict, and the owner's mailbox
// entry.

import (
	"context"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
)

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
	res.OwnerNotified, res.MailboxErr = s.mail(ctx, owner, id, res.Generation, state)
}

// tellStop tells a stop to the session's owner and to its standby's worker
// (standby "": none) at once: two conditional writes in parallel, so a
// standby session's stop waits one round trip for them, not two.
func (s *Store) tellStop(ctx context.Context, res *Result, owner, standby, id string) {
	if standby == "" {
		s.tellOwner(ctx, res, owner, id, schema.StateStopped)
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { s.tellOwner(ctx, res, owner, id, schema.StateStopped) }) // its fields of res only
	s.tellStandby(ctx, res, standby, id)
	wg.Wait()
}

// tellStandby puts a stop's entry in the mailbox of standby, the worker
// holding the session's hot standby ("": none), as tellOwner does in the
// owner's: the standby's connection closes at that worker's next
// heartbeat, whether or not the owner still knows its standby (a directed
// hand-off in flight, an owner cut off from DynamoDB or dead); without it
// the standby's own check found the stop up to WSFLEET_STANDBY_CHECK_EVERY
// (30 s) later (a chaos run: a standby connection open 5.6 s after a stop
// was acknowledged, its session just handed off to rebalance).
func (s *Store) tellStandby(ctx context.Context, res *Result, standby, id string) {
	res.Standby = standby
	res.StandbyNotified, res.StandbyMailboxErr = s.mail(ctx, standby, id, res.Generation, schema.StateStopped)
}

// mail adds id's entry (schema.MailboxEntry) to worker's mailbox (nothing
// when worker is ""): ok once written; a worker no longer ALIVE (or whose
// record is gone) fails the condition, which is no error.
func (s *Store) mail(ctx context.Context, worker, id string, gen int64, state string) (ok bool, err error) {
	if worker == "" {
		return false, nil
	}
	in, err := sessionitem.MailboxAdd(s.table, worker, schema.MailboxEntry(id, gen, state))
	if err == nil {
		_, err = s.api.UpdateItem(ctx, in)
	}
	switch {
	case err == nil:
		return true, nil
	case isConditionFailed(err):
		return false, nil
	default:
		return false, fmt.Errorf("mailbox of %s for %s: %w", worker, id, err)
	}
}

// write is a start's desired configuration as stored.
type write struct {
	id     string
	spec   string // spec.Encode
	hash   string // sessionitem.SpecHash(spec)
	ref    string // the spec item's ref the write names
	ckptMs int64  // the spec's checkpoint interval again, for the ownership core (why: schema.AttrCheckpointEvery); 0: the worker's default
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
// next heartbeat whichever worker the queue's stop notification reaches;
// when it names a hot standby's worker, into that worker's too (tellStandby).
// A repeated stop of a session still owned tells them again (a set add:
// idempotent), in case the first stop's mailbox writes were lost.
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
			s.tellStop(ctx, &res, it.LeaseOwner, it.Standby, id)
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
			s.tellStop(ctx, &res, cur.owner, cur.standby, id)
			return res, nil
		}
	}
	return Result{}, fmt.Errorf("stop %s: %w after %d attempts", id, ErrConflict, s.maxAttempts)
}
