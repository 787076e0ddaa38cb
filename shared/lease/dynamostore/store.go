package dynamostore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
)

// API is the part of the DynamoDB client the store calls.
type API interface {
	sessionitem.API
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// Request kinds, the keys of Stats and Units. A kind counts its writes, the
// consistent reads that classify its failed conditions, and its reads.
const (
	// Liveness (worker records).
	OpRegister    = "register"
	OpHeartbeat   = "heartbeat"
	OpDeclareDead = "declare_dead"
	OpLeave       = "leave"
	OpMarkDone    = "mark_done"
	// Ownership (session items).
	OpAcquire   = "acquire"
	OpRelease   = "release"
	OpHandoff   = "handoff"
	OpFail      = "fail"
	OpNoteError = "note_error"
	OpDisown    = "disown"
	// The hot standby (one write of the session item each).
	OpAssignStandby = "assign_standby"
	OpDropStandby   = "drop_standby"
	// Checkpoints (the session item's last_seq; a release or fail writes
	// its final one as release_seq, under its own kind).
	OpCheckpoint = "checkpoint"
	// Reads.
	OpGet         = "get"
	OpGetWorker   = "get_worker"
	OpGetWorkers  = "get_workers"
	OpListWorkers = "list_workers"
	OpUnowned     = "unowned"
	OpOwnedBy     = "owned_by"
	// The fleet summary (summary.go).
	OpGetSummary = "get_summary"
	OpGetMembers = "get_members"
	OpPutSummary = "put_summary"
	OpPutMembers = "put_members"
)

// Categories of the request kinds, for the cost benchmark's split.
const (
	CatLiveness   = "liveness"
	CatOwnership  = "ownership"
	CatCheckpoint = "checkpoints"
	CatReads      = "reads"
)

var allOps = map[string]string{
	OpRegister: CatLiveness, OpHeartbeat: CatLiveness, OpDeclareDead: CatLiveness, OpLeave: CatLiveness, OpMarkDone: CatLiveness,
	OpAcquire: CatOwnership, OpRelease: CatOwnership, OpHandoff: CatOwnership, OpFail: CatOwnership, OpNoteError: CatOwnership, OpDisown: CatOwnership,
	OpAssignStandby: CatOwnership, OpDropStandby: CatOwnership,
	OpCheckpoint: CatCheckpoint,
	OpGet:        CatReads, OpGetWorker: CatReads, OpGetWorkers: CatReads, OpListWorkers: CatReads, OpUnowned: CatReads, OpOwnedBy: CatReads,
	OpGetSummary: CatReads, OpGetMembers: CatReads, OpPutSummary: CatLiveness, OpPutMembers: CatLiveness,
}

// Category is the category of request kind op ("" for an unknown one).
func Category(op string) string { return allOps[op] }

// livenessOps are the request kinds of the liveness path: the worker's own
// record (register, heartbeat, leave), the death declarations it makes as a
// watcher, and the reads its trust checks and watches make (a worker record,
// the worker lists). WithLiveness gives them a client of their own.
var livenessOps = map[string]bool{
	OpRegister: true, OpHeartbeat: true, OpDeclareDead: true, OpLeave: true,
	OpGetWorker: true, OpListWorkers: true,
}

// Liveness reports whether request kind op is on the liveness path (sent
// through the WithLiveness client).
func Liveness(op string) bool { return livenessOps[op] }

// Store is a lease.Store on one DynamoDB table.
type Store struct {
	api    API // everything but the liveness path, unless live is nil
	live   API // the liveness path (nil: api)
	table  string
	meters map[string]*meter
	shard  atomic.Uint32 // rotates the first by_unowned shard an Unowned reads
	hints  ReleaseHints  // which variant a release tries first
}

// Option configures a Store.
type Option func(*Store)

// WithLiveness sends the liveness path's requests (Liveness: register,
// heartbeat, declare dead, leave, GetWorker, ListWorkers), the consistent
// reads that classify their failed conditions included, through live, a
// client of their own, and everything else (claims, checkpoints, releases,
// the session reads and lists, MarkDone, GetWorkers) through the store's
// api. Give live a retryer without a shared retry budget
// (awsconfig.LivenessRetryer): throttled claims draining the bulk client's
// budget then cannot take the heartbeats' retries.
func WithLiveness(live API) Option { return func(s *Store) { s.live = live } }

// New returns a store on table.
func New(api API, table string, opts ...Option) *Store {
	s := &Store{api: api, table: table, meters: map[string]*meter{}}
	for op := range allOps {
		s.meters[op] = &meter{}
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// client is the client request kind op is sent through.
func (s *Store) client(op string) API {
	if s.live != nil && livenessOps[op] {
		return s.live
	}
	return s.api
}

// CreateTable creates the sessions table (sessionitem.CreateTable).
func CreateTable(ctx context.Context, api sessionitem.TableAdmin, name string) error {
	return sessionitem.CreateTable(ctx, api, name)
}

// Stats returns how many requests of each kind the store made (writes and
// reads, failed ones included), and under "<kind>_failed" how many of its
// writes failed their condition.
func (s *Store) Stats() map[string]int64 {
	out := make(map[string]int64, 2*len(s.meters))
	for op, m := range s.meters {
		u := m.usage()
		out[op] = u.Requests()
		out[op+"_failed"] = u.ConditionFailed
	}
	return out
}

// Units returns what the requests of each kind cost, in the units DynamoDB
// bills (see ItemSize, WriteUnits, IndexWrites).
// BilledUnits is Units as /stats reports it (the worker's StoreMeter).
func (s *Store) BilledUnits() any { return s.Units() }

func (s *Store) Units() map[string]Usage {
	out := make(map[string]Usage, len(s.meters))
	for op, m := range s.meters {
		out[op] = m.usage()
	}
	return out
}

func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

func v(x any) expression.ValueBuilder { return expression.Value(x) }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func numOf(item map[string]types.AttributeValue, name string) int64 {
	if n, ok := item[name].(*types.AttributeValueMemberN); ok {
		x, _ := strconv.ParseInt(n.Value, 10, 64)
		return x
	}
	return 0
}

// with is item (nil: none) with set applied and remove removed: the item an
// update leaves, computed from the item before it.
func with(item map[string]types.AttributeValue, set map[string]types.AttributeValue, remove ...string) map[string]types.AttributeValue {
	out := maps.Clone(item)
	if out == nil {
		out = map[string]types.AttributeValue{}
	}
	maps.Copy(out, set)
	for _, k := range remove {
		delete(out, k)
	}
	return out
}

// update is one conditional UpdateItem of the item with key key. On success
// it returns the attributes rv asked for. When the condition failed it reads
// the item consistently (nil: absent) for the caller to classify, meters the
// failed write at that item's size, and reports failed. Other errors are
// wrapped (transient).
func (s *Store) update(ctx context.Context, op, key string, u expression.UpdateBuilder, c expression.ConditionBuilder, rv types.ReturnValue) (attrs map[string]types.AttributeValue, failed bool, err error) {
	in, err := sessionitem.Update(s.table, key, u, c)
	if err != nil {
		return nil, false, err
	}
	in.ReturnValues = rv
	m := s.meters[op]
	m.writes.Add(1)
	out, err := s.client(op).UpdateItem(ctx, in)
	if err == nil {
		return out.Attributes, false, nil
	}
	if !isConditionFailed(err) {
		return nil, false, fmt.Errorf("update %s: %w", key, edge(err))
	}
	m.failed.Add(1)
	cur, err := s.read(ctx, op, key)
	m.wu.Add(WriteUnits(ItemSize(cur)))
	return cur, true, err
}

// read is a consistent GetItem of key, metered under op; nil when absent.
func (s *Store) read(ctx context.Context, op, key string) (map[string]types.AttributeValue, error) {
	m := s.meters[op]
	m.reads.Add(1)
	out, err := s.client(op).GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: sessionitem.Key(key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, edge(err))
	}
	m.readHalves.Add(2 * ConsistentReadUnits(ItemSize(out.Item)))
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

// --- Liveness ---

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

// query reads the entries of index whose attr equals value, page by page,
// until limit entries (0: all) were taken (have counts them).
func (s *Store) query(ctx context.Context, op, index, attr, value string, limit int, take func(map[string]types.AttributeValue) error, have func() int) error {
	m := s.meters[op]
	var start map[string]types.AttributeValue
	for {
		var page int32
		if limit > 0 {
			page = int32(min(limit-have(), 1000))
		}
		in, err := sessionitem.IndexQuery(s.table, index, attr, value, page, start)
		if err != nil {
			return err
		}
		m.reads.Add(1)
		out, err := s.client(op).Query(ctx, in)
		if err != nil {
			return fmt.Errorf("query %s %s: %w", index, value, err)
		}
		bytes := 0
		for _, it := range out.Items {
			bytes += ItemSize(it)
			if err := take(it); err != nil {
				return err
			}
		}
		m.readHalves.Add(queryHalfUnits(bytes))
		if len(out.LastEvaluatedKey) == 0 || (limit > 0 && have() >= limit) {
			return nil
		}
		start = out.LastEvaluatedKey
	}
}

// --- Sessions ---

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

// seqOf is a stored sequence number (NoSeq: absent).
func seqOf(p *int64) int64 {
	if p == nil {
		return lease.NoSeq
	}
	return *p
}

// owned is the condition that t is still the session's tenure.
func owned(t lease.Token) expression.ConditionBuilder {
	return sessionitem.LeaseOwner.Equal(v(t.Owner)).And(sessionitem.LeaseEpoch.Equal(v(t.Epoch)))
}

// notFailed is the condition that the session is not FAILED at its generation.
func notFailed() expression.ConditionBuilder {
	return expression.AttributeNotExists(sessionitem.FailedGeneration).Or(sessionitem.FailedGeneration.NotEqual(sessionitem.Generation))
}

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
			s.hints.Note(id, it.DesiredState == schema.StateStarted && !it.Failed())
			return it, nil
		}
		if attempt == specAttempts {
			return lease.Item{}, fmt.Errorf("get %s: spec superseded %d times while read", id, attempt)
		}
	}
}

// get reads the session item consistently: the session (its Spec only if
// inline; its checkpoint) and its item as stored.
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
	return toLease(&r), r, nil
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

// Encode is the session item of it as ingest writes it (tests and the
// benchmark seed with it): in the by_state index, and in by_unowned while
// STARTED, not FAILED and without owner; its Spec is in its spec item
// (EncodeSpec; the ref is SpecRef of its generation); its LastSeq, when
// set, is its checkpoint (last_seq).
func Encode(it lease.Item) (map[string]types.AttributeValue, error) {
	gen := it.Generation
	r := sessionitem.Item{
		ConnectionID: it.ConnectionID, DesiredState: it.DesiredState, SpecRef: SpecRef(it),
		Generation: &gen, CheckpointEveryMs: it.CheckpointEvery.Milliseconds(), LeaseOwner: it.Owner, LeaseEpoch: it.Epoch,
		UpdatedAtMs: it.UpdatedAtMs, FailedGeneration: it.FailedGeneration, LastError: it.LastError, LastErrorAtMs: it.LastErrorAtMs,
		LastErrorGen: it.LastErrorGen, LastErrorEpoch: it.LastErrorEpoch,
		Standby: it.Standby, StandbyEpoch: it.StandbyEpoch, StandbyRefusedGen: it.StandbyRefusedGen, StandbyError: it.StandbyError,
	}
	if it.DesiredState != "" {
		r.IndexShard = schema.IndexShardFor(it.DesiredState, it.ConnectionID)
	}
	if it.DesiredState == schema.StateStarted && it.Owner == "" && !it.Failed() {
		r.UnownedShard = schema.UnownedShardOf(it.ConnectionID)
	}
	if it.LastSeq != lease.NoSeq {
		seq := it.LastSeq
		r.LastSeq = &seq
	}
	return sessionitem.Encode(r)
}

// SpecRef is the ref of it's spec item as Encode names it ("": it has no
// Spec).
func SpecRef(it lease.Item) string {
	if it.Spec == "" {
		return ""
	}
	return sessionitem.SpecRef(it.Generation, it.Spec)
}

// EncodeSpec is the spec item of it (nil when it has no Spec).
func EncodeSpec(it lease.Item) (map[string]types.AttributeValue, error) {
	if it.Spec == "" {
		return nil, nil
	}
	return sessionitem.EncodeSpec(it.ConnectionID, SpecRef(it), it.Spec)
}

// Seed writes it (its spec item, then the session item, its LastSeq as
// last_seq) whole, as ingest and earlier tenures would have.
func Seed(ctx context.Context, api API, table string, it lease.Item) error {
	sp, err := EncodeSpec(it)
	if err != nil {
		return err
	}
	if sp != nil {
		if _, err := api.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: sp}); err != nil {
			return fmt.Errorf("seed spec of %s: %w", it.ConnectionID, err)
		}
	}
	m, err := Encode(it)
	if err != nil {
		return err
	}
	if _, err := api.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: m}); err != nil {
		return fmt.Errorf("seed %s: %w", it.ConnectionID, err)
	}
	return nil
}

var _ lease.Store = (*Store)(nil)
