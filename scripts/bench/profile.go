// The capacity runs' worker profiles (heap, CPU, MemStats) and their
// section of the report.

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
	// LiveHeapBytes is the heap profile's in-use total: the objects live at
	// the collection its fetch runs first (in reports from before the bare
	// client's heap profile: at the last one the worker ran itself).
	LiveHeapBytes float64 `json:"live_heap_bytes"`
	// BareHeapFile is the bare client's heap profile in the same
	// side-by-side run, fetched as HeapFile; BareLiveHeapBytes its in-use
	// total; HeapAboveBare the worker's heap diffed against it site by
	// site (addHeapAboveBare). Empty without a bare run, and in reports from
	// before them.
	BareHeapFile      string   `json:"bare_heap_file,omitempty"`
	BareLiveHeapBytes float64  `json:"bare_live_heap_bytes,omitempty"`
	HeapAboveBare     []string `json:"heap_above_bare_top,omitempty"`
	// CPUParts are the cumulative shares (% of the profile's samples) of
	// the worker's main loops.
	CPUParts []CPUPart `json:"cpu_parts,omitempty"`
	Err      string    `json:"error,omitempty"`
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
	if err := fetchHeapProfile(ctx, admin, p.HeapFile); err == nil {
		p.HeapTop, err = pprofTop(ctx, p.HeapFile, "-sample_index=inuse_space", "-nodecount=14")
		if err != nil {
			errs = append(errs, err.Error())
		}
		p.LiveHeapBytes = totalBytes(p.HeapTop)
	} else {
		errs = append(errs, err.Error())
	}
	if cpu > 0 {
		p.CPUFile = filepath.Join(dir, prefix+"-cpu.pb.gz")
		if err := fetchToFile(ctx, base+"profile?seconds="+strconv.Itoa(int(cpu.Seconds())), p.CPUFile); err == nil {
			if p.CPUTop, err = pprofTop(ctx, p.CPUFile, "-nodecount=16"); err != nil {
				errs = append(errs, err.Error())
			}
			all, err := pprofTop(ctx, p.CPUFile, "-cum", "-nodecount=400")
			if err != nil {
				errs = append(errs, err.Error())
			}
			p.CPUCum = firstLines(all, 28)
			p.CPUParts = cpuParts(all)
		} else {
			errs = append(errs, err.Error())
		}
	}
	p.Err = strings.Join(errs, "; ")
	return p
}

// fetchHeapProfile saves admin's heap profile (the binary form) at path,
// after a collection (gc=1): the objects live then, taken the same way for
// the worker and the bare client its heap is diffed against.
func fetchHeapProfile(ctx context.Context, admin, path string) error {
	return fetchToFile(ctx, "http://"+admin+"/debug/pprof/heap?gc=1", path)
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

func firstLines(l []string, n int) []string {
	if len(l) > n {
		return l[:n]
	}
	return l
}

// totalBytes reads the "… of 234.25MB total" of a heap -top header.
func totalBytes(lines []string) float64 {
	for _, l := range lines {
		i := strings.Index(l, " of ")
		j := strings.Index(l, " total")
		if !strings.HasPrefix(l, "Showing nodes accounting for") || i < 0 || j < i {
			continue
		}
		if f, ok := parseBytes(l[i+4 : j]); ok {
			return f
		}
	}
	return 0
}

// parseBytes reads a size as pprof prints it: "234.25MB", "-512kB", "0".
func parseBytes(v string) (float64, bool) {
	mult := 1.0
	for _, u := range []struct {
		suffix string
		m      float64
	}{{"GB", 1 << 30}, {"MB", 1 << 20}, {"kB", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(v, u.suffix) {
			v, mult = strings.TrimSuffix(v, u.suffix), u.m
			break
		}
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, false
	}
	return f * mult, true
}

// CPUPart is one loop's cumulative share of a CPU profile.
type CPUPart struct {
	What string  `json:"what"`
	Pct  float64 `json:"cum_pct"`
}

// cpuRoots are the functions whose cumulative share tells where a worker's
// CPU goes.
var cpuRoots = []struct{ fn, what string }{
	{"github.com/wsfleet/wsfleet/workers/streamer/internal/session.(*Session).read", "sessions: WebSocket reads and message handling"},
	{"github.com/coder/websocket.(*Conn).readFrameHeader", "— reading frame headers (the read syscalls)"},
	{"github.com/wsfleet/wsfleet/workers/streamer/internal/session.(*Session).handle", "— handle: parse, dedupe, lease check, sink (JSON line + write)"},
	{"github.com/wsfleet/wsfleet/shared/lease.(*Keeper).tick", "Keeper tick: every lease's deadline checked every 50 ms, renewals started"},
	{"github.com/wsfleet/wsfleet/shared/lease.(*Keeper).renew", "renewals (the store call and bookkeeping)"},
	{"github.com/wsfleet/wsfleet/workers/streamer.(*Worker).controlLoop", "control loop: the due sessions' Tick (each at most every 2 s), a pass every 250 ms"},
	{"github.com/wsfleet/wsfleet/workers/streamer/internal/session.(*Session).ping", "keepalive pings"},
	{"runtime.gcBgMarkWorker", "garbage collector (background marking)"},
	{"runtime.findRunnable", "scheduler looking for work (includes netpoll)"},
}

// cpuParts extracts the cpuRoots' cumulative shares from -top -cum lines.
func cpuParts(lines []string) []CPUPart {
	cum := map[string]float64{}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 6 || !strings.HasSuffix(f[4], "%") {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSuffix(f[4], "%"), 64); err == nil {
			cum[strings.Join(f[5:], " ")] = v
		}
	}
	var out []CPUPart
	for _, r := range cpuRoots {
		if v, ok := cum[r.fn]; ok {
			out = append(out, CPUPart{What: r.what, Pct: v})
		}
	}
	return out
}

func renderProfiles(p printer, run CapRunResult) {
	pr := run.Profiles
	held := max(run.Held, 1)
	p("### Where it goes: %s\n\n", runLabel(run))
	if ms := pr.MemStats; len(ms) > 0 {
		kib := func(k string) float64 { return float64(ms[k]) / 1024 / float64(held) }
		idle := float64(ms["HeapIdle"]-ms["HeapReleased"]) / 1024 / float64(held)
		live := pr.LiveHeapBytes / 1024 / float64(held)
		meta := kib("MSpan") + kib("MCache") + kib("GCSys") + kib("OtherSys") + kib("BuckHashSys")
		accounted := kib("HeapInuse") + kib("Stack") + idle + meta
		p("RSS per session %.1f KiB. From the Go runtime's MemStats at the end of the window, per session: heap in use %.1f KiB — objects live at the last GC %.1f KiB (the heap profile's total) and %.1f KiB allocated since (GC headroom: with GOGC=%s the heap grows by that percentage of the live heap before a collection); goroutine stacks %.1f KiB (%s goroutines for %s sessions); idle heap not yet returned to the OS %.1f KiB; span, GC and other runtime metadata %.1f KiB — %.1f KiB accounted in all (the RSS also holds the binary's pages). GC cycles so far: %d.\n\n",
			run.RSSPerSessKB, kib("HeapInuse"), live, kib("HeapInuse")-live, gogc(run.Env), kib("Stack"), thousands(run.Goroutines), thousands(run.Held), idle, meta, accounted, ms["NumGC"])
	}
	if len(pr.CPUParts) > 0 {
		p("Where the worker's CPU goes (cumulative share of the CPU profile's samples; the lines overlap where one loop calls another):\n\n| loop | share |\n|---|---|\n")
		for _, c := range pr.CPUParts {
			p("| %s | %.1f %% |\n", c.What, c.Pct)
		}
		p("\n")
	}
	if pr.Err != "" {
		p("Profile errors: %s\n\n", oneLine(pr.Err))
	}
	excerpt(p, fmt.Sprintf("Heap in use, top entries (`go tool pprof -top -sample_index=inuse_space %s`)", relProfile(pr.HeapFile)), pr.HeapTop)
	renderHeapAboveBare(p, run)
	excerpt(p, fmt.Sprintf("CPU, flat (`go tool pprof -top %s`)", relProfile(pr.CPUFile)), pr.CPUTop)
	excerpt(p, fmt.Sprintf("CPU, cumulative (`go tool pprof -top -cum %s`)", relProfile(pr.CPUFile)), pr.CPUCum)
}

// excerpt prints a pprof excerpt under its title (nothing without lines).
func excerpt(p printer, title string, lines []string) {
	if len(lines) == 0 {
		return
	}
	p("%s:\n\n```\n%s\n```\n\n", title, strings.Join(lines, "\n"))
}

func relProfile(path string) string {
	if i := strings.Index(path, "/out/bench/"); i >= 0 {
		return path[i+1:]
	}
	return path
}

// gogc is the GC target a run's worker had: the streamer binary sets 50
// when GOGC is not in its environment.
func gogc(env map[string]string) string {
	if v, ok := env["GOGC"]; ok {
		return v
	}
	return "50 (the binary's default)"
}
