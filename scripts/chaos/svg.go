// The SVG timeline: one row per session, coloured by worker slot, with the
// faults and the violations.

package chaos

import (
	"fmt"
	"html"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// slotColors colour the workers by slot (every incarnation of a slot shares
// its colour; a tick marks each change of tenure). No red: red marks
// violations.
var slotColors = []string{"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#9c755f", "#ff9da7", "#edc948", "#bab0ac", "#8cd17d", "#499894", "#d4a6c8", "#86bcb6", "#f1ce63", "#a0cbe8", "#ffbe7d"}

// faultStyle is how the timeline draws each fault kind: a colour, a short
// label, and whether it spans time (a band) or is an instant (a line).
var faultStyle = map[string]struct {
	color, short string
}{
	KindKill:        {"#d62728", "kill -9"},
	KindZombie:      {"#9467bd", "zombie"},
	KindRolling:     {"#1f77b4", "SIGTERM"},
	KindDynamoDown:  {"#8c564b", "DynamoDB down"},
	KindSQSDown:     {"#bcbd22", "SQS down"},
	KindSourceDrop:  {"#ff7f0e", "drop"},
	KindRefuse:      {"#e377c2", "refuse"},
	KindSchedule:    {"#c49c94", "max age"},
	KindChurn:       {"#17becf", "churn"},
	KindClockOffset: {"#7f7f7f", "clock offset"},
	KindScaleOut:    {"#2ca02c", "scale-out"},
	KindScaleIn:     {"#98df8a", "scale-in"},
	KindPolicy:      {"#000000", "refuse-newer"},

	KindSinkLatency:      {"#17a2b8", "sink latency"},
	KindSinkRefuse:       {"#ff9896", "sink refuse"},
	KindSinkFreeze:       {"#6b6ecf", "sink freeze"},
	KindSinkFreezeDynamo: {"#843c39", "sink+DDB freeze"},
	KindSinkRefuseDynamo: {"#ad494a", "sink refuse+DDB"},
	KindSourcePoison:     {"#bcbd8c", "poison"},
	KindIndexLag:         {"#637939", "index lag"},
	KindThrottle:         {"#e7969c", "throttle"},
	KindAmbiguous:        {"#7b4173", "ambiguous"},
}

func slotOf(worker string) int {
	var n int
	if _, err := fmt.Sscanf(worker, "worker-%d", &n); err != nil {
		return 0
	}
	return n
}

func colorOfSlot(slot int) string {
	if slot <= 0 {
		return "#333333"
	}
	return slotColors[(slot-1)%len(slotColors)]
}

type segment struct {
	from, to float64 // seconds since start
	slot     int
	newTen   bool // the first segment of a tenure
}

// WriteSVG draws the timeline: one row per session over time, each stretch
// of deliveries coloured by the worker slot that made it (a dark tick at
// every change of tenure), the session's STOPPED time hatched, faults as
// bands (outages, pauses, refusals) or lines (kills, SIGTERMs, drops), churn
// and violations marked on their rows.
func WriteSVG(w io.Writer, res Result, ev Evidence) {
	dur := math.Max(ev.End.Sub(ev.Start).Seconds(), 1)
	t0 := ev.Start.UnixNano()
	sec := func(ns int64) float64 { return float64(ns-t0) / 1e9 }
	byS := map[string][]Delivery{}
	for _, d := range ev.Deliveries {
		byS[d.Session] = append(byS[d.Session], d)
	}
	acts := map[string][]Action{}
	for _, a := range ev.Actions {
		acts[a.Session] = append(acts[a.Session], a)
	}
	// Rows in the order the sessions were first started.
	firstAt := map[string]int64{}
	for _, a := range ev.Actions {
		if v, ok := firstAt[a.Session]; !ok || a.At.UnixNano() < v {
			firstAt[a.Session] = a.At.UnixNano()
		}
	}
	for _, d := range ev.Deliveries {
		if v, ok := firstAt[d.Session]; !ok || d.AtNs < v {
			firstAt[d.Session] = d.AtNs
		}
	}
	ids := slices.Sorted(maps.Keys(firstAt))
	sort.SliceStable(ids, func(a, b int) bool { return firstAt[ids[a]] < firstAt[ids[b]] })

	const (
		width  = 1500
		left   = 96
		right  = 24
		laneH  = 64 // the faults lane
		top    = 56
		legend = 80
	)
	rowH := math.Max(5, math.Min(14, 800/math.Max(float64(len(ids)), 1)))
	plotW := float64(width - left - right)
	rowsTop := float64(top + laneH + 34)
	height := int(rowsTop + rowH*float64(len(ids)) + 30 + legend)
	x := func(s float64) float64 { return float64(left) + math.Max(0, math.Min(s, dur))/dur*plotW }
	rowY := func(i int) float64 { return rowsTop + float64(i)*rowH }
	row := map[string]int{}
	for i, id := range ids {
		row[id] = i
	}
	gapSec := math.Max(1, 3/math.Max(res.Settings.FeedRate, 0.1))

	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	esc := html.EscapeString
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="11">`+"\n", width, height, width, height)
	p(`<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="#c8c8c8" stroke-width="2"/></pattern></defs>` + "\n")
	p(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	verdict := "PASS — 0 violations"
	vcol := "#2a7d2a"
	if !res.OK() {
		verdict, vcol = fmt.Sprintf("FAIL — %d violation(s)", len(res.Violations)), "#d62728"
	}
	s := res.Settings
	p(`<text x="%d" y="22" font-size="16" font-weight="bold">wsfleet chaos timeline — seed %d</text>`+"\n", left, s.Seed)
	p(`<text x="%d" y="22" font-size="16" font-weight="bold" fill="%s" text-anchor="end">%s</text>`+"\n", width-right, vcol, esc(verdict))
	p(`<text x="%d" y="40" fill="#444">%d workers, %d sessions (%d with churn); liveness TTL %s, heartbeat %s, checkpoint %s, reconcile %s; feed %.0f msg/s. Rows: sessions; colour: the worker delivering; gaps: nothing delivered.</text>`+"\n",
		left, s.Workers, s.Sessions, len(ids), msText(s.LeaseTTLMs), msText(s.HeartbeatMs), msText(s.CheckpointMs), msText(s.ReconcileMs), s.FeedRate)

	// Faults lane: one sub-row per family so labels do not collide.
	lanes := map[string]int{KindKill: 0, KindZombie: 0, KindRolling: 1, KindClockOffset: 1, KindPolicy: 1, KindDynamoDown: 2, KindSQSDown: 2, KindSourceDrop: 3, KindRefuse: 3, KindSchedule: 3, KindChurn: 3, KindScaleOut: 1, KindScaleIn: 1,
		KindSinkLatency: 2, KindSinkRefuse: 2, KindSinkFreeze: 2, KindSinkFreezeDynamo: 0, KindSinkRefuseDynamo: 2, KindSourcePoison: 3,
		KindIndexLag: 0, KindThrottle: 2, KindAmbiguous: 2}
	subH := float64(laneH) / 4
	// A label goes right of its mark when it ends before the next mark of
	// its lane: "#n kind", else "#n", else nothing (the report lists all).
	nextIn := map[int]float64{}
	room := make([]float64, len(res.Faults))
	for i := len(res.Faults) - 1; i >= 0; i-- {
		f := res.Faults[i]
		l := lanes[f.Kind]
		room[i] = plotW + float64(left) + float64(right)
		if v, ok := nextIn[l]; ok {
			room[i] = v
		}
		nextIn[l] = x(f.T)
	}
	p(`<text x="%d" y="%.1f" text-anchor="end" fill="#444">faults</text>`+"\n", left-6, float64(top)+subH*2+4)
	for fi, f := range res.Faults {
		st := faultStyle[f.Kind]
		y := float64(top) + float64(lanes[f.Kind])*subH
		x1, x2 := x(f.T), x(f.TEnd)
		title := esc(faultTitle(f))
		if x2-x1 >= 2 {
			p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="0.75"><title>%s</title></rect>`+"\n", x1, y+1, x2-x1, subH-2, st.color, title)
		} else {
			p(`<rect x="%.1f" y="%.1f" width="2" height="%.1f" fill="%s"><title>%s</title></rect>`+"\n", x1-1, y+1, subH-2, st.color, title)
		}
		lx := math.Max(x1, x2) + 2
		label := fmt.Sprintf("#%d %s", f.N, st.short)
		if f.Kind == KindRolling && f.Note != "" && !strings.HasPrefix(f.Note, "1/") {
			label = fmt.Sprintf("#%d", f.N)
		}
		if lx+5.2*float64(len(label)) > room[fi]-2 {
			label = fmt.Sprintf("#%d", f.N)
		}
		if lx+5.2*float64(len(label)) <= room[fi]-2 {
			p(`<text x="%.1f" y="%.1f" font-size="9" fill="#222">%s</text>`+"\n", lx, y+subH-4, esc(label))
		}
		// Across the rows: a band for what lasts and hits everyone, a line
		// for a worker's instant.
		bottom := rowY(len(ids))
		switch f.Kind {
		case KindDynamoDown, KindSQSDown, KindZombie, KindSinkLatency, KindSinkRefuse, KindSinkFreeze, KindSinkFreezeDynamo, KindSinkRefuseDynamo,
			KindIndexLag, KindThrottle, KindAmbiguous:
			p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="0.10"/>`+"\n", x1, rowsTop, math.Max(x2-x1, 1), bottom-rowsTop, st.color)
		case KindKill, KindRolling, KindClockOffset, KindPolicy:
			dash := ""
			if f.Kind == KindPolicy {
				dash = ` stroke-dasharray="4,3"`
			}
			p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-opacity="0.55" stroke-width="1"%s/>`+"\n", x1, rowsTop, x1, bottom, st.color, dash)
		}
	}

	// Host CPU pressure: the darker, the more of that second some task
	// waited for a CPU (context for timing; other work shares the host).
	if h := res.HostCPU; h.Measured {
		cy := float64(top + laneH + 3)
		p(`<text x="%d" y="%.1f" text-anchor="end" font-size="9" fill="#444">host CPU wait</text>`+"\n", left-6, cy+8)
		for sec, f := range h.PerSec {
			if f < 0.02 {
				continue
			}
			p(`<rect x="%.1f" y="%.1f" width="%.1f" height="9" fill="#000" fill-opacity="%.2f"><title>%ds: %.0f%%</title></rect>`+"\n", x(float64(sec)), cy, math.Max(x(float64(sec+1))-x(float64(sec)), 0.5), math.Min(f, 1)*0.8, sec, 100*f)
		}
	}

	// Time axis.
	step := 10.0
	for _, c := range []float64{10, 20, 30, 60, 120} {
		step = c
		if dur/c <= 12 {
			break
		}
	}
	axisY := rowsTop - 6
	p(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#888"/>`+"\n", left, axisY, width-right, axisY)
	for t := 0.0; t <= dur+0.001; t += step {
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888"/>`+"\n", x(t), axisY-4, x(t), axisY)
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eeeeee"/>`+"\n", x(t), rowsTop, x(t), rowY(len(ids)))
		p(`<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10" fill="#444">%s</text>`+"\n", x(t), axisY-7, (time.Duration(t) * time.Second).String())
	}

	// Rows.
	labelEvery := int(math.Ceil(10 / rowH))
	for i, id := range ids {
		y := rowY(i)
		if i%labelEvery == 0 {
			p(`<text x="%d" y="%.1f" text-anchor="end" font-size="%.0f" fill="#333">%s</text>`+"\n", left-6, y+rowH-1, math.Min(10, math.Max(rowH, 8)), esc(id))
		}
		// STOPPED time, hatched.
		on, since := false, 0.0
		for _, a := range acts[id] {
			if a.Acked.IsZero() {
				continue
			}
			t := sec(a.Acked.UnixNano())
			if a.Op == "stop" && on {
				on, since = false, t
			} else if a.Op != "stop" && !on {
				if since > 0 {
					p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="url(#hatch)"><title>%s STOPPED</title></rect>`+"\n", x(since), y, math.Max(x(t)-x(since), 1), rowH-1, esc(id))
				}
				on = true
			}
		}
		if !on && since > 0 {
			p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="url(#hatch)"><title>%s STOPPED</title></rect>`+"\n", x(since), y, math.Max(x(dur)-x(since), 1), rowH-1, esc(id))
		}
		for _, sg := range segments(byS[id], sec, gapSec) {
			p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", x(sg.from), y, math.Max(x(sg.to)-x(sg.from), 1), rowH-1, colorOfSlot(sg.slot))
			if sg.newTen {
				p(`<rect x="%.1f" y="%.1f" width="1.2" height="%.1f" fill="#111"/>`+"\n", x(sg.from), y, rowH-1)
			}
		}
		for _, a := range acts[id] {
			if a.Acked.IsZero() || a.Fault == 0 {
				continue
			}
			t := x(sec(a.Acked.UnixNano()))
			if a.Op == "stop" {
				p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#000"><title>stop</title></rect>`+"\n", t-1.5, y+rowH/2-1.5, 3.0, 3.0)
			} else {
				p(`<path d="M%.1f %.1f l3.5 %.1f l-3.5 %.1f z" fill="#17becf" stroke="#0b6b75" stroke-width="0.5"><title>%s</title></path>`+"\n", t, y, (rowH-1)/2, (rowH-1)/2, a.Op)
			}
		}
	}
	for _, f := range res.Faults {
		if f.Kind != KindSourceDrop && f.Kind != KindRefuse {
			continue
		}
		col := faultStyle[f.Kind].color
		for _, id := range f.Sessions {
			i, ok := row[id]
			if !ok {
				continue
			}
			y := rowY(i)
			if f.Kind == KindRefuse {
				p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="%s" stroke-width="1.2"><title>source refusing</title></rect>`+"\n", x(f.T), y, math.Max(x(f.TEnd)-x(f.T), 1), rowH-1, col)
			} else {
				p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"><title>source drop</title></line>`+"\n", x(f.T), y-1, x(f.T), y+rowH, col)
			}
		}
	}
	// Violations: a red ring on the session's row (or above the rows).
	for _, v := range res.Violations {
		y := rowsTop - 12
		if i, ok := row[v.Session]; ok {
			y = rowY(i) + rowH/2
		}
		p(`<circle cx="%.1f" cy="%.1f" r="%.1f" fill="none" stroke="#d62728" stroke-width="2"><title>%s</title></circle>`+"\n", x(v.T), y, math.Max(rowH/2+1, 4), esc(v.Check+": "+v.Detail))
	}

	// Legend.
	ly := rowY(len(ids)) + 24
	p(`<text x="%d" y="%.1f" font-weight="bold">workers</text>`+"\n", left, ly)
	slots := map[int][]Incarnation{}
	for _, inc := range res.Incarnations {
		slots[inc.Slot] = append(slots[inc.Slot], inc)
	}
	lx := float64(left) + 70
	for slot := 1; slot <= len(slots); slot++ {
		label := fmt.Sprintf("worker-%d (%d process(es))", slot, len(slots[slot]))
		for _, inc := range slots[slot] {
			if inc.OffsetMs != 0 {
				label = fmt.Sprintf("worker-%d (%d process(es); clock %+d ms from %s on)", slot, len(slots[slot]), inc.OffsetMs, inc.ID)
				break
			}
		}
		p(`<rect x="%.1f" y="%.1f" width="14" height="10" fill="%s"/><text x="%.1f" y="%.1f">%s</text>`+"\n", lx, ly-9, colorOfSlot(slot), lx+18, ly, esc(label))
		lx += 28 + 6.8*float64(len(label))
		if lx > float64(width-300) {
			lx, ly = float64(left)+70, ly+16
		}
	}
	ly += 22
	p(`<text x="%d" y="%.1f" font-weight="bold">faults</text>`+"\n", left, ly)
	lx = float64(left) + 70
	for _, k := range append(append([]string(nil), AllKinds...), KindPolicy) {
		st := faultStyle[k]
		p(`<rect x="%.1f" y="%.1f" width="14" height="10" fill="%s" fill-opacity="0.75"/><text x="%.1f" y="%.1f">%s</text>`+"\n", lx, ly-9, st.color, lx+18, ly, esc(st.short))
		lx += 32 + 6.8*float64(len(st.short))
	}
	ly += 18
	p(`<text x="%d" y="%.1f" fill="#444">black tick: a new tenure (worker, epoch) took the session over · hatched: STOPPED · black square: stop · cyan triangle: start / re-start · orange line: source drop · pink box: source refusing · red ring: violation (hover for details)</text>`+"\n", left, ly)
	p("</svg>\n")
}

// segments cuts a session's deliveries into stretches of one tenure without
// a gap longer than gapSec.
func segments(ds []Delivery, sec func(int64) float64, gapSec float64) []segment {
	sort.SliceStable(ds, func(a, b int) bool { return ds[a].AtNs < ds[b].AtNs })
	var out []segment
	var curKey string
	for _, d := range ds {
		k := fmt.Sprintf("%s@%d", d.Worker, d.Epoch)
		t := sec(d.AtNs)
		if n := len(out); n > 0 && k == curKey && t-out[n-1].to <= gapSec {
			out[n-1].to = t
			continue
		}
		out = append(out, segment{from: t, to: t, slot: slotOf(d.Worker), newTen: curKey != "" && k != curKey})
		curKey = k
	}
	return out
}

func faultTitle(f FaultResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s at %.1f s", f.N, f.Kind, f.T)
	if f.TEnd > f.T {
		fmt.Fprintf(&b, " for %.1f s", f.TEnd-f.T)
	}
	if f.Worker != "" {
		fmt.Fprintf(&b, " %s", f.Worker)
	}
	if f.NewWorker != "" {
		fmt.Fprintf(&b, " → %s", f.NewWorker)
	}
	if f.OffsetMs != 0 {
		fmt.Fprintf(&b, " clock %+d ms", f.OffsetMs)
	}
	if len(f.Sessions) > 0 {
		fmt.Fprintf(&b, " %d session(s)", len(f.Sessions))
	}
	if f.Affected > 0 {
		fmt.Fprintf(&b, "; %d/%d recovered, p50 %.0f ms, max %.0f ms", f.Recovered, f.Affected, f.Recovery.P50, f.Recovery.Max)
	}
	return b.String()
}
