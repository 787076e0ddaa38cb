package bench

import (
	"encoding/xml"
	"strings"
	"testing"
)

// The CDF charts are well-formed SVG with one line per series: an
// empirical CDF from samples, or one through the quantiles (said so) for
// a report that kept none.
func TestLatencyCharts(t *testing.T) {
	r := &Report{
		Claim:    &ClaimResult{SQS: Dist{N: 3, Min: 10, P50: 20, P90: 30, P99: 30, Max: 30, Samples: []float64{10, 20, 30}}, Reconcile: Dist{N: 2, Min: 400, P50: 500, P90: 900, P99: 900, Max: 900}},
		Failover: &HandoverResult{SessionsPerRound: 100, Gap: Dist{N: 300, Min: 9500, P50: 10200, P90: 10500, P99: 10600, Max: 10700}},
	}
	charts := LatencyCharts(r)
	if _, ok := charts[ChartHandoffCDF]; ok || len(charts) != 2 {
		t.Fatalf("charts %v: want claim and failover only (no hand-off figures)", keys(charts))
	}
	for name, b := range charts {
		if err := xml.Unmarshal(b, new(struct{})); err != nil {
			t.Fatalf("%s: not XML: %v", name, err)
		}
	}
	claim := string(charts[ChartClaimCDF])
	if strings.Count(claim, "<path ") != 2 || !strings.Contains(claim, "via SQS (n 3, p50 20 ms, p99 30 ms)") || !strings.Contains(claim, "recorded min, p50") {
		t.Fatalf("claim chart:\n%s", claim)
	}
	if f := string(charts[ChartFailoverCDF]); !strings.Contains(f, "10.2 s") || strings.Count(f, "<path ") != 1 {
		t.Fatalf("failover chart:\n%s", f)
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
