// Package packorder owns the order rule of a pack that may hold several
// sessions' messages (the sqs and kinesis sinks' batch.Packer): each
// session's messages in (seq, sub) order within a tenure; the sessions'
// messages may interleave.
package packorder

import (
	"fmt"

	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
)

// tenure is a session's tenure.
type tenure struct {
	connectionID string
	epoch        int64
}

// Check reports the first record of recs that does not come after the
// record before it of the same session and tenure.
func Check(recs []batch.Record) error {
	last := make(map[tenure]batch.Record, 1)
	for _, r := range recs {
		t := tenure{r.ConnectionID, r.Epoch}
		if p, ok := last[t]; ok && !Before(p, r) {
			return fmt.Errorf("%s epoch %d: seq %d.%d after %d.%d", r.ConnectionID, r.Epoch, r.Seq, r.Sub, p.Seq, p.Sub)
		}
		last[t] = r
	}
	return nil
}

// Before reports whether a's position (seq, sub) comes before b's.
func Before(a, b batch.Record) bool { return a.Seq < b.Seq || (a.Seq == b.Seq && a.Sub < b.Sub) }
