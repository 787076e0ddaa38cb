package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Profiles are a worker's heap and CPU profiles, summarised.
type Profiles struct {
	HeapFile string `json:"heap_file"`
	CPUFile  string `json:"cpu_file"`
	// HeapTop: go tool pprof -top -sample_index=inuse_space; CPUTop: the
	// flat top; CPUCum: the cumulative top (which loops the time goes to).
	HeapTop []string `json:"heap_top"`
	CPUTop  []string `json:"cpu_top"`
	CPUCum  []string `json:"cpu_cum"`
	// MemStats are runtime.MemStats fields (bytes) from /debug/pprof/heap?debug=1.
	MemStats map[string]int64 `json:"memstats"`
	Err      string           `json:"error,omitempty"`
}

// memStatKeys are the MemStats the report breaks RSS down with.
// ("Stack" and "MSpan" are printed as "in use / sys": the first number is kept.)
var memStatKeys = []string{"HeapAlloc", "HeapInuse", "HeapIdle", "HeapReleased", "HeapSys", "Stack", "MSpan", "MCache", "BuckHashSys", "GCSys", "OtherSys", "Sys", "NextGC", "NumGC"}

// collectProfiles fetches the worker's profiles into dir/prefix-*.
func collectProfiles(ctx context.Context, admin, dir, prefix string, cpu time.Duration) Profiles {
	var p Profiles
	var errs []string
	base := "http://" + admin + "/debug/pprof/"
	if b, err := httpGet(ctx, base+"heap?debug=1", 64<<20); err == nil {
		p.MemStats = parseMemStats(b)
	} else {
		errs = append(errs, err.Error())
	}
	p.HeapFile = filepath.Join(dir, prefix+"-heap.pb.gz")
	if err := fetchToFile(ctx, base+"heap", p.HeapFile); err == nil {
		p.HeapTop, err = pprofTop(ctx, p.HeapFile, "-sample_index=inuse_space", "-nodecount=14")
		if err != nil {
			errs = append(errs, err.Error())
		}
	} else {
		errs = append(errs, err.Error())
	}
	if cpu > 0 {
		p.CPUFile = filepath.Join(dir, prefix+"-cpu.pb.gz")
		if err := fetchToFile(ctx, base+"profile?seconds="+strconv.Itoa(int(cpu.Seconds())), p.CPUFile); err == nil {
			if p.CPUTop, err = pprofTop(ctx, p.CPUFile, "-nodecount=16"); err != nil {
				errs = append(errs, err.Error())
			}
			if p.CPUCum, err = pprofTop(ctx, p.CPUFile, "-cum", "-nodecount=24"); err != nil {
				errs = append(errs, err.Error())
			}
		} else {
			errs = append(errs, err.Error())
		}
	}
	p.Err = strings.Join(errs, "; ")
	return p
}

// parseMemStats reads the "# Name = value" lines the heap profile's debug
// form ends with.
func parseMemStats(b []byte) map[string]int64 {
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		l, ok := strings.CutPrefix(sc.Text(), "# ")
		if !ok {
			continue
		}
		k, v, ok := strings.Cut(l, " = ")
		if !ok {
			continue
		}
		for _, want := range memStatKeys {
			if k == want {
				if n, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64); err == nil {
					out[k] = n
				}
			}
		}
	}
	return out
}

// pprofTop runs `go tool pprof -top` on a profile and returns its table
// (the header lines naming the file, build and time are dropped).
func pprofTop(ctx context.Context, file string, args ...string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	argv := append([]string{"tool", "pprof", "-top"}, args...)
	cmd := exec.CommandContext(ctx, "go", append(argv, file)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go tool pprof %s: %w: %s", filepath.Base(file), err, strings.TrimSpace(stderr.String()))
	}
	return topLines(string(out)), nil
}

func topLines(out string) []string {
	var keep []string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if strings.HasPrefix(l, "File:") || strings.HasPrefix(l, "Build ID:") || strings.HasPrefix(l, "Time:") || strings.HasPrefix(l, "Type:") {
			continue
		}
		keep = append(keep, l)
	}
	return keep
}
