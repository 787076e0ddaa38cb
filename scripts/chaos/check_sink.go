// The sink-integrity pass: the stdout sink's lines and files, or what an AWS
// sink's destination holds.

package chaos

import (
	"maps"
	"slices"
)

// checkSinks is sink-integrity: the workers' stdout lines and sink files,
// or with an AWS sink the destination (checkDestination).
func (j *judge) checkSinks() {
	if j.set.destSink() {
		j.checkDestination()
		return
	}
	if j.ev.BadLines > 0 {
		j.violate(CheckSink, "", j.t0, "%d stdout line(s) that are not sink records", j.ev.BadLines)
	}
	lines := 0
	for _, sf := range j.ev.SinkFiles {
		lines += sf.Lines
		if sf.Bad > 0 {
			j.violate(CheckSink, "", j.t0, "%s: %d unparsable line(s)", sf.Path, sf.Bad)
		}
		if sf.Foreign > 0 {
			j.violate(CheckSink, "", j.t0, "%s: %d record(s) naming a worker that is not one of slot %d's incarnations", sf.Path, sf.Foreign, sf.Slot)
		}
	}
	if len(j.ev.SinkFiles) > 0 && lines != len(j.ev.Deliveries) {
		j.violate(CheckSink, "", j.t0, "the sink files hold %d lines, the harness received %d records", lines, len(j.ev.Deliveries))
	}
}

// checkDestination is sink-integrity with an AWS sink: every message at
// the destination is a sink envelope naming an incarnation of the run,
// and no worker wrote sink lines to its stdout.
func (j *judge) checkDestination() {
	sk := j.ev.Sink // not nil: Analyze judges evidence without it as stdout lines
	if sk.Broken > 0 {
		j.violate(CheckSink, "", j.t0, "%d message(s) at the destination that are not sink envelopes", sk.Broken)
	}
	if sk.ReaderErr != "" {
		j.violate(CheckSink, "", j.t0, "the destination could not be read whole: %s", sk.ReaderErr)
	}
	unknown := map[string]int{}
	for _, d := range j.ev.Deliveries {
		if j.inc[d.Worker] == nil {
			unknown[d.Worker]++
		}
	}
	sk.Unknown = 0
	// A skip is the worker's word: it must name a message the proxy
	// refused permanently (at every attempt), never one it accepted or
	// refused only transiently.
	refused := map[RecordRef]bool{}
	for _, r := range sk.Refused {
		refused[r] = true
	}
	bad := map[string][]int64{}
	for _, k := range j.ev.Skips {
		if sk.Refused == nil && sk.PermanentlyRefused > 0 {
			break // evidence saved before the proxy's refusals were kept
		}
		if !refused[RecordRef{Session: k.Session, Seq: k.Seq, Sub: k.Sub}] {
			bad[k.Session] = append(bad[k.Session], k.Seq)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(bad)) {
		j.violate(CheckNoLoss, id, j.t0, "the worker logged %d message(s) as skipped after a permanent refusal that the sink never refused permanently, e.g. seq %v: a message lost, not skipped", len(bad[id]), bad[id][:min(len(bad[id]), 8)])
	}
	for _, w := range slices.Sorted(maps.Keys(unknown)) { // one order for the report
		n := unknown[w]
		sk.Unknown += n
		j.violate(CheckSink, "", j.t0, "%d record(s) at the destination name worker %q, no incarnation of the run", n, w)
	}
	lines := 0
	for _, sf := range j.ev.SinkFiles {
		lines += sf.Lines
	}
	if lines > 0 || j.ev.BadLines > 0 {
		j.violate(CheckSink, "", j.t0, "the workers wrote %d line(s) to their stdout sink files (%d not records) with the %s sink", lines, j.ev.BadLines, j.set.Sink)
	}
}
