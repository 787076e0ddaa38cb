package bench

import (
	"reflect"
	"testing"
)

func TestParseMemStats(t *testing.T) {
	b := []byte("heap profile: 1: 2 [3: 4] @ heap/1048576\n\n# runtime.MemStats\n# Alloc = 123\n# HeapInuse = 4096\n# Stack = 8192 / 16384\n# NumGC = 7\n# PauseNs = [1 2 3]\n")
	got := parseMemStats(b)
	want := map[string]int64{"HeapInuse": 4096, "Stack": 8192, "NumGC": 7}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
}

func TestTopLines(t *testing.T) {
	out := "File: streamer\nBuild ID: x\nType: cpu\nTime: 2026-01-01\nDuration: 5s, Total samples = 1s (20.00%)\n      flat  flat%\n   0.5s 50%  runtime.futex\n"
	got := topLines(out)
	if len(got) != 3 || got[0] != "Duration: 5s, Total samples = 1s (20.00%)" {
		t.Fatalf("%q", got)
	}
}

func TestHeapTotalAndCPUParts(t *testing.T) {
	if got := totalBytes([]string{"Showing nodes accounting for 221.23MB, 94.44% of 234.25MB total"}); got != 234.25*(1<<20) {
		t.Fatalf("total %v", got)
	}
	if got := totalBytes([]string{"Showing nodes accounting for 19497.62kB, 95.01% of 20521.69kB total"}); got != 20521.69*1024 {
		t.Fatalf("total %v", got)
	}
	lines := []string{
		"      flat  flat%   sum%        cum   cum%",
		"         0     0%     0%      2.19s 39.89%  github.com/wsfleet/wsfleet/workers/streamer/internal/session.(*Session).read",
		"     0.04s  0.73% 27.87%      1.08s 19.67%  github.com/wsfleet/wsfleet/shared/lease.(*Keeper).tick",
		"     0.01s  0.18%  0.18%      0.5s  9.10%  runtime.gcBgMarkWorker",
	}
	parts := cpuParts(lines)
	if len(parts) != 3 || parts[0].Pct != 39.89 || parts[1].Pct != 19.67 || parts[2].What != "garbage collector (background marking)" {
		t.Fatalf("%+v", parts)
	}
}
