package simddb

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
	"github.com/wsfleet/wsfleet/testkit/ddbrules"
)

// The lease.Store methods. Each applies the memory store's rules and bills
// the DynamoDB requests dynamostore sends for the call (its doc and
// store.go): a conditional write of the item; when the condition fails, the
// write billed at the item's size and the consistent GetItem that
// classifies it; when that read shows the call already applied (an
// earlier attempt's), success after both. An acquire is the session's
// write (the checkpoint is on the session item); a release of a session that
// is not STARTED first tries (and fails) the STARTED variant.

// ownerWrite bills a call that writes one item: the write, or, when the
// rules refused it (err) or found it applied already (applied: an earlier
// attempt's, which dynamostore learns from a failed condition and its
// read), the refused write and its read.
func (p *plan) ownerWrite(op string, im *image, err error, applied bool) {
	switch {
	case err != nil || applied:
		p.refused(op, im.key, im.before)
	default:
		p.write(op, im.key, im.before, im.after)
	}
}

// update is a call that is one conditional UpdateItem on im's item (most
// lease.Store writes): apply runs it on the memory store; applied, read
// after the call, says whether an error-free outcome was an earlier
// attempt's (then billed as the refused write and its read).
func (s *Store) update(ctx context.Context, op string, im *image, apply func() error, applied func() bool) error {
	return s.call(ctx, op, "UpdateItem", im.key, im, apply, func(p *plan, _ time.Time, err error) {
		p.ownerWrite("UpdateItem", im, err, applied())
	}, false)
}

// never is update's applied for writes a retry cannot find applied.
func never() bool { return false }

// Register implements lease.Store (PutItem if no record has the id).
func (s *Store) Register(ctx context.Context, rec lease.WorkerRecord) error {
	if rec.State == "" {
		rec.State = schema.WorkerAlive
	}
	if rec.List == "" {
		rec.List = schema.WorkerListAlive
	}
	im := workerImage(rec.ID)
	err := s.call(ctx, dynamostore.OpRegister, "PutItem", im.key, im, func() error { return s.mem.Register(ctx, rec) },
		func(p *plan, _ time.Time, err error) { p.ownerWrite("PutItem", im, err, im.w0 != nil) }, false)
	if err != nil {
		return fmt.Errorf("register %s: %w", rec.ID, err)
	}
	return nil
}

// Heartbeat implements lease.Store.
func (s *Store) Heartbeat(ctx context.Context, id string, epoch int64, hb lease.Heartbeat) (lease.WorkerRecord, error) {
	var out lease.WorkerRecord
	im := workerImage(id)
	err := s.call(ctx, dynamostore.OpHeartbeat, "UpdateItem", im.key, im, func() (err error) {
		out, err = s.mem.Heartbeat(ctx, id, epoch, hb)
		return err
	}, func(p *plan, _ time.Time, err error) {
		p.ownerWrite("UpdateItem", im, err, im.w0 != nil && lease.HeartbeatApplied(im.w0, epoch, hb))
	}, false)
	if err != nil {
		return lease.WorkerRecord{}, fmt.Errorf("heartbeat %s: %w", id, err)
	}
	return out, nil
}

// DeclareDead implements lease.Store.
func (s *Store) DeclareDead(ctx context.Context, id string, epoch, seenSeq int64, by string, atMs int64) error {
	im := workerImage(id)
	err := s.update(ctx, dynamostore.OpDeclareDead, im, func() error { return s.mem.DeclareDead(ctx, id, epoch, seenSeq, by, atMs) }, func() bool { return lease.DeclaredDeadAs(im.w0, epoch, seenSeq, by, atMs) })
	if err != nil {
		return fmt.Errorf("declare %s dead: %w", id, err)
	}
	return nil
}

// Leave implements lease.Store.
func (s *Store) Leave(ctx context.Context, id string, epoch int64, list string, atMs int64) error {
	im := workerImage(id)
	err := s.update(ctx, dynamostore.OpLeave, im, func() error { return s.mem.Leave(ctx, id, epoch, list, atMs) }, func() bool { return lease.CanLeave(im.w0, epoch) != nil })
	if err != nil {
		return fmt.Errorf("leave %s: %w", id, err)
	}
	return nil
}

// MarkDone implements lease.Store.
func (s *Store) MarkDone(ctx context.Context, id string) error {
	im := workerImage(id)
	err := s.update(ctx, dynamostore.OpMarkDone, im, func() error { return s.mem.MarkDone(ctx, id) }, never)
	if err != nil {
		return fmt.Errorf("mark %s done: %w", id, err)
	}
	return nil
}

// GetWorker implements lease.Store (a consistent GetItem).
func (s *Store) GetWorker(ctx context.Context, id string) (lease.WorkerRecord, error) {
	var out lease.WorkerRecord
	err := s.call(ctx, dynamostore.OpGetWorker, "GetItem", id, nil, func() (err error) {
		out, err = s.mem.GetWorker(ctx, id)
		return err
	}, func(p *plan, _ time.Time, _ error) {
		p.get(schema.WorkerKey(id), workerItem(s.mem.Worker(id)), true)
	}, false)
	if err != nil {
		return lease.WorkerRecord{}, fmt.Errorf("get worker %s: %w", id, err)
	}
	return out, nil
}

// GetWorkers implements lease.Store (eventually consistent BatchGetItems
// of 100 keys, each key billed; answered from the table as it is now: the
// base table's eventually consistent reads are not modelled as stale).
func (s *Store) GetWorkers(ctx context.Context, ids []string) ([]lease.WorkerRecord, error) {
	var out []lease.WorkerRecord
	err := s.call(ctx, dynamostore.OpGetWorkers, "BatchGetItem", strings.Join(ids, ","), nil, func() (err error) {
		out, err = s.mem.GetWorkers(ctx, ids)
		return err
	}, func(p *plan, _ time.Time, _ error) {
		for i, id := range ids {
			p.get(schema.WorkerKey(id), workerItem(s.mem.Worker(id)), false)
			if i%100 != 0 {
				p.reqs[len(p.reqs)-1].op = "" // a key of the same BatchGetItem
			}
		}
	}, false)
	if err != nil {
		return nil, fmt.Errorf("get workers: %w", err)
	}
	return out, nil
}

// ListWorkers implements lease.Store: a Query of by_worker_list, answered
// by that index's lagging view.
func (s *Store) ListWorkers(ctx context.Context, list string, limit int) ([]string, error) {
	out, err := query(s, ctx, dynamostore.OpListWorkers, list, func(p *plan, now time.Time) []string {
		var ids []string
		value := "S:" + list
		for _, e := range p.query(schema.IndexByWorkerList, value, s.views[schema.IndexByWorkerList].entries(now, value), limit, 0) {
			ids = append(ids, strings.TrimPrefix(pkOf(e), schema.WorkerKeyPrefix))
		}
		return ids
	})
	if err != nil {
		return nil, fmt.Errorf("list workers %s: %w", list, err)
	}
	return out, nil
}

// Acquire implements lease.Store: the session's write (which fences the
// checkpoint on it), then the read of its spec item unless the acquirer
// has that configuration.
func (s *Store) Acquire(ctx context.Context, id, owner string, from lease.From) (lease.Item, error) {
	var out lease.Item
	im := sessionImage(id)
	err := s.call(ctx, dynamostore.OpAcquire, "UpdateItem", im.key, im, func() (err error) {
		out, err = s.mem.Acquire(ctx, id, owner, from)
		return err
	}, func(p *plan, _ time.Time, err error) {
		written := im.s0 != nil && im.s1 != nil && (im.s0.Epoch != im.s1.Epoch || im.s0.Owner != im.s1.Owner)
		if !written {
			p.refused("UpdateItem", id, im.before)
			return
		}
		if lease.AcquireDropsStandby(im.s0, owner, from) != dynamostore.AcquireDropsFirst(from) {
			p.refused("UpdateItem", id, im.before) // dynamostore's other variant first
		}
		p.write("UpdateItem", id, im.before, im.after)
		sp, key := specItem(im.s1)
		if sp != nil && from.Spec == im.s1.Spec {
			sp = nil // the acquirer has it (dynamostore reads nothing)
		}
		if sp != nil {
			p.get(key, sp, true) // the acquired session's configuration
		}
	}, false)
	if err != nil {
		return lease.Item{}, fmt.Errorf("acquire %s: %w", id, err)
	}
	return out, nil
}

// Checkpoint implements lease.Store: one write of the session item's
// last_seq.
func (s *Store) Checkpoint(ctx context.Context, t lease.Token, lastSeq int64) error {
	if lastSeq == lease.NoSeq {
		return nil
	}
	im := sessionImage(t.ConnectionID)
	err := s.update(ctx, dynamostore.OpCheckpoint, im, func() error { return s.mem.Checkpoint(ctx, t, lastSeq) }, never)
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", t, err)
	}
	return nil
}

// Release implements lease.Store.
func (s *Store) Release(ctx context.Context, t lease.Token, lastSeq int64) error {
	return s.release(ctx, dynamostore.OpRelease, t, lastSeq, "", 0)
}

// Handoff implements lease.Store.
func (s *Store) Handoff(ctx context.Context, t lease.Token, lastSeq int64, to string, atMs int64) error {
	return s.release(ctx, dynamostore.OpHandoff, t, lastSeq, to, atMs)
}

func (s *Store) release(ctx context.Context, op string, t lease.Token, lastSeq int64, to string, atMs int64) error {
	stoppedFirst := s.hints.Take(t.ConnectionID)
	im := sessionImage(t.ConnectionID)
	err := s.call(ctx, op, "UpdateItem", im.key, im, func() error {
		if to == "" {
			return s.mem.Release(ctx, t, lastSeq)
		}
		return s.mem.Handoff(ctx, t, lastSeq, to, atMs)
	}, func(p *plan, _ time.Time, err error) {
		if err != nil || lease.Released(im.s0, t, lastSeq, to) {
			p.refused("UpdateItem", im.key, im.before)
			return
		}
		if notStarted := im.s0.DesiredState != schema.StateStarted || im.s0.Failed(); notStarted != stoppedFirst {
			p.refused("UpdateItem", im.key, im.before) // the other variant first (dynamostore's hint)
		}
		p.write("UpdateItem", im.key, im.before, im.after)
	}, false)
	if err != nil {
		return fmt.Errorf("release %s: %w", t, err)
	}
	return nil
}

// Fail implements lease.Store.
func (s *Store) Fail(ctx context.Context, t lease.Token, gen, lastSeq int64, reason string, atMs int64) error {
	im := sessionImage(t.ConnectionID)
	err := s.update(ctx, dynamostore.OpFail, im, func() error { return s.mem.Fail(ctx, t, gen, lastSeq, reason, atMs) }, func() bool { return lease.FailedAs(im.s0, t, gen, lastSeq, reason, atMs) })
	if err != nil {
		return fmt.Errorf("fail %s: %w", t, err)
	}
	return nil
}

// Disown implements lease.Store.
func (s *Store) Disown(ctx context.Context, t lease.Token) error {
	im := sessionImage(t.ConnectionID)
	err := s.update(ctx, dynamostore.OpDisown, im, func() error { return s.mem.Disown(ctx, t) }, func() bool { return lease.Disowned(im.s0, t) })
	if err != nil {
		return fmt.Errorf("disown %s: %w", t, err)
	}
	return nil
}

// NoteError implements lease.Store.
func (s *Store) NoteError(ctx context.Context, t lease.Token, gen int64, reason string, atMs int64) error {
	im := sessionImage(t.ConnectionID)
	err := s.update(ctx, dynamostore.OpNoteError, im, func() error { return s.mem.NoteError(ctx, t, gen, reason, atMs) }, never)
	if err != nil {
		return fmt.Errorf("note error %s: %w", t, err)
	}
	return nil
}

// AssignStandby implements lease.Store: one conditional write of the
// session item.
func (s *Store) AssignStandby(ctx context.Context, id, worker string, gen int64, prev *lease.StandbyToken) (lease.Item, error) {
	var out lease.Item
	im := sessionImage(id)
	err := s.update(ctx, dynamostore.OpAssignStandby, im, func() (err error) {
		out, err = s.mem.AssignStandby(ctx, id, worker, gen, prev)
		return err
	}, never)
	if err != nil {
		return lease.Item{}, fmt.Errorf("assign standby %s to %s: %w", id, worker, err)
	}
	return out, nil
}

// DropStandby implements lease.Store: one conditional write of the session
// item.
func (s *Store) DropStandby(ctx context.Context, t lease.StandbyToken, refusedGen int64, reason string, atMs int64) error {
	im := sessionImage(t.ConnectionID)
	err := s.update(ctx, dynamostore.OpDropStandby, im, func() error { return s.mem.DropStandby(ctx, t, refusedGen, reason, atMs) }, never)
	if err != nil {
		return fmt.Errorf("drop standby %s: %w", t, err)
	}
	return nil
}

// Get implements lease.Store: one consistent GetItem of the session item,
// then one of the spec item it names.
func (s *Store) Get(ctx context.Context, id string) (lease.Item, error) {
	return s.get(ctx, id, true)
}

// GetHead implements lease.HeadReader as dynamostore's: one consistent
// GetItem of the session item, not of its spec item; Spec empty.
func (s *Store) GetHead(ctx context.Context, id string) (lease.Item, error) {
	return s.get(ctx, id, false)
}

// get is Get (withSpec) or GetHead.
func (s *Store) get(ctx context.Context, id string, withSpec bool) (lease.Item, error) {
	read := s.mem.GetHead
	if withSpec {
		read = s.mem.Get
	}
	var out lease.Item
	err := s.call(ctx, dynamostore.OpGet, "GetItem", id, nil, func() (err error) {
		out, err = read(ctx, id)
		return err
	}, func(p *plan, _ time.Time, _ error) {
		it := s.mem.Session(id)
		p.get(id, sessionItem(it), true)
		if sp, key := specItem(it); withSpec && sp != nil {
			p.get(key, sp, true) // then the spec item the session names
		}
	}, false)
	if err != nil {
		return lease.Item{}, fmt.Errorf("get %s: %w", id, err)
	}
	s.hints.Note(id, out.DesiredState == schema.StateStarted && !out.Failed())
	return out, nil
}

// Unowned implements lease.Store: Queries of the by_unowned shards (limit
// 0: all), from a rotating shard as dynamostore's, answered by the index's
// lagging view.
func (s *Store) Unowned(ctx context.Context, limit int) ([]string, error) {
	out, err := query(s, ctx, dynamostore.OpUnowned, "", func(p *plan, now time.Time) []string {
		var ids []string
		first := int(s.shard.Add(1)) % schema.IndexShards
		v := s.views[schema.IndexByUnowned]
		for i := range schema.IndexShards {
			if limit > 0 && len(ids) >= limit {
				break
			}
			value := "S:" + schema.UnownedShardKey((first+i)%schema.IndexShards)
			for _, e := range p.query(schema.IndexByUnowned, value, v.entries(now, value), limit, len(ids)) {
				ids = append(ids, pkOf(e))
			}
		}
		return ids
	})
	if err != nil {
		return nil, fmt.Errorf("unowned: %w", err)
	}
	return out, nil
}

// OwnedBy implements lease.Store: a Query of by_owner, answered by the
// index's lagging view.
func (s *Store) OwnedBy(ctx context.Context, owner string, limit int) ([]lease.Owned, error) {
	type answer struct {
		owned []lease.Owned
		err   error // an entry that does not decode
	}
	out, err := query(s, ctx, dynamostore.OpOwnedBy, owner, func(p *plan, now time.Time) (a answer) {
		value := "S:" + owner
		for _, e := range p.query(schema.IndexByOwner, value, s.views[schema.IndexByOwner].entries(now, value), limit, 0) {
			r, err := sessionitem.Decode(e)
			if err != nil {
				return answer{err: err}
			}
			o := lease.Owned{Token: lease.Token{ConnectionID: r.ConnectionID, Owner: r.LeaseOwner, Epoch: r.LeaseEpoch}, DesiredState: r.DesiredState}
			if r.Generation != nil {
				o.Generation = *r.Generation
			}
			a.owned = append(a.owned, o)
		}
		return a
	})
	if err == nil {
		err = out.err
	}
	if err != nil {
		return nil, fmt.Errorf("owned by %s: %w", owner, err)
	}
	return out.owned, nil
}

func pkOf(e ddbrules.Item) string {
	r, _ := ddbrules.Canon(e[schema.AttrPk])
	return strings.TrimPrefix(r, "S:")
}

// --- the harness's writes (ingest's, in production) ---

// Put writes a whole session (the session item, its LastSeq as last_seq)
// as ingest seeds it: metered under OpSeed, charged to
// the buckets, never throttled, and sent to the indexes after their lag.
func (s *Store) Put(it lease.Item) {
	im := sessionImage(it.ConnectionID)
	_ = s.call(context.Background(), OpSeed, "", im.key, im, func() error { s.mem.Put(it); return nil }, func(p *plan, _ time.Time, _ error) {
		p.reqs = append(p.reqs, request{op: "PutItem", key: im.key, write: true, units: ddbrules.WriteUnits(sizeOf(im.after)), entries: s.table.IndexWrites(im.before, im.after)})
		if sp, key := specItem(im.s1); sp != nil {
			// Its spec item, billed; the seed's latency is its session
			// write's (the bench seeds both in one BatchWriteItem), so that
			// the harness's writes take the time they took before.
			p.write("", key, nil, sp)
		}
	}, true)
}

// Update changes session id under the rules' lock, as ingest's write does
// (a stop, a start): metered under OpIngest, never throttled.
func (s *Store) Update(id string, f func(*lease.Item)) {
	im := sessionImage(id)
	_ = s.call(context.Background(), OpIngest, "", im.key, im, func() error { s.mem.Update(id, f); return nil }, func(p *plan, _ time.Time, _ error) {
		// A new configuration (not a restart of the same one, which keeps
		// its spec item): its spec item first, the superseded one deleted
		// after.
		spB, keyB := specItem(im.s0)
		spA, keyA := specItem(im.s1)
		changed := im.s0 != nil && im.s1 != nil && im.s0.Spec != im.s1.Spec
		if changed && spA != nil {
			p.write("UpdateItem", keyA, nil, spA)
		}
		if !ddbrules.SameItem(im.before, im.after) {
			p.write("UpdateItem", id, im.before, im.after)
		}
		if changed && spB != nil {
			p.write("DeleteItem", keyB, spB, nil)
		}
	}, true)
}

// UpdateWorker changes worker id's record as ingest's mailbox write does:
// metered under OpIngest, never throttled.
func (s *Store) UpdateWorker(id string, f func(*lease.WorkerRecord)) {
	im := workerImage(id)
	_ = s.call(context.Background(), OpIngest, "", im.key, im, func() error { s.mem.UpdateWorker(id, f); return nil }, func(p *plan, _ time.Time, _ error) {
		if !ddbrules.SameItem(im.before, im.after) {
			p.write("UpdateItem", im.key, im.before, im.after)
		}
	}, true)
}

// ExpireWorker deletes worker id's record, as the table's TTL does (TTL
// deletes cost no write units).
func (s *Store) ExpireWorker(id string) {
	im := workerImage(id)
	_ = s.call(context.Background(), OpIngest, "", im.key, im, func() error { s.mem.ExpireWorker(id); return nil }, func(*plan, time.Time, error) {}, true)
}

var _ lease.Store = (*Store)(nil)
