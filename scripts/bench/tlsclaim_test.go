package bench

import (
	"fmt"
	"strings"
	"testing"
)

// The tls section says what each run cost per session and what resumption
// saved, from the figures (never a hard-coded verdict).
func TestRenderTLSClaim(t *testing.T) {
	r := &Report{TLSClaim: &TLSClaimResult{Runs: []TLSClaimRun{
		{Name: "ws", Transport: "ws", Sessions: 1000, RampSec: 2, WorkerCPUms: 1000, WorkerCPUmsPerSession: 1.0, FeedCPUms: 500, FeedCPUmsPerSession: 0.5},
		{Name: "wss-resumed", Transport: "wss", Resumption: true, Sessions: 1000, RampSec: 2, WorkerCPUms: 1500, WorkerCPUmsPerSession: 1.5, FeedCPUms: 800, FeedCPUmsPerSession: 0.8},
		{Name: "wss-full", Transport: "wss", Sessions: 1000, RampSec: 3, WorkerCPUms: 2000, WorkerCPUmsPerSession: 2.0, FeedCPUms: 1500, FeedCPUmsPerSession: 1.5},
	}}}
	var b strings.Builder
	renderTLSClaim(func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }, r)
	out := b.String()
	for _, want := range []string{"| wss-full | 1000 | 3.0 s | 2000 ms | 2.00 ms |", "1.00 ms per session with full handshakes and 0.50 ms resumed", "by 50 %", "the feed's by 70 %"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if pctCut(0, 1) != 0 {
		t.Error("pctCut of nothing")
	}
}
