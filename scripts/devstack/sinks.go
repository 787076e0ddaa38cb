package devstack

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
)

// SinkRecord is one line of a worker's stdout sink: the worker's own record
// of a message it accepted (the data itself is not kept).
type SinkRecord struct {
	ConnectionID string `json:"connection_id"`
	Seq          int64  `json:"seq"`
	LeaseEpoch   int64  `json:"lease_epoch"`
	WorkerID     string `json:"worker_id"`
	ReceivedAtMs int64  `json:"received_at_ms"`
	// DataSeq is the "seq" of the message the record carries (its data, a
	// JSON object such as the test feed's), 0 when it has none: the
	// source's own number even where the worker numbers the messages
	// itself (seq_mode none).
	DataSeq DataSeq `json:"data"`
}

// DataSeq is the integer "seq" of a JSON object; decoding anything else
// (a string, binary data's absence, a seq that is not an integer) gives 0,
// never an error.
type DataSeq int64

// UnmarshalJSON reads the "seq" of b when b is an object that has one.
func (d *DataSeq) UnmarshalJSON(b []byte) error {
	*d = DataSeqOf(b)
	return nil
}

// DataSeqOf is the integer "seq" of the JSON object b (0: none).
func DataSeqOf(b []byte) DataSeq {
	var v struct {
		Seq int64 `json:"seq"`
	}
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &v) != nil {
		return 0
	}
	return DataSeq(v.Seq)
}

// ParseSinkLine parses one sink line.
func ParseSinkLine(b []byte) (SinkRecord, error) {
	var r SinkRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("sink line: %w", err)
	}
	if r.ConnectionID == "" || r.WorkerID == "" {
		return r, errors.New("sink line: no connection_id or worker_id")
	}
	return r, nil
}

// ReadSinkFile parses a sink file (JSON lines); unparsable lines are counted
// in bad.
func ReadSinkFile(path string) (recs []SinkRecord, bad int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("read sink file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		r, perr := ParseSinkLine(sc.Bytes())
		if perr != nil {
			bad++
			continue
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		return recs, bad, fmt.Errorf("read sink file %s: %w", path, err)
	}
	return recs, bad, nil
}

// Sinks collects the sink records of every worker of a stack, as the
// workers' stdout delivers them.
type Sinks struct {
	keep bool
	on   func(SinkRecord)

	mu      sync.Mutex
	records []SinkRecord
	last    map[string]SinkRecord
	count   int64
	bad     int64
}

func newSinks(keep bool, on func(SinkRecord)) *Sinks {
	return &Sinks{keep: keep, on: on, last: map[string]SinkRecord{}}
}

func (s *Sinks) line(b []byte) {
	r, err := ParseSinkLine(b)
	s.mu.Lock()
	if err != nil {
		s.bad++
		s.mu.Unlock()
		return
	}
	s.count++
	if s.keep {
		s.records = append(s.records, r)
	}
	s.last[r.ConnectionID] = r
	s.mu.Unlock()
	if s.on != nil {
		s.on(r)
	}
}

// Records is a copy of every record so far, in arrival order (empty unless
// Config.KeepSinkRecords).
func (s *Sinks) Records() []SinkRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SinkRecord(nil), s.records...)
}

// Last is the latest record of every session.
func (s *Sinks) Last() map[string]SinkRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]SinkRecord, len(s.last))
	for k, v := range s.last {
		out[k] = v
	}
	return out
}

// Count is how many records arrived.
func (s *Sinks) Count() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

// BadLines is how many stdout lines were not sink records.
func (s *Sinks) BadLines() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bad
}
