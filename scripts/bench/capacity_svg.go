// The capacity section's charts, drawn by the bench itself (SVG, no
// external tool, as chaos draws its timeline): the worker against the bare
// client per session at each size, as grouped bars.

package bench

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// Chart files, written beside BENCHMARKS.md.
const (
	ChartMemory     = "benchmarks-capacity-memory.svg"
	ChartCPU        = "benchmarks-capacity-cpu.svg"
	ChartOneSession = "benchmarks-capacity-one-session.svg"
)

// Bar colours: the worker and the bare client.
const (
	colorWorker = "#4e79a7"
	colorBare   = "#f28e2b"
)

// barSeg is one stacked part of a bar.
type barSeg struct {
	Name    string
	Value   float64
	Opacity float64
}

// chartBar is one bar: its client, its parts (stacked from the axis) and
// the value printed on it.
type chartBar struct {
	Who   string
	Color string
	Segs  []barSeg
	Label string
}

func (b chartBar) total() float64 {
	var t float64
	for _, s := range b.Segs {
		t += math.Max(s.Value, 0)
	}
	return t
}

// chartGroup is one size: its bars side by side, a label under them and a
// note over them (the difference or the ratio).
type chartGroup struct {
	Label, Sub, Note string
	Bars             []chartBar
}

// barChart is one grouped bar chart.
type barChart struct {
	Title, Subtitle, Unit string
	Groups                []chartGroup
	// Parts name the stacked parts' opacities in the legend (none: one
	// part per bar).
	Parts []barSeg
}

// niceStep is a round tick step (1, 2 or 5 × 10^k) giving about n ticks up
// to max.
func niceStep(max float64, n int) float64 {
	if n < 1 {
		return 1
	}
	return niceCeil(max / float64(n))
}

// tickLabel formats a tick value.
func tickLabel(v float64) string {
	switch {
	case v >= 10000:
		return thousands(int(v + 0.5))
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case v*10 == math.Trunc(v*10):
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// writeBarChart draws c.
func writeBarChart(w io.Writer, c barChart) {
	const (
		left, right, top = 78, 24, 74
		plotH            = 300
		legendH          = 34
		labelsH          = 52
		groupMinW        = 170
	)
	width := max(760, left+right+groupMinW*len(c.Groups))
	height := top + plotH + labelsH + legendH
	plotW := float64(width - left - right)
	var maxV float64
	for _, g := range c.Groups {
		for _, b := range g.Bars {
			maxV = math.Max(maxV, b.total())
		}
	}
	step := niceStep(maxV*1.12, 5)
	ymax := math.Max(step, math.Ceil(maxV*1.12/step)*step)
	y := func(v float64) float64 { return float64(top+plotH) - v/ymax*plotH }
	esc := html.EscapeString
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="11">`+"\n", width, height, width, height)
	p(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	p(`<text x="%d" y="24" font-size="16" font-weight="bold">%s</text>`+"\n", left, esc(c.Title))
	p(`<text x="%d" y="44" fill="#444">%s</text>`+"\n", left, esc(c.Subtitle))
	// Axis, grid and ticks.
	for v := 0.0; v <= ymax+step/2; v += step {
		p(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e4e4e4"/>`+"\n", left, y(v), width-right, y(v))
		p(`<text x="%d" y="%.1f" text-anchor="end" fill="#444">%s</text>`+"\n", left-6, y(v)+4, tickLabel(v))
	}
	p(`<text x="16" y="%d" transform="rotate(-90 16 %d)" text-anchor="middle" fill="#444">%s</text>`+"\n", top+plotH/2, top+plotH/2, esc(c.Unit))
	p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#888"/>`+"\n", left, top+plotH, width-right, top+plotH)
	if len(c.Groups) > 0 {
		gw := plotW / float64(len(c.Groups))
		for gi, g := range c.Groups {
			gx := float64(left) + gw*float64(gi)
			nb := max(len(g.Bars), 1)
			bw := math.Min(64, gw*0.62/float64(nb))
			x0 := gx + (gw-bw*float64(nb)-6*float64(nb-1))/2
			var tallest float64
			for bi, b := range g.Bars {
				bx := x0 + float64(bi)*(bw+6)
				base := 0.0
				for _, s := range b.Segs {
					v := math.Max(s.Value, 0)
					if v == 0 {
						continue
					}
					op := s.Opacity
					if op == 0 {
						op = 1
					}
					p(`<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="%.2f"><title>%s</title></rect>`+"\n",
						bx, y(base+v), bw, y(base)-y(base+v), b.Color, op, esc(fmt.Sprintf("%s, %s: %s %s", g.Label, b.Who, s.Name, tickLabel(round3(v)))))
					base += v
				}
				tallest = math.Max(tallest, base)
				p(`<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10">%s</text>`+"\n", bx+bw/2, y(base)-4, esc(b.Label))
				p(`<text x="%.1f" y="%d" text-anchor="middle" font-size="10" fill="#444">%s</text>`+"\n", bx+bw/2, top+plotH+14, esc(b.Who))
			}
			if g.Note != "" {
				p(`<text x="%.1f" y="%.1f" text-anchor="middle" font-weight="bold" fill="#222">%s</text>`+"\n", gx+gw/2, math.Max(float64(top)-6, y(tallest)-20), esc(g.Note))
			}
			p(`<text x="%.1f" y="%d" text-anchor="middle" font-weight="bold">%s</text>`+"\n", gx+gw/2, top+plotH+32, esc(g.Label))
			if g.Sub != "" {
				p(`<text x="%.1f" y="%d" text-anchor="middle" fill="#444">%s</text>`+"\n", gx+gw/2, top+plotH+46, esc(g.Sub))
			}
		}
	}
	// Legend: the clients, then the stacked parts.
	ly := top + plotH + labelsH + 18
	lx := left
	for _, it := range []struct{ who, color string }{{"wsfleet worker", colorWorker}, {"bare client", colorBare}} {
		p(`<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", lx, ly-10, it.color, lx+16, ly, esc(it.who))
		lx += 30 + 7*len(it.who)
	}
	for _, s := range c.Parts {
		p(`<rect x="%d" y="%d" width="12" height="12" fill="#555" fill-opacity="%.2f"/><text x="%d" y="%d">%s</text>`+"\n", lx, ly-10, s.Opacity, lx+16, ly, esc(s.Name))
		lx += 30 + 7*len(s.Name)
	}
	p("</svg>\n")
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// memory parts' opacities.
var memParts = []barSeg{{Name: "heap in use", Opacity: 1}, {Name: "goroutine stacks", Opacity: 0.6}, {Name: "rest of the RSS", Opacity: 0.3}}

func memBar(who, color string, f ClientFigures) chartBar {
	rest := f.RSSAboveIdleKB - math.Max(f.HeapPerSessKB, 0) - math.Max(f.StackPerSessKB, 0)
	return chartBar{Who: who, Color: color, Label: fmt.Sprintf("%.1f KiB", f.RSSAboveIdleKB), Segs: []barSeg{
		{Name: memParts[0].Name, Value: f.HeapPerSessKB, Opacity: memParts[0].Opacity},
		{Name: memParts[1].Name, Value: f.StackPerSessKB, Opacity: memParts[1].Opacity},
		{Name: memParts[2].Name, Value: math.Max(rest, 0), Opacity: memParts[2].Opacity},
	}}
}

// CapacityCharts draws the capacity section's charts from its side-by-side
// runs: file name → SVG (none without such runs).
func CapacityCharts(c *CapacityResult) map[string][]byte {
	out := map[string][]byte{}
	if c == nil {
		return out
	}
	var mem, cpu, one []chartGroup
	for _, x := range c.Compare {
		if x.Worker.Held == 0 || x.Bare.Held == 0 {
			continue
		}
		// The size over its payload and transport (long labels collide).
		label := CapRun{Sessions: x.Sessions, Rate: x.Rate}.Label()
		sub := x.Transport
		if x.PayloadBytes > 0 {
			sub = fmt.Sprintf("~%d B messages, %s", x.MessageBytes, x.Transport)
		}
		if x.paced() {
			mem = append(mem, chartGroup{Label: label, Sub: sub, Note: fmt.Sprintf("%+.1f KiB", x.Diff.RSSAboveIdleKB),
				Bars: []chartBar{memBar("wsfleet", colorWorker, x.Worker), memBar("bare", colorBare, x.Bare)}})
			cpu = append(cpu, chartGroup{Label: label, Sub: sub, Note: times(x.Ratio.CPUPer1k), Bars: []chartBar{
				{Who: "wsfleet", Color: colorWorker, Label: fmt.Sprintf("%.2f %%", x.Worker.CPUPer1k), Segs: []barSeg{{Name: "CPU per 1,000 msg/s", Value: x.Worker.CPUPer1k}}},
				{Who: "bare", Color: colorBare, Label: fmt.Sprintf("%.2f %%", x.Bare.CPUPer1k), Segs: []barSeg{{Name: "CPU per 1,000 msg/s", Value: x.Bare.CPUPer1k}}},
			}})
			continue
		}
		one = append(one, chartGroup{Label: label, Sub: sub, Note: times(x.Ratio.MsgPerCore), Bars: []chartBar{
			{Who: "wsfleet", Color: colorWorker, Label: thousands(int(x.Worker.MsgPerCore + 0.5)), Segs: []barSeg{{Name: "msg/s per core", Value: x.Worker.MsgPerCore}}},
			{Who: "bare", Color: colorBare, Label: thousands(int(x.Bare.MsgPerCore + 0.5)), Segs: []barSeg{{Name: "msg/s per core", Value: x.Bare.MsgPerCore}}},
		}})
	}
	draw := func(name string, ch barChart) {
		var b bytes.Buffer
		writeBarChart(&b, ch)
		out[name] = b.Bytes()
	}
	if len(mem) > 0 {
		draw(ChartMemory, barChart{Title: "Memory per session: wsfleet worker against a bare coder/websocket client",
			Subtitle: "RSS per session above the idle process (heap in use, goroutine stacks, the rest); over each size: wsfleet − bare",
			Unit:     "KiB per session", Groups: mem, Parts: memParts})
		draw(ChartCPU, barChart{Title: "CPU per 1,000 msg/s: wsfleet worker against a bare coder/websocket client",
			Subtitle: "% of one core per 1,000 messages/s, same feed, same N, one after the other; over each size: wsfleet ÷ bare",
			Unit:     "% of a core per 1,000 msg/s", Groups: cpu})
	}
	if len(one) > 0 {
		draw(ChartOneSession, barChart{Title: "One session as fast as the feed pushes: messages/s per core",
			Subtitle: "msg/s ÷ the client's CPU (cores); over each transport: wsfleet ÷ bare",
			Unit:     "msg/s per core", Groups: one})
	}
	return out
}

// chartNames are the charts' file names in the report's order.
func chartNames(charts map[string][]byte) []string {
	var out []string
	for _, n := range []string{ChartMemory, ChartCPU, ChartOneSession} {
		if _, ok := charts[n]; ok {
			out = append(out, n)
		}
	}
	return out
}

// chartTitle is a chart's alt text.
func chartTitle(name string) string {
	return strings.TrimSuffix(strings.TrimPrefix(name, "benchmarks-"), ".svg")
}
