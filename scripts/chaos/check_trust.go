// The trust-deadline pass (an AWS sink): nothing of a worker whose DynamoDB
// path the harness froze reaches the destination after its trust deadline
// + the request timeout.

package chaos

import (
	"maps"
	"math"
	"slices"
	"time"
)

// freezeWindow is a time the harness had some workers' DynamoDB path frozen:
// from F their trust deadline is at most F + TTL − margin.
type freezeWindow struct {
	fault   int
	kind    string
	from    int64 // F
	until   int64 // the thaw (math.MaxInt64: the worker was declared dead)
	workers map[string]bool
}

// freezeWindows lists the harness's DynamoDB-path freezes.
func (j *judge) freezeWindows() []freezeWindow {
	var out []freezeWindow
	for _, f := range j.ev.Faults {
		w := freezeWindow{fault: f.N, kind: f.Kind, from: f.Start.UnixNano(), until: f.End.UnixNano(), workers: map[string]bool{}}
		switch f.Kind {
		case KindDynamoDown, KindSinkRefuseDynamo:
			for _, inc := range j.ev.Incarnations {
				if !inc.Started.After(f.Start) && (inc.Ended.IsZero() || inc.Ended.After(f.Start)) {
					w.workers[inc.ID] = true
				}
			}
		case KindPartition, KindZombie, KindSinkFreezeDynamo:
			// Declared dead while frozen: it never trusts again.
			w.workers[f.Worker] = true
			w.until = math.MaxInt64
		default:
			continue
		}
		out = append(out, w)
	}
	return out
}

// checkTrust: nothing of a frozen worker's tenures reaches the destination
// after F + TTL − margin + the request timeout + the tolerance, while the
// freeze lasts.
func (j *judge) checkTrust() {
	b := j.set.Bounds
	if b.TrustDeadlineMs == 0 || !j.set.destSink() {
		return
	}
	bound := b.TrustDeadlineMs * int64(time.Millisecond)
	for _, w := range j.freezeWindows() {
		type agg struct {
			n      int
			first  int64
			latest int64
			epochs map[int64]bool
			worker string
		}
		late := map[string]*agg{}
		var latest int64 = -1
		for _, d := range j.ev.Deliveries {
			if !w.workers[d.Worker] || d.AtNs <= w.from || d.AtNs >= w.until {
				continue
			}
			latest = max(latest, d.AtNs-w.from)
			if d.AtNs <= w.from+bound {
				continue
			}
			a := late[d.Session]
			if a == nil {
				a = &agg{first: d.AtNs, epochs: map[int64]bool{}, worker: d.Worker}
				late[d.Session] = a
			}
			a.n++
			a.first = min(a.first, d.AtNs)
			a.latest = max(a.latest, d.AtNs)
			a.epochs[d.Epoch] = true
		}
		j.res.TrustLateMs = append(j.res.TrustLateMs, max(float64(latest)/1e6, 0)) // 0: nothing after the freeze
		for _, id := range slices.Sorted(maps.Keys(late)) {
			a := late[id]
			j.violate(CheckTrust, id, a.first, "%s (#%d): %d record(s) of %s (epochs %v) reached the destination %.0f–%.0f ms after its DynamoDB path was frozen, past its trust deadline + the request timeout (bound %d ms)",
				w.kind, w.fault, a.n, a.worker, slices.Sorted(maps.Keys(a.epochs)), float64(a.first-w.from)/1e6, float64(a.latest-w.from)/1e6, b.TrustDeadlineMs)
		}
	}
}
