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
