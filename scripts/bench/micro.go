// Phase micro: the Go microbenchmarks of the hot paths.

package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// microPhase is the phase (phase.go).
var microPhase = phase{name: PhaseMicro, run: (*runner).micro, render: renderMicro}

// MicroBench is one `go test -bench` result line.
type MicroBench struct {
	Package     string  `json:"package"`
	Name        string  `json:"name"`
	Iterations  int64   `json:"iterations"`
	NsPerOp     float64 `json:"ns_per_op"`
	BytesPerOp  int64   `json:"bytes_per_op"`
	AllocsPerOp int64   `json:"allocs_per_op"`
	MBPerSec    float64 `json:"mb_per_s,omitempty"`
}

// MicroResult are the Go microbenchmarks of the hot paths.
type MicroResult struct {
	Phase
	Benchmarks []MicroBench `json:"benchmarks"`
}

// microSuites are the packages whose benchmarks run, per module: the
// worker's per-message path (parse + dedupe + trust check + sink) and its
// parts, and what a claim's requests cost the local engine (dynamostore's
// engine benchmarks start their own dynalite: the serial cost that bounds
// the crash failover's claim part there). (shared/lease has no benchmark
// since issue 13: nothing is renewed per session.)
var microSuites = []struct {
	module string
	pkgs   []string
}{
	{"workers/streamer", []string{"./internal/session", "./internal/jsonseq", "./sink"}},
	{"shared", []string{"./lease/dynamostore"}},
}

func (r *runner) micro(ctx context.Context) error {
	res := &MicroResult{}
	var cmds []string
	for _, s := range microSuites {
		cmds = append(cmds, fmt.Sprintf("(cd %s && go test -run '^$' -bench . -benchmem -benchtime %s -count 1 %s)", s.module, r.sz.BenchTime, strings.Join(s.pkgs, " ")))
	}
	res.Phase = r.begin(PhaseMicro, map[string]string{"commands": strings.Join(cmds, "; ")})
	r.rep.Micro = res
	defer res.end()
	for _, s := range microSuites {
		args := append([]string{"test", "-run", "^$", "-bench", ".", "-benchmem", "-benchtime", r.sz.BenchTime, "-count", "1"}, s.pkgs...)
		cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		cmd := exec.CommandContext(cctx, "go", args...)
		cmd.Dir = filepath.Join(r.cfg.Root, s.module)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			return fmt.Errorf("go test -bench in %s: %w\n%s", s.module, err, tail(out, 2000))
		}
		res.Benchmarks = append(res.Benchmarks, ParseBench(string(out), s.module)...)
	}
	return nil
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+)\s+(\d+)\s+([\d.]+) ns/op(.*)$`)

// ParseBench parses `go test -bench -benchmem` output; module prefixes the
// package paths it reads from the "pkg:" lines.
func ParseBench(out, module string) []MicroBench {
	var res []MicroBench
	pkg := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		l := sc.Text()
		if p, ok := strings.CutPrefix(l, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			if i := strings.Index(pkg, module+"/"); i >= 0 {
				pkg = pkg[i:]
			} else if i := strings.Index(pkg, "/"+module); i >= 0 {
				pkg = pkg[i+1:]
			}
			continue
		}
		m := benchLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		b := MicroBench{Package: pkg, Name: m[1]}
		b.Iterations, _ = strconv.ParseInt(m[2], 10, 64)
		b.NsPerOp, _ = strconv.ParseFloat(m[3], 64)
		f := strings.Fields(m[4])
		for i := 0; i+1 < len(f); i += 2 {
			switch f[i+1] {
			case "B/op":
				b.BytesPerOp, _ = strconv.ParseInt(f[i], 10, 64)
			case "allocs/op":
				b.AllocsPerOp, _ = strconv.ParseInt(f[i], 10, 64)
			case "MB/s":
				b.MBPerSec, _ = strconv.ParseFloat(f[i], 64)
			}
		}
		res = append(res, b)
	}
	return res
}

func tail(b []byte, n int) string {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

func renderMicro(p printer, r *Report) {
	m := r.Micro
	if !heading(p, m, "Microbenchmarks (go test -bench -benchmem)") {
		return
	}
	p("| package | benchmark | ns/op | B/op | allocs/op | MB/s |\n|---|---|---|---|---|---|\n")
	for _, b := range m.Benchmarks {
		mbs := ""
		if b.MBPerSec > 0 {
			mbs = fmt.Sprintf("%.0f", b.MBPerSec)
		}
		p("| %s | %s | %s | %d | %d | %s |\n", b.Package, b.Name, ns(b.NsPerOp), b.BytesPerOp, b.AllocsPerOp, mbs)
	}
	p("\n`BenchmarkHandle` is the per-message path after the WebSocket read (sequence parse, dedupe, the tenure's validity check — one atomic load of the worker's published trust deadline —, sink call, checkpoint bookkeeping), with the Keeper registered and heartbeating; `BenchmarkFind` the sequence field's parse; `BenchmarkWriter` the sink's. `BenchmarkAcquire` and `BenchmarkSpecRead` are a claim's two requests on dynalite, one after the other on one client (the engine serves them one at a time): the acquire's conditional write (its spec named, so no read), beside a plain update that moves the same index entries without the acquire's expressions, and the spec item's consistent read alone or 100 to a BatchGetItem (per key); a takeover of N sessions costs that engine about N × (acquire + get) before any dial ([worker.md](worker.md#what-a-takeover-costs-the-engine)).\n\n")
}
