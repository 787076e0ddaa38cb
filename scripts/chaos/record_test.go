// Tests of reading the evidence.

package chaos

import (
	"os"
	"path/filepath"
	"testing"
)

// A line cut short by a kill is not a record: the sink file check counts
// it, and the delivery check needs the next owner to deliver it again.
func TestSinkFileHalfLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "worker-1.sink.jsonl")
	body := `{"connection_id":"a","seq":1,"lease_epoch":1,"worker_id":"worker-1","received_at_ms":1}` + "\n" +
		`{"connection_id":"a","seq":2,"lease_epoch":1,"worker_id":"worker-9","received_at_ms":2}` + "\n" +
		`{"connection_id":"a","seq":3,"lease_ep`
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	sf, err := readSinkFile(path, 1, map[string]bool{"worker-1": true})
	if err != nil {
		t.Fatal(err)
	}
	if sf.Lines != 3 || sf.Bad != 1 || sf.Foreign != 1 {
		t.Fatalf("%+v", sf)
	}
	if sf, err := readSinkFile(filepath.Join(t.TempDir(), "none"), 2, nil); err != nil || sf.Lines != 0 {
		t.Fatalf("missing file: %+v %v", sf, err)
	}
}

// A move's line gives when the receiver said it would take the session
// (ready_ms before the line), and none when it was not asked.
func TestMovesReadTheReceiversAnswer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "worker-1.log")
	body := `{"level":"info","worker_id":"worker-1","connection_id":"a","to":"worker-2","ready_ms":12.5,"time":"2026-12-07T00:00:10.000Z","message":"session handed off to rebalance"}` + "\n" +
		`{"level":"info","worker_id":"worker-1","connection_id":"b","to":"worker-2","time":"2026-12-07T00:00:11.000Z","message":"session handed off to rebalance"}` + "\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	ms, err := readMoves(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].AtNs-ms[0].ReadyAtNs != 12_500_000 || ms[1].ReadyAtNs != 0 {
		t.Fatalf("moves %+v", ms)
	}
}
