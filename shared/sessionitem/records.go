package sessionitem

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// Worker is a worker record (Pk schema.WorkerKey). Heartbeats rewrite it
// whole-size, so it holds only what observers need: it stays below 1 KB
// (one write unit per heartbeat) unless the mailbox fills.
type Worker struct {
	Key          string   `dynamodbav:"Pk"`
	State        string   `dynamodbav:"w_state"`
	Epoch        int64    `dynamodbav:"w_epoch"`
	HeartbeatSeq int64    `dynamodbav:"hb_seq"`
	HeartbeatAt  int64    `dynamodbav:"hb_at_ms"`
	TTLMs        int64    `dynamodbav:"ttl_ms"`
	Load         int      `dynamodbav:"load"`
	Capacity     int      `dynamodbav:"capacity"`
	AdminAddr    string   `dynamodbav:"admin_addr,omitempty"`
	Draining     bool     `dynamodbav:"draining,omitempty"`
	MovesPerMin  int      `dynamodbav:"moves_per_min,omitempty"`
	Mailbox      []string `dynamodbav:"mailbox,stringset,omitempty"`
	List         string   `dynamodbav:"w_list,omitempty"`
	StartedAtMs  int64    `dynamodbav:"started_at_ms"`
	EndedAtMs    int64    `dynamodbav:"ended_at_ms,omitempty"`
	DeclaredBy   string   `dynamodbav:"declared_dead_by,omitempty"`
	ExpiresAt    int64    `dynamodbav:"expires_at,omitempty"`
	BootID       string   `dynamodbav:"boot_id,omitempty"`
	Host         string   `dynamodbav:"host,omitempty"`
	Pid          int      `dynamodbav:"pid,omitempty"`
	Zone         string   `dynamodbav:"zone,omitempty"`
}

// DecodeWorker reads a worker record (or a by_worker_list entry).
func DecodeWorker(m map[string]types.AttributeValue) (Worker, error) {
	var w Worker
	if err := attributevalue.UnmarshalMap(m, &w); err != nil {
		return Worker{}, fmt.Errorf("decode worker record: %w", err)
	}
	return w, nil
}

// EncodeWorker is the record's attributes.
func EncodeWorker(w Worker) (map[string]types.AttributeValue, error) {
	m, err := attributevalue.MarshalMap(w)
	if err != nil {
		return nil, fmt.Errorf("encode worker record %s: %w", w.Key, err)
	}
	return m, nil
}

// Names of the worker record's attributes, for the expression builder.
var (
	WorkerState     = expression.Name(schema.AttrWorkerState)
	WorkerEpoch     = expression.Name(schema.AttrWorkerEpoch)
	HeartbeatSeq    = expression.Name(schema.AttrHeartbeatSeq)
	HeartbeatAt     = expression.Name(schema.AttrHeartbeatAtMs)
	WorkerTTL       = expression.Name(schema.AttrWorkerTTLMs)
	WorkerLoad      = expression.Name(schema.AttrWorkerLoad)
	WorkerCapacity  = expression.Name(schema.AttrWorkerCapacity)
	WorkerAdminAddr = expression.Name(schema.AttrWorkerAdminAddr)
	WorkerDraining  = expression.Name(schema.AttrWorkerDraining)
	WorkerMoves     = expression.Name(schema.AttrWorkerMoves)
	Mailbox         = expression.Name(schema.AttrMailbox)
	WorkerList      = expression.Name(schema.AttrWorkerList)
	EndedAtMs       = expression.Name(schema.AttrEndedAtMs)
	DeclaredBy      = expression.Name(schema.AttrDeclaredBy)
)

// MailboxAdd is ingest's write that asks worker's owner to re-read
// connection id (after a stop or a new generation): ADD to the mailbox set,
// only while the worker is ALIVE (a dead or left worker's sessions are
// someone else's to take; nothing is created for a record TTL deleted).
func MailboxAdd(table, worker, id string) (*dynamodb.UpdateItemInput, error) {
	return Update(table, schema.WorkerKey(worker),
		expression.Add(Mailbox, expression.Value(StringSet(id))),
		WorkerState.Equal(expression.Value(schema.WorkerAlive)))
}

// StringSet is an SS value for the expression builder (ADD / DELETE on a set).
func StringSet(v ...string) types.AttributeValue { return &types.AttributeValueMemberSS{Value: v} }
