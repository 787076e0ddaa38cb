package bench

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
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
	for in, want := range map[string]float64{"-512kB": -512 << 10, "0": 0, "1.50GB": 1.5 * (1 << 30), "12B": 12} {
		if got, ok := parseBytes(in); !ok || got != want {
			t.Errorf("parseBytes(%q) = %v %v, want %v", in, got, ok, want)
		}
	}
	if _, ok := parseBytes("x"); ok {
		t.Error("parseBytes(x)")
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

// heldByBoth and heldAboveBare are the allocation sites of
// TestTheWorkersHeapAboveTheBareClients: what both processes hold, and
// what the worker holds besides.
var heldByBoth, heldAboveBare [][]byte

//go:noinline
func holdByBoth(n, size int) {
	for range n {
		heldByBoth = append(heldByBoth, make([]byte, size))
	}
}

//go:noinline
func holdAboveBare(n, size int) {
	for range n {
		heldAboveBare = append(heldAboveBare, make([]byte, size))
	}
}

// siteBytes is the flat bytes of the -top line naming fn (found: whether
// one does).
func siteBytes(t *testing.T, lines []string, fn string) (float64, bool) {
	t.Helper()
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 6 || f[len(f)-1] != fn {
			continue
		}
		v, ok := parseBytes(f[0])
		if !ok {
			t.Fatalf("flat of %q", l)
		}
		return v, true
	}
	return 0, false
}

// Two real heap profiles of this process, fetched as the bench fetches a
// client's: the "bare" one holding 1 MiB, the "worker" one 4 MiB more.
func TestTheWorkersHeapAboveTheBareClients(t *testing.T) {
	rate := runtime.MemProfileRate
	runtime.MemProfileRate = 1 // every allocation in the profile: exact sizes
	t.Cleanup(func() {
		runtime.MemProfileRate = rate
		heldByBoth, heldAboveBare = nil, nil
	})
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	admin := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	dir := t.TempDir()

	holdByBoth(64, 16<<10)
	bare := ClientFigures{HeapFile: filepath.Join(dir, "run-bare-heap.pb.gz")}
	if err := fetchHeapProfile(ctx, admin, bare.HeapFile); err != nil {
		t.Fatal(err)
	}
	// Held since the last collection the runtime ran itself: only the
	// fetch's own (gc=1) puts them in the profile.
	holdAboveBare(256, 16<<10)
	p := collectProfiles(ctx, admin, dir, "run", 0)
	if p.Err != "" || p.HeapFile != filepath.Join(dir, "run-heap.pb.gz") {
		t.Fatalf("worker profiles: %+v", p)
	}
	p.addHeapAboveBare(ctx, bare)
	if p.Err != "" || p.BareHeapFile != bare.HeapFile || len(p.HeapAboveBare) == 0 {
		t.Fatalf("%+v", p)
	}
	const mib = 1 << 20
	above, ok := siteBytes(t, p.HeapAboveBare, "github.com/wsfleet/wsfleet/scripts/bench.holdAboveBare")
	// 4 MiB, and the slice holding them, as pprof rounds it (to 0.01MB).
	if !ok || math.Abs(above-4*mib) > 32<<10 {
		t.Fatalf("holdAboveBare %v B (listed %v) in\n%s", above, ok, strings.Join(p.HeapAboveBare, "\n"))
	}
	if both, _ := siteBytes(t, p.HeapAboveBare, "github.com/wsfleet/wsfleet/scripts/bench.holdByBoth"); both != 0 {
		t.Errorf("holdByBoth, held by both, %v B above the bare client", both)
	}
	if p.BareLiveHeapBytes < mib || p.LiveHeapBytes < p.BareLiveHeapBytes {
		t.Fatalf("totals: worker %v, bare %v", p.LiveHeapBytes, p.BareLiveHeapBytes)
	}
	// The totals' difference is the 4 MiB, give or take what the test
	// process allocated in between (well under 10 %).
	if got := p.heapAboveBareKiB(1024); math.Abs(got-4) > 0.4 {
		t.Errorf("%.3f KiB per session above the bare client, want about 4", got)
	}
	runtime.KeepAlive(heldByBoth)
	runtime.KeepAlive(heldAboveBare)

	// No bare profile: nothing; a failed fetch: said.
	q := p
	q.BareHeapFile, q.HeapAboveBare, q.Err = "", nil, ""
	q.addHeapAboveBare(ctx, ClientFigures{})
	if q.HeapAboveBare != nil || q.Err != "" {
		t.Fatalf("%+v", q)
	}
	q.addHeapAboveBare(ctx, ClientFigures{HeapError: "get x: HTTP 404"})
	if q.HeapAboveBare != nil || q.Err != "bare client heap profile: get x: HTTP 404" {
		t.Fatalf("%q", q.Err)
	}
}
