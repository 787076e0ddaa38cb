package bench

import (
	"os"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// pid (comm with spaces) state ppid ... utime=250 stime=50 (fields 14, 15).
	line := []byte("123 (my (odd) cmd) S 1 123 123 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 100 0 0")
	d, err := parseStatCPU(line)
	if err != nil || d != 3*time.Second {
		t.Fatalf("%v %v: want 3s (300 ticks)", d, err)
	}
	if _, err := parseStatCPU([]byte("garbage")); err == nil {
		t.Fatal("want an error")
	}
}

func TestProcSelf(t *testing.T) {
	if _, err := ProcCPU(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if rss, err := ProcRSS(os.Getpid()); err != nil || rss <= 0 {
		t.Fatalf("%v %v", rss, err)
	}
}

func TestParseMachineLine(t *testing.T) {
	busy, total, err := parseMachineLine("cpu  100 5 50 800 40 3 2 0 7 0")
	if err != nil || busy != 160 || total != 1000 {
		t.Fatalf("busy %d total %d err %v: want 160 of 1000", busy, total, err)
	}
	if _, _, err := parseMachineLine("intr 1 2"); err == nil {
		t.Fatal("want an error")
	}
}
