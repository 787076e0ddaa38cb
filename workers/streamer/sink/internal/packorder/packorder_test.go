package packorder

import (
	"testing"

	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
)

// Sessions and tenures may interleave; within one tenure of a session
// (seq, sub) must grow.
func TestCheck(t *testing.T) {
	rec := func(id string, epoch, seq, sub int64) batch.Record {
		return batch.Record{ConnectionID: id, Epoch: epoch, Seq: seq, Sub: sub}
	}
	ok := []batch.Record{rec("a", 1, 1, 0), rec("b", 1, 1, 0), rec("a", 1, 1, 1), rec("a", 2, 1, 0), rec("b", 1, 2, 0), rec("a", 1, 2, 0)}
	if err := Check(ok); err != nil {
		t.Fatal(err)
	}
	for name, recs := range map[string][]batch.Record{
		"repeat":   {rec("a", 1, 1, 0), rec("b", 1, 1, 0), rec("a", 1, 1, 0)},
		"back":     {rec("a", 1, 2, 0), rec("a", 1, 1, 5)},
		"sub back": {rec("a", 1, 2, 1), rec("b", 3, 1, 0), rec("a", 1, 2, 0)},
	} {
		if Check(recs) == nil {
			t.Errorf("%s: in order", name)
		}
	}
}
