package bench

import "testing"

func TestParseBench(t *testing.T) {
	out := `goos: linux
goarch: amd64
pkg: github.com/wsfleet/wsfleet/workers/streamer/internal/session
cpu: AMD EPYC
BenchmarkHandle/new/discard-2         	 1589692	       151.5 ns/op	       0 B/op	       0 allocs/op
PASS
pkg: github.com/wsfleet/wsfleet/workers/streamer/internal/jsonseq
BenchmarkFind-2   	16798041	        14.16 ns/op	6921.18 MB/s	       0 B/op	       0 allocs/op
BenchmarkKeeperTick/held=10000-2   	     100	  1234567 ns/op	   52000 B/op	     120 allocs/op
ok  	x	0.2s
`
	bs := ParseBench(out, "workers/streamer")
	if len(bs) != 3 {
		t.Fatalf("%d results: %+v", len(bs), bs)
	}
	if b := bs[0]; b.Package != "workers/streamer/internal/session" || b.Name != "BenchmarkHandle/new/discard-2" || b.NsPerOp != 151.5 || b.Iterations != 1589692 {
		t.Fatalf("%+v", b)
	}
	if b := bs[1]; b.MBPerSec != 6921.18 || b.AllocsPerOp != 0 || b.Package != "workers/streamer/internal/jsonseq" {
		t.Fatalf("%+v", b)
	}
	if b := bs[2]; b.BytesPerOp != 52000 || b.AllocsPerOp != 120 {
		t.Fatalf("%+v", b)
	}
}
