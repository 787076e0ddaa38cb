// The sink's faults (latency, refusals, freeze) and a source-poison episode:
// every session delivering when it began delivers a new seq at the
// destination within the bound after it was lifted (recovery-sink).

package chaos

import "fmt"

// sinkFault measures a sink fault: every session delivering when it began
// delivers a seq it had not delivered by the end, within the bound after
// the end.
func (j *judge) sinkFault(fr *FaultResult) {
	// After refusals, each of a session's records refused permanently that
	// no delivery had passed by the end is still sent at its remaining
	// attempts, one after another (its later entries wait behind it): the
	// bound grows by (attempts − 1) × the longest backoff for each one
	// beyond the first (the proxy's own record of what it refused).
	pending := map[string][]int64{}
	if (fr.Kind == KindSinkRefuse || fr.Kind == KindSinkRefuseDynamo) && j.ev.Sink != nil {
		for _, r := range j.ev.Sink.Refused {
			pending[r.Session] = append(pending[r.Session], r.Seq)
		}
	}
	perRecord := int64(sinkPermanentAttempts-1) * sinkRetryMax.Milliseconds()
	j.newSeqAfter(fr, CheckSinkRecovery, " at the destination", "no new seq at the destination after the fault was lifted", func(id string, maxBefore int64) (int64, string) {
		extra := int64(0)
		for _, q := range pending[id] {
			if q > maxBefore {
				extra++
			}
		}
		return max(extra-1, 0) * perRecord, fmt.Sprintf("; %d record(s) refused permanently still pending", extra)
	})
}
