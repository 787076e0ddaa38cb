// The latency distributions of the claim, the hand-off and the failover
// as CDFs, drawn by the bench itself (SVG, no external tool). A Dist that
// kept its samples (every run since issue 27) is drawn as its empirical
// CDF; an older one, which kept only its quantiles, through them (min, p50,
// p90, p99, max), and the chart says so.

package bench

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"math"
)

// The CDF charts' files, written beside BENCHMARKS.md.
const (
	ChartClaimCDF    = "benchmarks-claim-cdf.svg"
	ChartHandoffCDF  = "benchmarks-handoff-cdf.svg"
	ChartFailoverCDF = "benchmarks-failover-cdf.svg"
)

// cdfSeries is one line of a CDF chart.
type cdfSeries struct {
	Name  string
	Color string
	D     Dist
}

// points are the series' (ms, fraction) steps.
func (s cdfSeries) points() (pts [][2]float64, fromQuantiles bool) {
	if n := len(s.D.Samples); n > 0 {
		for i, v := range s.D.Samples {
			pts = append(pts, [2]float64{v, float64(i+1) / float64(n)})
		}
		return pts, false
	}
	if s.D.N == 0 {
		return nil, false
	}
	return [][2]float64{{s.D.Min, 0}, {s.D.P50, 0.5}, {s.D.P90, 0.9}, {s.D.P99, 0.99}, {s.D.Max, 1}}, true
}

// LatencyCharts draws the CDFs the report has figures for, by file name.
func LatencyCharts(r *Report) map[string][]byte {
	out := map[string][]byte{}
	draw := func(name, title string, series []cdfSeries) {
		var kept []cdfSeries
		for _, s := range series {
			if s.D.N > 0 {
				kept = append(kept, s)
			}
		}
		if len(kept) == 0 {
			return
		}
		var b bytes.Buffer
		writeCDF(&b, title, kept)
		out[name] = b.Bytes()
	}
	if c := r.Claim; c != nil {
		draw(ChartClaimCDF, "Claim latency: POST /sessions → first message at the sink", []cdfSeries{
			{"via SQS", colorWorker, c.SQS}, {"via reconciliation", colorBare, c.Reconcile}})
	}
	var handoff []cdfSeries
	if h := r.Handoff; h != nil {
		handoff = append(handoff, cdfSeries{fmt.Sprintf("%d sessions per SIGTERM", h.SessionsPerRound), colorWorker, h.Dark})
	}
	if h := r.HandoffSmall; h != nil {
		handoff = append(handoff, cdfSeries{fmt.Sprintf("%d sessions per SIGTERM", h.SessionsPerRound), colorBare, h.Dark})
	}
	draw(ChartHandoffCDF, "Hand-off dark time: SIGTERM of the owner → first message by the new owner", handoff)
	if f := r.Failover; f != nil {
		draw(ChartFailoverCDF, "Crash failover: kill -9 of the owner → first message by the new owner", []cdfSeries{
			{fmt.Sprintf("%d sessions per kill", f.SessionsPerRound), colorWorker, f.Gap}})
	}
	return out
}

// writeCDF draws one CDF chart: fraction of samples ≤ x against x (ms,
// linear from 0 to the largest value).
func writeCDF(w io.Writer, title string, series []cdfSeries) {
	const width, height, left, right, top, bottom = 720.0, 360.0, 60.0, 20.0, 50.0, 50.0
	plotW, plotH := width-left-right, height-top-bottom
	maxX := 0.0
	quantiles := false
	for _, s := range series {
		pts, q := s.points()
		quantiles = quantiles || q
		for _, p := range pts {
			maxX = math.Max(maxX, p[0])
		}
	}
	maxX = niceCeil(maxX)
	x := func(v float64) float64 { return left + plotW*v/maxX }
	y := func(f float64) float64 { return top + plotH*(1-f) }
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(w, `<text x="%.0f" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	sub := "fraction of samples at or below each latency (empirical CDF)"
	if quantiles {
		sub = "fraction of samples at or below each latency, drawn through the recorded min, p50, p90, p99 and max"
	}
	fmt.Fprintf(w, `<text x="%.0f" y="38" fill="#555">%s</text>`+"\n", left, html.EscapeString(sub))
	// Axes and grid.
	for _, f := range []float64{0, 0.5, 0.9, 0.99, 1} {
		fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y(f), left+plotW, y(f))
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", left-6, y(f)+4, trimFloat(f))
	}
	for i := 0; i <= 5; i++ {
		v := maxX * float64(i) / 5
		fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x(v), top, x(v), top+plotH)
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%s</text>`+"\n", x(v), top+plotH+16, msLabel(v))
	}
	fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">latency</text>`+"\n", left+plotW/2, height-8)
	// Lines: a step at each sample (through the quantiles: straight).
	for i, s := range series {
		pts, q := s.points()
		var path bytes.Buffer
		fmt.Fprintf(&path, "M%.1f,%.1f", x(pts[0][0]), y(0))
		prev := 0.0
		for _, p := range pts {
			if !q {
				fmt.Fprintf(&path, " L%.1f,%.1f", x(p[0]), y(prev))
			}
			fmt.Fprintf(&path, " L%.1f,%.1f", x(p[0]), y(p[1]))
			prev = p[1]
		}
		fmt.Fprintf(w, `<path d="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", path.String(), s.Color)
		ly := top + 16 + float64(i)*16
		fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="12" height="3" fill="%s"/>`+"\n", left+plotW-230, ly-4, s.Color)
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f">%s (n %d, p50 %s, p99 %s)</text>`+"\n", left+plotW-212, ly, html.EscapeString(s.Name), s.D.N, msLabel(s.D.P50), msLabel(s.D.P99))
	}
	fmt.Fprintf(w, "</svg>\n")
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func msLabel(v float64) string {
	if v >= 1000 {
		return trimFloat(v/1000) + " s"
	}
	return trimFloat(v) + " ms"
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	for len(s) > 1 && s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	if s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	return s
}
