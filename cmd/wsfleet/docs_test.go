package main

import (
	"bytes"
	"github.com/wsfleet/wsfleet/testkit/docsnippet"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/cmd/wsfleet/apiclient"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionapi"
	"github.com/wsfleet/wsfleet/shared/spec"
)

// columnStarts are the offsets where the labels of a tabwriter header
// start: tabwriter pads every cell with at least two spaces, and a label
// has at most single spaces inside ("LAST ERROR").
func columnStarts(header string) []int {
	starts := []int{0}
	for i := 2; i < len(header); i++ {
		if header[i] != ' ' && header[i-1] == ' ' && header[i-2] == ' ' {
			starts = append(starts, i)
		}
	}
	return starts
}

// tableCells splits row at the header's column starts. It fails unless
// every cell starts exactly at its column (two spaces before it, none
// elsewhere): the row was printed by the same tabwriter as the header.
func tableCells(t *testing.T, what, header, row string) []string {
	t.Helper()
	starts := columnStarts(header)
	var cells []string
	for i, s := range starts {
		if s >= len(row) || row[s] == ' ' || s > 0 && (row[s-1] != ' ' || row[s-2] != ' ') {
			t.Errorf("%s: row %q has no cell at column %d (offset %d of %q)", what, row, i+1, s, header)
			return nil
		}
		end := len(row)
		if i+1 < len(starts) {
			end = min(starts[i+1], len(row))
		}
		cell := row[s:end]
		if strings.Contains(strings.TrimSpace(cell), "  ") {
			t.Errorf("%s: row %q: cell %q spans two columns of %q", what, row, cell, header)
		}
		cells = append(cells, strings.TrimSpace(cell))
	}
	return cells
}

// tableRows are the table's rows among the lines between its header and
// its summary: the status table's standby lines (below its rows) aside.
func tableRows(lines []string) []string {
	var rows []string
	for _, l := range lines {
		if !strings.HasPrefix(l, standbyLinePrefix) {
			rows = append(rows, l)
		}
	}
	return rows
}

var number = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)

// digitsOut is s with every number N: a summary line's form.
func digitsOut(s string) string { return number.ReplaceAllString(s, "N") }

// dashMask says which cells are "-".
func dashMask(cells []string) string {
	var b strings.Builder
	for _, c := range cells {
		if c == "-" {
			b.WriteByte('-')
		} else {
			b.WriteByte('x')
		}
	}
	return b.String()
}

// TestDocsShowTheTables keeps the status and workers tables pasted in
// docs/local-stack.md (from a real make dev run) the tables the CLI prints.
// It renders both from fixed inputs through writeTable and writeWorkers (what
// wsfleet status and wsfleet workers call) and checks every "$ bin/wsfleet
// status" and "$ bin/wsfleet workers" block of the doc: the same header
// (its column widths aside, which follow the values); every row a cell per
// column, each starting at its header label as the tabwriter puts it; a
// session state the table prints; for workers, the cells that read "-" for
// the row's state the same as in the CLI's rendering (a dead or left worker
// has no load or share, an alive one no end); the summary line the CLI's
// with every number replaced (the counts, loads and imbalance change per
// run), and as many rows as it counts. Values that change per run (ids,
// pids, hosts, times, seqs) are not compared. scripts/devstack/cmd/devstack's
// TestDocsWalkThrough compares the first blocks with a running stack's.
func TestDocsShowTheTables(t *testing.T) {
	doc, err := os.ReadFile("../../docs/local-stack.md")
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1_800_000_000_000)
	ms := func(ago time.Duration) int64 { return now.Add(-ago).UnixMilli() }
	seq := int64(41)

	var status bytes.Buffer
	if err := writeTable(&status, []apiclient.Session{
		{ConnectionID: "a", DesiredState: "STARTED", LeaseOwner: "worker-1-run1", LeaseEpoch: 2, LastSeq: &seq},
		{ConnectionID: "b", DesiredState: "STOPPED", LeaseEpoch: 1, LastSeq: &seq},
		{ConnectionID: "c", DesiredState: "STARTED", Failed: true, LeaseEpoch: 1, LastError: "dial: refused", LastErrorAt: "2027-01-15T08:00:00Z"},
		{ConnectionID: "d", DesiredState: "STARTED", LeaseOwner: "worker-1-run1", LeaseEpoch: 1, LastSeq: &seq,
			View:          spec.View{Standby: &spec.StandbyView{Enabled: true, Window: "30s", WindowBytes: 1 << 20}},
			StandbyHolder: &sessionapi.StandbyHolder{WorkerID: "worker-2-run1", Epoch: 1}},
	}); err != nil {
		t.Fatal(err)
	}
	var workers bytes.Buffer
	alive := apiclient.Worker{ID: "worker-1-run1", State: schema.WorkerAlive, Epoch: 1, Load: 2, Capacity: 1000, FairShare: 0.7, AdminAddr: "127.0.0.1:8801",
		HeartbeatAtMs: ms(300 * time.Millisecond), StartedAtMs: ms(10 * time.Second), Host: "vm", PID: 7}
	draining := alive
	draining.ID, draining.Draining = "worker-2-run1", true
	dead := alive
	dead.ID, dead.State, dead.Epoch, dead.EndedAtMs, dead.DeclaredDeadBy = "worker-3-run1", schema.WorkerDead, 2, ms(5*time.Second), "worker-1-run1"
	left := alive
	left.ID, left.State, left.EndedAtMs = "worker-4-run1", schema.WorkerLeft, ms(4*time.Second)
	if err := writeWorkers(&workers, apiclient.Workers{Workers: []apiclient.Worker{alive, draining, dead, left}, Imbalance: 1.5}, now); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		cmd      string
		rendered string
		stateCol int // the STATE column
	}{
		{"bin/wsfleet status", status.String(), 1},
		{"bin/wsfleet workers", workers.String(), 1},
	} {
		lines := strings.Split(strings.TrimSuffix(tc.rendered, "\n"), "\n")
		header, summary := lines[0], lines[len(lines)-1]
		masks := map[string]string{} // state → its dash mask, as rendered
		for _, row := range tableRows(lines[1 : len(lines)-1]) {
			cells := tableCells(t, "rendered "+tc.cmd, header, row)
			if cells != nil {
				masks[cells[tc.stateCol]] = dashMask(cells)
			}
		}
		found := 0
		for _, s := range docsnippet.Sections(string(doc)) {
			if s.Cmd != tc.cmd {
				continue
			}
			found++
			what := "docs/local-stack.md, $ " + tc.cmd + " #" + strconv.Itoa(found)
			if len(s.Out) < 2 {
				t.Errorf("%s: no table: %q", what, s.Out)
				continue
			}
			if flat(s.Out[0]) != flat(header) {
				t.Errorf("%s: header\n%s\nthe CLI prints\n%s", what, s.Out[0], header)
				continue
			}
			rows, last := tableRows(s.Out[1:len(s.Out)-1]), s.Out[len(s.Out)-1]
			if digitsOut(last) != digitsOut(summary) {
				t.Errorf("%s: summary line\n%s\nthe CLI prints (numbers aside)\n%s", what, last, summary)
			}
			if n, err := strconv.Atoi(strings.Fields(last)[0]); err != nil || n != len(rows) {
				t.Errorf("%s: %d rows, the summary says %q", what, len(rows), last)
			}
			for _, row := range rows {
				cells := tableCells(t, what, s.Out[0], row)
				if cells == nil {
					continue
				}
				want, ok := masks[cells[tc.stateCol]]
				switch {
				case !ok:
					t.Errorf("%s: row %q: state %q is none the CLI prints (%v)", what, row, cells[tc.stateCol], masks)
				case tc.cmd == "bin/wsfleet workers" && dashMask(cells) != want:
					t.Errorf("%s: row %q: cells reading - %s, the CLI's for %s %s", what, row, dashMask(cells), cells[tc.stateCol], want)
				}
			}
		}
		if found == 0 {
			t.Errorf("docs/local-stack.md shows no $ %s block", tc.cmd)
		}
	}
}
