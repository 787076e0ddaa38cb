// What the harness reads from a worker's files after the run: its log (the
// planned reconnects and the rebalancing hand-offs it logged) and its sink
// file (every line a record of the slot's own incarnations).

package chaos

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/wsfleet/wsfleet/scripts/devstack"
)

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
	// ReadyAtNs is when the receiver answered that it would take the
	// session, before the sender closed it (a session whose standby the
	// receiver holds; 0: not asked).
	ReadyAtNs int64 `json:"ready_t,omitempty"`
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
			ReadyMs *float64  `json:"ready_ms"`
		}
		if json.Unmarshal(b, &l) != nil || l.Message != moveLogMessage || l.Session == "" {
			return
		}
		m := Move{Session: l.Session, From: l.From, To: l.To, AtNs: l.Time.UnixNano()}
		if l.ReadyMs != nil {
			m.ReadyAtNs = m.AtNs - int64(*l.ReadyMs*float64(time.Millisecond))
		}
		out = append(out, m)
	})
	return out, err
}

// moveLogMessage is the message of the worker's log line for a
// rebalancing hand-off (workers/streamer).
const moveLogMessage = "session handed off to rebalance"

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
