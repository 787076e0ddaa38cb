//go:build fleetsim

package fleetsim

import (
	"fmt"
	"strings"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/simddb"
)

// readSplit divides the read units simddb metered (m: by partition key
// value of the table, by index) by what they read:
//
//   - worker: the worker records (items "worker#" + id: liveness,
//     watch, discovery's and rebalancing's record reads, the classifying
//     reads of refused worker writes), the fleet summary's items ("fleet#":
//     its head and membership pages) and the by_worker_list index (the
//     listing of every ALIVE or LEFT worker): the coordination reads;
//   - session: the session and spec items (claims' and audits'
//     reads, the classifying reads of refused session writes) and the
//     by_owner, by_unowned and by_state indexes (audits, reconcile): what
//     grows with the sessions a worker holds.
//
// Every read a lease.Store call bills is one of a partition key value's
// or one of an index's (simddb's meters.record), and the harness's writes
// (OpSeed, OpIngest) read nothing: the two sum to TableFigures.ReadUnits.
func readSplit(m simddb.Meter) (worker, session float64) {
	for key, rw := range m.Partitions {
		if strings.HasPrefix(key, schema.WorkerKeyPrefix) || strings.HasPrefix(key, schema.FleetKeyPrefix) {
			worker += rw.Read.Total
		} else {
			session += rw.Read.Total
		}
	}
	for ix, rw := range m.Indexes {
		if ix == schema.IndexByWorkerList {
			worker += rw.Read.Total
		} else {
			session += rw.Read.Total
		}
	}
	return worker, session
}

// readUnitsCell is SCALE.md's table cell of m's read units per worker-hour:
// the worker records' part + the sessions' (– when the run has no split: a
// report written before it).
func readUnitsCell(m Measured) string {
	t := m.Table
	if t.WorkerHours <= 0 || t.WorkerReadUnits+t.SessionReadUnits == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f + %.0f", t.WorkerReadUnits/t.WorkerHours, t.SessionReadUnits/t.WorkerHours)
}
