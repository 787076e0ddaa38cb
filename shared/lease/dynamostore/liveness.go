package dynamostore

// The liveness transitions and reads: worker records.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
)

func toRecord(w sessionitem.Worker) lease.WorkerRecord {
	mb := slices.Clone(w.Mailbox)
	slices.Sort(mb)
	return lease.WorkerRecord{
		ID: strings.TrimPrefix(w.Key, schema.WorkerKeyPrefix), State: w.State, Epoch: w.Epoch, HeartbeatSeq: w.HeartbeatSeq,
		HeartbeatAtMs: w.HeartbeatAt, TTL: time.Duration(w.TTLMs) * time.Millisecond, Load: w.Load, Capacity: w.Capacity,
		AdminAddr: w.AdminAddr, Draining: w.Draining, MovesPerMin: w.MovesPerMin,
		Mailbox: mb, List: w.List, StartedAtMs: w.StartedAtMs, EndedAtMs: w.EndedAtMs, DeclaredBy: w.DeclaredBy,
		Host: w.Host, Pid: w.Pid, BootID: w.BootID, Zone: w.Zone,
	}
}

// worker decodes a worker record read from the table (nil: absent).
func worker(m map[string]types.AttributeValue) (*lease.WorkerRecord, error) {
	if m == nil {
		return nil, nil
	}
	w, err := sessionitem.DecodeWorker(m)
	if err != nil {
		return nil, err
	}
	r := toRecord(w)
	return &r, nil
}

// Register implements lease.Store: PutItem if no record has the id. The
// record carries the process's boot id (rec.BootID; a drawn one when
// empty): when a retry of an attempt that was applied and answered with a
// timeout or nothing (the SDK's, or the worker's own) finds the record, the
// boot id tells its own registration from another process's.
func (s *Store) Register(ctx context.Context, rec lease.WorkerRecord) error {
	state, list := cmpOr(rec.State, schema.WorkerAlive), cmpOr(rec.List, schema.WorkerListAlive)
	token := cmpOr(rec.BootID, rand.Text())
	item, err := sessionitem.EncodeWorker(sessionitem.Worker{
		Key: schema.WorkerKey(rec.ID), State: state, Epoch: rec.Epoch, HeartbeatSeq: rec.HeartbeatSeq, HeartbeatAt: rec.HeartbeatAtMs,
		TTLMs: rec.TTL.Milliseconds(), Load: rec.Load, Capacity: rec.Capacity, AdminAddr: rec.AdminAddr, Mailbox: rec.Mailbox,
		List: list, StartedAtMs: rec.StartedAtMs, EndedAtMs: rec.EndedAtMs, DeclaredBy: rec.DeclaredBy, BootID: token,
		Host: rec.Host, Pid: rec.Pid, Zone: rec.Zone,
	})
	if err != nil {
		return err
	}
	e, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(sessionitem.Pk)).Build()
	if err != nil {
		return err
	}
	m := s.meters[OpRegister]
	m.writes.Add(1)
	_, err = s.client(OpRegister).PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table, Item: item, ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(),
	})
	switch {
	case err == nil:
		m.wrote(nil, item)
		return nil
	case isConditionFailed(err):
		m.failed.Add(1)
		found, err := s.read(ctx, OpRegister, schema.WorkerKey(rec.ID))
		m.wu.Add(WriteUnits(ItemSize(found)))
		if err != nil {
			return fmt.Errorf("register %s: %w", rec.ID, err)
		}
		if t, ok := found[schema.AttrBootID].(*types.AttributeValueMemberS); ok && t.Value == token {
			m.wrote(nil, item) // a retry of an attempt that was applied
			return nil
		}
		return fmt.Errorf("register %s: %w", rec.ID, lease.ErrWorkerExists)
	}
	return fmt.Errorf("register %s: %w", rec.ID, edge(err))
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Heartbeat implements lease.Store. It returns the record as written
// (ALL_NEW), so the item before is not known: its size is bounded by the
// size after plus the acknowledged mailbox entries (the counters only grow,
// so their numbers are no longer before than after).
func (s *Store) Heartbeat(ctx context.Context, id string, epoch int64, hb lease.Heartbeat) (lease.WorkerRecord, error) {
	u := expression.Set(sessionitem.HeartbeatSeq, v(hb.Seq)).
		Set(sessionitem.HeartbeatAt, v(hb.AtMs)).
		Set(sessionitem.WorkerLoad, v(hb.Load)).
		Set(sessionitem.WorkerCapacity, v(hb.Capacity)).
		Set(sessionitem.WorkerDraining, v(hb.Draining)).
		Set(sessionitem.WorkerMoves, v(hb.MovesPerMin))
	if hb.AdminAddr != "" {
		u = u.Set(sessionitem.WorkerAdminAddr, v(hb.AdminAddr))
	}
	acked := 0
	if len(hb.Ack) > 0 {
		// A string set may not hold duplicates: the request would be
		// refused, and with it the worker's liveness.
		acks := slices.Compact(slices.Sorted(slices.Values(hb.Ack)))
		u = u.Delete(sessionitem.Mailbox, v(sessionitem.StringSet(acks...)))
		for _, a := range acks {
			acked += len(a)
		}
	}
	c := sessionitem.WorkerState.Equal(v(schema.WorkerAlive)).
		And(sessionitem.WorkerEpoch.Equal(v(epoch)), sessionitem.HeartbeatSeq.LessThan(v(hb.Seq)))
	attrs, failed, err := s.update(ctx, OpHeartbeat, schema.WorkerKey(id), u, c, types.ReturnValueAllNew)
	if err != nil {
		return lease.WorkerRecord{}, fmt.Errorf("heartbeat %s: %w", id, err)
	}
	if failed {
		r, err := worker(attrs)
		if err != nil {
			return lease.WorkerRecord{}, fmt.Errorf("heartbeat %s: %w", id, err)
		}
		if lease.HeartbeatApplied(r, epoch, hb) {
			return *r, nil // the SDK's retry of an attempt that was applied
		}
		return lease.WorkerRecord{}, fmt.Errorf("heartbeat %s: %w", id, lease.ClassifyHeartbeat(r, epoch, hb.Seq))
	}
	m := s.meters[OpHeartbeat]
	m.wu.Add(WriteUnits(ItemSize(attrs) + acked)) // nothing indexed changes
	r, err := worker(attrs)
	if err != nil {
		return lease.WorkerRecord{}, fmt.Errorf("heartbeat %s: %w", id, err)
	}
	return *r, nil
}

// DeclareDead implements lease.Store.
func (s *Store) DeclareDead(ctx context.Context, id string, epoch, seenSeq int64, by string, atMs int64) error {
	expires := lease.EndedExpiresAt(atMs)
	u := expression.Set(sessionitem.WorkerState, v(schema.WorkerDead)).
		Add(sessionitem.WorkerEpoch, v(1)).
		Set(sessionitem.WorkerList, v(schema.WorkerListGone)).
		Set(sessionitem.EndedAtMs, v(atMs)).
		Set(sessionitem.DeclaredBy, v(by)).
		Set(sessionitem.ExpiresAt, v(expires))
	c := sessionitem.WorkerState.Equal(v(schema.WorkerAlive)).
		And(sessionitem.WorkerEpoch.Equal(v(epoch)), sessionitem.HeartbeatSeq.Equal(v(seenSeq)))
	old, failed, err := s.update(ctx, OpDeclareDead, schema.WorkerKey(id), u, c, types.ReturnValueAllOld)
	if err != nil {
		return fmt.Errorf("declare %s dead: %w", id, err)
	}
	if failed {
		r, err := worker(old)
		if err != nil {
			return fmt.Errorf("declare %s dead: %w", id, err)
		}
		if lease.DeclaredDeadAs(r, epoch, seenSeq, by, atMs) {
			return nil // the SDK's retry of an attempt that was applied
		}
		return fmt.Errorf("declare %s dead: %w", id, lease.ClassifyDeclareDead(r, epoch, seenSeq))
	}
	s.meters[OpDeclareDead].wrote(old, with(old, map[string]types.AttributeValue{
		schema.AttrWorkerState: str(schema.WorkerDead), schema.AttrWorkerEpoch: num(numOf(old, schema.AttrWorkerEpoch) + 1),
		schema.AttrWorkerList: str(schema.WorkerListGone), schema.AttrEndedAtMs: num(atMs), schema.AttrDeclaredBy: str(by),
		schema.AttrExpiresAt: num(expires),
	}))
	return nil
}

// Leave implements lease.Store.
func (s *Store) Leave(ctx context.Context, id string, epoch int64, list string, atMs int64) error {
	expires := lease.EndedExpiresAt(atMs)
	u := expression.Set(sessionitem.WorkerState, v(schema.WorkerLeft)).
		Set(sessionitem.WorkerList, v(list)).
		Set(sessionitem.EndedAtMs, v(atMs)).
		Set(sessionitem.ExpiresAt, v(expires))
	c := sessionitem.WorkerState.Equal(v(schema.WorkerAlive)).And(sessionitem.WorkerEpoch.Equal(v(epoch)))
	old, failed, err := s.update(ctx, OpLeave, schema.WorkerKey(id), u, c, types.ReturnValueAllOld)
	if err != nil {
		return fmt.Errorf("leave %s: %w", id, err)
	}
	if failed {
		r, err := worker(old)
		if err != nil {
			return fmt.Errorf("leave %s: %w", id, err)
		}
		if err := lease.ClassifyLeave(r, epoch); err != nil {
			return fmt.Errorf("leave %s: %w", id, err)
		}
		return nil // an earlier attempt was applied
	}
	s.meters[OpLeave].wrote(old, with(old, map[string]types.AttributeValue{
		schema.AttrWorkerState: str(schema.WorkerLeft), schema.AttrWorkerList: str(list),
		schema.AttrEndedAtMs: num(atMs), schema.AttrExpiresAt: num(expires),
	}))
	return nil
}

// GetWorker implements lease.Store.
func (s *Store) GetWorker(ctx context.Context, id string) (lease.WorkerRecord, error) {
	m, err := s.read(ctx, OpGetWorker, schema.WorkerKey(id))
	if err != nil {
		return lease.WorkerRecord{}, fmt.Errorf("get worker %s: %w", id, err)
	}
	r, err := worker(m)
	if err != nil {
		return lease.WorkerRecord{}, fmt.Errorf("get worker %s: %w", id, err)
	}
	if r == nil {
		return lease.WorkerRecord{}, fmt.Errorf("get worker %s: %w", id, lease.ErrWorkerNotFound)
	}
	return *r, nil
}

// ListWorkers implements lease.Store: a query of by_worker_list (limit 0: all).
func (s *Store) ListWorkers(ctx context.Context, list string, limit int) ([]string, error) {
	var out []string
	err := s.query(ctx, OpListWorkers, schema.IndexByWorkerList, schema.AttrWorkerList, list, limit, func(m map[string]types.AttributeValue) error {
		if k, ok := m[schema.AttrPk].(*types.AttributeValueMemberS); ok {
			out = append(out, strings.TrimPrefix(k.Value, schema.WorkerKeyPrefix))
		}
		return nil
	}, func() int { return len(out) })
	if err != nil {
		return nil, fmt.Errorf("list workers %s: %w", list, err)
	}
	return out, nil
}

// GetWorkers implements lease.Store: eventually consistent BatchGetItem
// (100 keys per request), retrying unprocessed keys.
func (s *Store) GetWorkers(ctx context.Context, ids []string) ([]lease.WorkerRecord, error) {
	var out []lease.WorkerRecord
	for start := 0; start < len(ids); start += 100 {
		keys := make([]map[string]types.AttributeValue, 0, min(100, len(ids)-start))
		for _, id := range ids[start:min(start+100, len(ids))] {
			keys = append(keys, sessionitem.Key(schema.WorkerKey(id)))
		}
		req := map[string]types.KeysAndAttributes{s.table: {Keys: keys}}
		for attempt := 0; len(req) > 0; attempt++ {
			if attempt > 0 {
				select {
				case <-ctx.Done():
					return nil, fmt.Errorf("get workers: %w", ctx.Err())
				case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
				}
			}
			res, err := s.api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			m := s.meters[OpGetWorkers]
			m.reads.Add(1)
			if err != nil {
				return nil, fmt.Errorf("get workers: %w", err)
			}
			for _, item := range res.Responses[s.table] {
				m.readHalves.Add(ConsistentReadUnits(ItemSize(item))) // eventually consistent: half a unit per 4 KB
				r, err := worker(item)
				if err != nil {
					return nil, fmt.Errorf("get workers: %w", err)
				}
				out = append(out, *r)
			}
			req = res.UnprocessedKeys
		}
	}
	return out, nil
}

// MarkDone implements lease.Store.
func (s *Store) MarkDone(ctx context.Context, id string) error {
	u := expression.Set(sessionitem.WorkerList, v(schema.WorkerListDone))
	c := expression.AttributeExists(sessionitem.Pk).And(sessionitem.WorkerState.NotEqual(v(schema.WorkerAlive)))
	old, failed, err := s.update(ctx, OpMarkDone, schema.WorkerKey(id), u, c, types.ReturnValueAllOld)
	if err != nil {
		return fmt.Errorf("mark %s done: %w", id, err)
	}
	if failed {
		r, err := worker(old)
		switch {
		case err != nil:
		case r == nil:
			err = lease.ErrWorkerNotFound
		case r.Alive():
			err = lease.ErrWorkerAlive
		default:
			err = errors.New("condition failed but the record is no longer alive (raced)")
		}
		return fmt.Errorf("mark %s done: %w", id, err)
	}
	s.meters[OpMarkDone].wrote(old, with(old, map[string]types.AttributeValue{schema.AttrWorkerList: str(schema.WorkerListDone)}))
	return nil
}
