package sessions

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
)

// Worker is a worker record as ingest shows it (GET /workers): never its
// mailbox.
type Worker struct {
	ID             string
	State          string // ALIVE | DEAD | LEFT
	List           string // ALIVE | GONE (may still own sessions) | DONE
	Epoch          int64
	Load           int
	Capacity       int
	AdminAddr      string
	Draining       bool
	MovesPerMin    int
	HeartbeatAtMs  int64
	StartedAtMs    int64
	EndedAtMs      int64
	DeclaredDeadBy string
	Host           string // where the worker runs (its registration's)
	Pid            int
}

// WorkerList is the answer of Workers.
type WorkerList struct {
	Workers   []Worker
	Truncated bool // more records exist than the limit
}

// MaxWorkers is the most records Workers returns.
const MaxWorkers = 1000

// workerLists are the by_worker_list partitions, in the order shown.
var workerLists = []string{schema.WorkerListAlive, schema.WorkerListGone, schema.WorkerListDone}

// Workers lists up to limit worker records (≤ MaxWorkers; alive first, then
// dead or left ones that may still own sessions, then ended ones; by id
// within each): the by_worker_list index, then the records themselves with
// consistent reads (the index may lag; the record is what counts). DEAD and
// LEFT records disappear a day after they ended (the table's TTL).
func (s *Store) Workers(ctx context.Context, limit int) (WorkerList, error) {
	if limit <= 0 || limit > MaxWorkers {
		limit = MaxWorkers
	}
	var res WorkerList
	var keys []map[string]types.AttributeValue
	seen := map[string]bool{}
	for _, list := range workerLists {
		var start map[string]types.AttributeValue
		for {
			in, err := sessionitem.IndexQuery(s.table, schema.IndexByWorkerList, schema.AttrWorkerList, list,
				int32(limit+1-len(keys)), start)
			if err != nil {
				return WorkerList{}, fmt.Errorf("workers: %w", err)
			}
			out, err := s.api.Query(ctx, in)
			if err != nil {
				return WorkerList{}, unavailable("list", "workers", err)
			}
			for _, raw := range out.Items {
				pk, _ := raw[schema.AttrPk].(*types.AttributeValueMemberS)
				if pk == nil || seen[pk.Value] {
					continue // a record moving between lists may show twice
				}
				seen[pk.Value] = true
				keys = append(keys, sessionitem.Key(pk.Value))
			}
			if len(keys) > limit {
				res.Truncated = true
				keys = keys[:limit]
				break
			}
			if len(out.LastEvaluatedKey) == 0 {
				break
			}
			start = out.LastEvaluatedKey
		}
		if res.Truncated {
			break
		}
	}
	raws, err := s.batchRead(ctx, keys)
	if err != nil {
		return WorkerList{}, fmt.Errorf("workers: %w", err)
	}
	for _, raw := range raws {
		w, err := sessionitem.DecodeWorker(raw)
		if err != nil {
			return WorkerList{}, fmt.Errorf("workers: %w", err)
		}
		id, ok := strings.CutPrefix(w.Key, schema.WorkerKeyPrefix)
		if !ok {
			continue
		}
		res.Workers = append(res.Workers, Worker{
			ID: id, State: w.State, List: w.List, Epoch: w.Epoch, Load: w.Load, Capacity: w.Capacity, AdminAddr: w.AdminAddr,
			Draining: w.Draining, MovesPerMin: w.MovesPerMin,
			HeartbeatAtMs: w.HeartbeatAt, StartedAtMs: w.StartedAtMs, EndedAtMs: w.EndedAtMs, DeclaredDeadBy: w.DeclaredBy,
			Host: w.Host, Pid: w.Pid,
		})
	}
	slices.SortFunc(res.Workers, func(a, b Worker) int {
		return cmp.Or(cmp.Compare(listRank(a.List), listRank(b.List)), cmp.Compare(a.ID, b.ID))
	})
	return res, nil
}

func listRank(l string) int {
	if i := slices.Index(workerLists, l); i >= 0 {
		return i
	}
	return len(workerLists)
}
