package bench

import (
	"strings"
	"testing"
)

func TestJudgeStep(t *testing.T) {
	ok := DynStep{Target: 2000, Held: 2000, RenewsPerSec: 600, NeededPerSec: 600, RenewP99Ms: 50, DynaliteCPU: 40}
	if v := judgeStep(ok); v != VerdictOK {
		t.Fatalf("healthy step: %q", v)
	}
	hot := ok
	hot.DynaliteCPU = 95
	if v := judgeStep(hot); v != VerdictSaturated {
		t.Fatalf("saturated: %q", v)
	}
	bad := ok
	bad.LeaseLost, bad.RenewsPerSec = 3, 400
	if v := judgeStep(bad); !strings.Contains(v, "3 lease(s) lost") || !strings.Contains(v, "writes behind") {
		t.Fatalf("unhealthy: %q", v)
	}
}
