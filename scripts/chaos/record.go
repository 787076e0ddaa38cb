// The evidence a run is judged on: its records, the recorder of the sink
// lines from the workers' stdout, the rebalancing moves and CPU pressure
// samples read from their sources, save and load.

package chaos

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/feed"
)

// Delivery is one sink line as the harness received it from a worker's
// stdout: what the line says, and when it arrived (AtNs, the harness's
// clock: one clock for every worker, so arrivals order across workers).
type Delivery struct {
	Session      string `json:"s"`
	Seq          int64  `json:"q"`
	Epoch        int64  `json:"e"`
	Worker       string `json:"w"`
	ReceivedAtMs int64  `json:"r"` // the worker's own stamp (reported, never judged)
	AtNs         int64  `json:"t"`
	// Sub is the envelope's sub (a message without its own seq; 0).
	Sub int64 `json:"u,omitempty"`
	// FeedSeq is the "seq" of the message it carries, the feed's own
	// number (0: none): what a session whose worker numbers the messages
	// itself (seq_mode none) is judged by (check_standby.go).
	FeedSeq int64 `json:"f,omitempty"`
	// Proxy: AtNs is the sink fault proxy's stamp (the destination's
	// successful answer reaching it); otherwise the engine's own, or (the
	// stdout sink) the line's arrival at the harness.
	Proxy bool `json:"p,omitempty"`
	// Pos is its place in the destination's own order, as the harness read
	// it (1 = read first; a session's records come from one Kinesis shard,
	// in the shard's order); 0: unknown (stdout lines, older evidence).
	Pos int64 `json:"o,omitempty"`
}

// Fault is one injected fault (or the policy switch) as the harness did it.
type Fault struct {
	N    int    `json:"n"`
	Kind string `json:"kind"`
	// Start is when the fault was injected; End when it was lifted (the
	// SIGCONT of a zombie, the engine answering again, the refusal lifted;
	// Start for instantaneous faults).
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Worker is the incarnation hit (kill-9, zombie, rolling-restart and
	// clock-offset: one Fault per SIGTERM); NewWorker the one started in its
	// slot afterwards.
	Worker    string `json:"worker,omitempty"`
	NewWorker string `json:"new_worker,omitempty"`
	// Sessions are the sessions a source fault or churn touched.
	Sessions []string `json:"sessions,omitempty"`
	// Offset is the clock offset given to NewWorker (clock-offset).
	OffsetMs int64  `json:"offset_ms,omitempty"`
	Note     string `json:"note,omitempty"`
}

// Action is one API call of the harness (start, stop, restart of a session).
type Action struct {
	Op      string    `json:"op"` // start | stop | restart
	Session string    `json:"session"`
	Fault   int       `json:"fault"` // the Fault it belongs to (0: the initial starts)
	At      time.Time `json:"at"`    // request sent
	Acked   time.Time `json:"acked"` // answer received (zero on error)
	// Epoch is the session's lease epoch read from the table right after a
	// stop was acknowledged: a tenure with a higher epoch was acquired while
	// the session was STOPPED.
	Epoch int64  `json:"epoch,omitempty"`
	Err   string `json:"err,omitempty"`
	// Planned: a start or re-start with planned reconnects
	// (max_connection_age, reconnect_on: Config.PlannedEvery).
	Planned bool `json:"planned,omitempty"`
	// Source is how the session's source was started when it cannot
	// replay (Config.StandbyEvery): SourceNoSeq or SourceLive; "": the
	// feed with resume. Standby: started with "standby":{"enabled":true}.
	Source  string `json:"source,omitempty"`
	Standby bool   `json:"standby,omitempty"`
}

// Incarnation is one worker process: its id (the lease owner it was given),
// slot, life and how it ended.
type Incarnation struct {
	ID       string    `json:"id"`
	Slot     int       `json:"slot"`
	Pid      int       `json:"pid"`
	Started  time.Time `json:"started"`
	Ended    time.Time `json:"ended"`          // zero while running
	End      string    `json:"end,omitempty"`  // kill-9 | sigterm | shutdown | dead (exited on its own once declared dead: zombie, partition) | exited
	Exit     string    `json:"exit,omitempty"` // exit status ("0" or the error)
	OffsetMs int64     `json:"offset_ms,omitempty"`
	// Paused are its SIGSTOP..SIGCONT intervals.
	Paused [][2]time.Time `json:"paused,omitempty"`
}

// Row is one session of the sessions table, read at the end, with where its
// next owner resumes (the larger of last_seq and release_seq).
type Row struct {
	Session string `json:"session"`
	State   string `json:"desired_state"`
	Owner   string `json:"lease_owner,omitempty"` // "": no owner (attribute absent)
	Epoch   int64  `json:"lease_epoch"`
	Failed  bool   `json:"failed,omitempty"` // failed_generation = generation
	LastSeq *int64 `json:"last_seq"`         // the larger of last_seq and release_seq; nil: none
}

// WorkerRow is one worker record of the table.
type WorkerRow struct {
	ID         string `json:"id"`
	State      string `json:"w_state"` // ALIVE | DEAD | LEFT
	Epoch      int64  `json:"w_epoch"`
	Seq        int64  `json:"hb_seq"`
	List       string `json:"w_list"`
	DeclaredBy string `json:"declared_dead_by,omitempty"`
}

// Snapshot is the table at one instant.
type Snapshot struct {
	At      time.Time   `json:"at"`
	Rows    []Row       `json:"rows"`
	Workers []WorkerRow `json:"workers"`
}

// unowned reports whether s has an orphan row.
func (s Snapshot) unowned() bool {
	return slices.ContainsFunc(s.Rows, Row.orphan)
}

// orphan reports whether the row is a STARTED session that has not failed
// and has no owner (what the end-ownership check reports).
func (r Row) orphan() bool {
	return r.State == schema.StateStarted && !r.Failed && r.Owner == ""
}

// worker is the record of worker id (ok false: none).
func (s Snapshot) worker(id string) (WorkerRow, bool) {
	for _, w := range s.Workers {
		if w.ID == id {
			return w, true
		}
	}
	return WorkerRow{}, false
}

// SinkFile is the cross-check of one worker slot's sink file: every line
// must be a record of one of the slot's own incarnations.
type SinkFile struct {
	Slot      int    `json:"slot"`
	Path      string `json:"path"`
	Lines     int    `json:"lines"`
	Bad       int    `json:"bad"`       // unparsable lines (none expected)
	Foreign   int    `json:"foreign"`   // records naming another slot's worker
	Truncated int    `json:"truncated"` // stdout lines cut short by the process ending (not delivered)
}

// Evidence is everything the checks read.
type Evidence struct {
	Start, End   time.Time
	Deliveries   []Delivery
	Conns        []feed.ConnRecord
	FeedStats    feed.Stats
	Faults       []Fault
	Actions      []Action
	Incarnations []Incarnation
	Settled      Snapshot // after the last fault, every worker running
	Final        Snapshot // after every worker stopped gracefully
	SinkFiles    []SinkFile
	BadLines     int64 // stdout lines that were not sink records
	// Moves are the rebalancing hand-offs the workers logged ("session
	// handed off to rebalance"): they explain an ownership change.
	Moves []Move
	// CPUPressure samples the host's CPU pressure (Linux PSI) during the
	// run: context for timing violations, never a reason to drop one.
	CPUPressure []PressureSample
	// Skips are the messages the workers logged as skipped after a
	// permanent sink refusal; Releases their "lease released" / "session
	// handed off to rebalance" lines (the last_seq each released at).
	Skips    []Skip
	Releases []Release
	// Sink is what the destination and the sink fault proxy say (an AWS
	// sink only).
	Sink *SinkEvidence `json:",omitempty"`
	// Planned are the planned reconnects the workers logged (switched or
	// given up): figures only, never judged (the feed's records are).
	Planned []PlannedLog `json:",omitempty"`
	// Poisoned are the destination records whose payload is a poisoned
	// message (source-poison; FeedStats.Poisons names what was sent).
	Poisoned []PoisonArrival `json:",omitempty"`
}

// PlannedLog is one planned reconnect as its worker logged it: switched
// to the new connection, or given up (the current connection stayed).
type PlannedLog struct {
	Session  string  `json:"session"`
	Worker   string  `json:"worker"`
	Cause    string  `json:"cause"` // max_connection_age | reconnect_on
	Switched bool    `json:"switched"`
	Overlap  int64   `json:"overlap,omitempty"`      // messages both connections carried (dropped by the dedupe)
	SavedMs  float64 `json:"gap_saved_ms,omitempty"` // dial to caught up: the gap a reconnect after the close would have left
	Error    string  `json:"error,omitempty"`
	AtNs     int64   `json:"t"`
}

// Log messages of the worker's planned reconnects (workers/streamer
// internal/session/planned.go).
const (
	plannedSwitchedMessage = "planned reconnect: switched to the new connection"
	plannedGivenUpMessage  = "planned reconnect given up: the current connection stays"
)

// readPlanned reads the planned reconnects from a worker's log (JSON
// lines; other lines are skipped).
func readPlanned(path string) ([]PlannedLog, error) {
	var out []PlannedLog
	err := scanLog(path, "planned reconnect", func(b []byte) {
		var l struct {
			Message string    `json:"message"`
			Session string    `json:"connection_id"`
			Worker  string    `json:"worker_id"`
			Cause   string    `json:"cause"`
			Overlap int64     `json:"overlap"`
			Saved   float64   `json:"gap_saved"`
			Error   string    `json:"error"`
			Time    time.Time `json:"time"`
		}
		if json.Unmarshal(b, &l) != nil || l.Session == "" || (l.Message != plannedSwitchedMessage && l.Message != plannedGivenUpMessage) {
			return
		}
		out = append(out, PlannedLog{Session: l.Session, Worker: l.Worker, Cause: l.Cause, Switched: l.Message == plannedSwitchedMessage,
			Overlap: l.Overlap, SavedMs: l.Saved, Error: l.Error, AtNs: l.Time.UnixNano()})
	})
	return out, err
}

// scanLog calls line with every line of the worker log at path that holds
// needle (a missing log has none).
func scanLog(path, needle string, line func([]byte)) error {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("worker log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if b := sc.Bytes(); bytes.Contains(b, []byte(needle)) {
			line(b)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("worker log %s: %w", path, err)
	}
	return nil
}

// Move is one rebalancing hand-off as its sender logged it.
type Move struct {
	Session string `json:"session"`
	From    string `json:"from"`
	To      string `json:"to"`
	AtNs    int64  `json:"t"` // the log line's time (release written)
}

// readMoves reads the rebalancing hand-offs from a worker's log (JSON
// lines; other lines are skipped).
func readMoves(path string) ([]Move, error) {
	var out []Move
	err := scanLog(path, moveLogMessage, func(b []byte) {
		var l struct {
			Message string    `json:"message"`
			Session string    `json:"connection_id"`
			From    string    `json:"worker_id"`
			To      string    `json:"to"`
			Time    time.Time `json:"time"`
		}
		if json.Unmarshal(b, &l) != nil || l.Message != moveLogMessage || l.Session == "" {
			return
		}
		out = append(out, Move{Session: l.Session, From: l.From, To: l.To, AtNs: l.Time.UnixNano()})
	})
	return out, err
}

// moveLogMessage is the message of the worker's log line for a
// rebalancing hand-off (workers/streamer).
const moveLogMessage = "session handed off to rebalance"

// PressureSample is one reading of /proc/pressure/cpu: the total time (µs)
// some task waited for a CPU, since boot.
type PressureSample struct {
	AtNs    int64 `json:"t"`
	TotalUs int64 `json:"us"`
}

// readCPUPressure reads the "some" total of /proc/pressure/cpu (ok false
// where PSI is not available).
func readCPUPressure() (int64, bool) {
	b, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "some ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "total="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				return n, err == nil
			}
		}
	}
	return 0, false
}

// sampleCPUPressure reads the CPU pressure every `every` until stop is
// closed, then sends what it read on out.
func sampleCPUPressure(every time.Duration, stop <-chan struct{}, out chan<- []PressureSample) {
	var got []PressureSample
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if v, ok := readCPUPressure(); ok {
			got = append(got, PressureSample{AtNs: time.Now().UnixNano(), TotalUs: v})
		}
		select {
		case <-stop:
			out <- got
			return
		case <-t.C:
		}
	}
}

// recorder stamps and keeps every sink record the stack's pumps hand over,
// and keeps the latest per session for the orchestration's waits.
type recorder struct {
	mu     sync.Mutex
	broken int64 // destination messages that were not sink envelopes
	all    []Delivery
	// poisoned are the destination records of poisoned messages.
	poisoned []PoisonArrival
	last     map[string]Delivery
	maxSq    map[string]int64
}

func newRecorder() *recorder {
	return &recorder{last: map[string]Delivery{}, maxSq: map[string]int64{}}
}

// onSink is devstack's OnSink: called from each worker's stdout reader.
func (r *recorder) onSink(s devstack.SinkRecord) {
	r.mu.Lock()
	d := Delivery{Session: s.ConnectionID, Seq: s.Seq, Epoch: s.LeaseEpoch, Worker: s.WorkerID, ReceivedAtMs: s.ReceivedAtMs, AtNs: time.Now().UnixNano(),
		FeedSeq: int64(s.DataSeq)}
	r.all = append(r.all, d)
	r.last[d.Session] = d
	r.maxSq[d.Session] = max(r.maxSq[d.Session], d.Seq)
	r.mu.Unlock()
}

func (r *recorder) deliveries() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Delivery(nil), r.all...)
}

// lastOf is the latest delivery of every session in ids.
func (r *recorder) lastOf(ids []string) map[string]Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]Delivery, len(ids))
	for _, id := range ids {
		if d, ok := r.last[id]; ok {
			out[id] = d
		}
	}
	return out
}

// maxSeqOf is the highest seq delivered for each of ids.
func (r *recorder) maxSeqOf(ids []string) map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int64, len(ids))
	for _, id := range ids {
		out[id] = r.maxSq[id]
	}
	return out
}

// owners maps each of ids to the worker of its latest delivery, if that
// arrived within recent of now.
func (r *recorder) owners(ids []string, recent time.Duration) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	cut := time.Now().Add(-recent).UnixNano()
	out := map[string]string{}
	for _, id := range ids {
		if d, ok := r.last[id]; ok && d.AtNs >= cut {
			out[id] = d.Worker
		}
	}
	return out
}

// readSinkFile checks one slot's sink file: lines, unparsable lines, and
// records naming a worker that is not one of ids.
func readSinkFile(path string, slot int, ids map[string]bool) (SinkFile, error) {
	sf := SinkFile{Slot: slot, Path: path}
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return sf, nil
		}
		return sf, fmt.Errorf("sink file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		sf.Lines++
		r, err := devstack.ParseSinkLine(sc.Bytes())
		if err != nil {
			sf.Bad++
			continue
		}
		if !ids[r.WorkerID] {
			sf.Foreign++
		}
	}
	if err := sc.Err(); err != nil {
		return sf, fmt.Errorf("sink file %s: %w", path, err)
	}
	return sf, nil
}

// Saved is a run's evidence with the settings and plan it ran under: what
// `chaos -rejudge` reads to judge and draw a run again.
type Saved struct {
	Settings Settings `json:"settings"`
	Plan     Plan     `json:"plan"`
	Evidence Evidence `json:"evidence"`
}

// EvidenceFile is where Run keeps the evidence, under the stack's folder.
const EvidenceFile = "evidence.json.gz"

// SaveEvidence writes s to path as gzipped JSON.
func SaveEvidence(path string, s Saved) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("save evidence: %w", err)
	}
	zw := gzip.NewWriter(f)
	if err := json.NewEncoder(zw).Encode(s); err != nil {
		f.Close()
		return fmt.Errorf("save evidence: %w", err)
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return fmt.Errorf("save evidence: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save evidence: %w", err)
	}
	return nil
}

// LoadEvidence reads what SaveEvidence wrote.
func LoadEvidence(path string) (Saved, error) {
	var s Saved
	f, err := os.Open(path)
	if err != nil {
		return s, fmt.Errorf("load evidence: %w", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return s, fmt.Errorf("load evidence %s: %w", path, err)
	}
	defer zr.Close()
	if err := json.NewDecoder(zr).Decode(&s); err != nil {
		return s, fmt.Errorf("load evidence %s: %w", path, err)
	}
	return s, nil
}

// writeJSONFile writes v as indented JSON.
func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
