package bench

import (
	"strings"
	"testing"

	"github.com/wsfleet/wsfleet/testkit/dynamodel"
)

// The model's results are shown beside dynalite's, goal by goal, and its
// meter beside the store's counters; a phase that failed on the model is
// named.
func TestRenderOnModel(t *testing.T) {
	r := &Report{Mode: Quick, Errors: map[string]string{"stop@aws": "boom"},
		Claim: &ClaimResult{SQS: Dist{N: 50, P99: 40}},
		OnModel: &ModelResults{Profile: "aws", Claim: &ClaimResult{SQS: Dist{N: 50, P99: 130}},
			Cost: &CostResult{Active: &CostRun{Name: "active", Steady: CostSplit{Total: CatCost{WRUPerSH: 20, RRUPerSH: 1}}, MonthlyMeasured: 31,
				Meter: meterRates(dynamoUsage(0, 0, 0), dynamoUsage(44, 4, 2), 2)}}},
	}
	out := Render(r)
	i := strings.Index(out, "## On the DynamoDB model (profile `aws`)")
	if i < 0 {
		t.Fatalf("no model section:\n%s", out)
	}
	sec := out[i:]
	for _, want := range []string{
		"| Claim latency via SQS, p99 | 40.0 ms | 130.0 ms | ≤ 100 ms | **no** | +30.0 ms (×1.3) |",
		"| active | 20.00 | 24.00 (2.00) | 1.00 | 1.00 |",
		"Failed on the model: stop@aws",
	} {
		if !strings.Contains(sec, want) {
			t.Errorf("model section lacks %q:\n%s", want, sec)
		}
	}
}

// dynamoUsage is a model usage of base write, index write and read units.
func dynamoUsage(wru, iwru, rru float64) dynamodel.Usage {
	return dynamodel.Usage{WriteUnits: wru, IndexWriteUnits: iwru, ReadUnits: rru}
}
