// The sessions table read whole at the end (sessions with their
// checkpoints, worker records) for the end-ownership and release checks.

package chaos

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// scan reads the whole sessions table (consistent reads): sessions (their
// checkpoint on them) and worker records.
func (r *runner) scan(ctx context.Context) (Snapshot, error) {
	snap := Snapshot{At: time.Now()}
	var start map[string]types.AttributeValue
	for {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		out, err := r.ddb.Scan(c, &dynamodb.ScanInput{TableName: aws.String(r.cfg.Stack.Table), ConsistentRead: aws.Bool(true), ExclusiveStartKey: start})
		cancel()
		if err != nil {
			return snap, fmt.Errorf("scan the sessions table: %w", err)
		}
		for _, it := range out.Items {
			pk := attrS(it, schema.AttrPk)
			switch {
			case strings.HasPrefix(pk, schema.WorkerKeyPrefix):
				snap.Workers = append(snap.Workers, workerRowOf(it))
			case strings.HasPrefix(pk, schema.NonceKeyPrefix):
			default:
				snap.Rows = append(snap.Rows, rowOf(it))
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		start = out.LastEvaluatedKey
	}
	sort.Slice(snap.Rows, func(i, j int) bool { return snap.Rows[i].Session < snap.Rows[j].Session })
	sort.Slice(snap.Workers, func(i, j int) bool { return snap.Workers[i].ID < snap.Workers[j].ID })
	return snap, nil
}

func attrS(it map[string]types.AttributeValue, k string) string {
	if v, ok := it[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func attrN(it map[string]types.AttributeValue, k string) (int64, bool) {
	if v, ok := it[k].(*types.AttributeValueMemberN); ok {
		n, err := strconv.ParseInt(v.Value, 10, 64)
		return n, err == nil
	}
	return 0, false
}

func rowOf(it map[string]types.AttributeValue) Row {
	row := Row{Session: attrS(it, schema.AttrPk), State: attrS(it, schema.AttrDesiredState), Owner: attrS(it, schema.AttrLeaseOwner)}
	row.Epoch, _ = attrN(it, schema.AttrLeaseEpoch)
	// Where the next owner resumes: the larger of last_seq (the
	// checkpoint) and release_seq (lease.ResumeSeq).
	for _, a := range []string{schema.AttrLastSeq, schema.AttrReleaseSeq} {
		if v, ok := attrN(it, a); ok && (row.LastSeq == nil || v > *row.LastSeq) {
			row.LastSeq = &v
		}
	}
	gen, _ := attrN(it, schema.AttrGeneration)
	if fg, ok := attrN(it, schema.AttrFailedGeneration); ok && fg == gen && row.State == schema.StateStarted {
		row.Failed = true
	}
	return row
}

func workerRowOf(it map[string]types.AttributeValue) WorkerRow {
	w := WorkerRow{ID: strings.TrimPrefix(attrS(it, schema.AttrPk), schema.WorkerKeyPrefix), State: attrS(it, schema.AttrWorkerState),
		List: attrS(it, schema.AttrWorkerList), DeclaredBy: attrS(it, schema.AttrDeclaredBy)}
	w.Epoch, _ = attrN(it, schema.AttrWorkerEpoch)
	w.Seq, _ = attrN(it, schema.AttrHeartbeatSeq)
	return w
}
