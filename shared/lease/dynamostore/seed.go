package dynamostore

// Items as ingest writes them, for the tests and the benchmark that seed a
// table.

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
)

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
