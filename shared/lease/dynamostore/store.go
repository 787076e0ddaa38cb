package dynamostore

// The Store: the table, its clients, the request kinds and their meters,
// and the two request shapes every operation is built from (a conditional
// UpdateItem classified on a consistent read; a paged Query).

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/lease"
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

var _ lease.Store = (*Store)(nil)
