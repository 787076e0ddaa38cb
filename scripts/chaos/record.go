// The evidence a run is judged on: Evidence and its records (deliveries,
// faults, actions, worker incarnations, the table's snapshots, the sink
// files' cross-check). Where they come from: record_recorder.go (the
// deliveries as they arrive), record_files.go (the workers' logs and sink
// files), record_pressure.go (the host's CPU pressure), sink.go (what an
// AWS sink adds); saved by record_saved.go.

package chaos

import (
	"slices"
	"time"

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
