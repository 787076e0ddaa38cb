// The machine and its processes: cores, memory, load, CPU and RSS of a
// process, the wait for a quiet machine.

package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Machine describes where the figures were taken.
type Machine struct {
	Cores    int    `json:"cores"`
	CPU      string `json:"cpu"`
	MemoryMB int64  `json:"memory_mb"`
	Kernel   string `json:"kernel"`
	Go       string `json:"go"`
	Commit   string `json:"commit"`
	NoFile   string `json:"open_files_limit"`
}

// ReadMachine collects the machine description (best effort).
func ReadMachine(ctx context.Context, root string) Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if kb, err := meminfo("MemTotal"); err == nil {
		m.MemoryMB = kb / 1024
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/self/limits"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "Max open files") {
				f := strings.Fields(l)
				if len(f) >= 5 {
					m.NoFile = f[3] + " soft / " + f[4] + " hard"
				}
			}
		}
	}
	cmd := exec.CommandContext(ctx, "git", "describe", "--always", "--dirty", "--abbrev=12")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	return m
}

func meminfo(key string) (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("meminfo: %w", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && k == key {
			return strconv.ParseInt(strings.Fields(v)[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("meminfo: no %s", key)
}

// LoadAvg is /proc/loadavg's 1, 5 and 15 minute averages.
type LoadAvg [3]float64

func (l LoadAvg) String() string { return fmt.Sprintf("%.2f / %.2f / %.2f", l[0], l[1], l[2]) }

// ReadLoad reads the load averages (zero on error).
func ReadLoad() LoadAvg {
	var l LoadAvg
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		l[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return l
}

// WaitQuiet waits until the 1-minute load average drops below threshold,
// polling every 10 s, for at most wait. It reports how long it waited and
// whether the machine was quiet in the end.
func WaitQuiet(ctx context.Context, threshold float64, wait time.Duration, logf func(string, ...any)) (time.Duration, bool) {
	start := time.Now()
	for {
		l := ReadLoad()
		if l[0] < threshold {
			return time.Since(start), true
		}
		if time.Since(start) >= wait {
			return time.Since(start), false
		}
		logf("waiting for a quiet machine: load %s, want the 1-minute average below %.2f", l, threshold)
		select {
		case <-ctx.Done():
			return time.Since(start), false
		case <-time.After(10 * time.Second):
		}
	}
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat times (100 on Linux
// for every architecture's user ABI).
const clockTick = 100

// ProcCPU is a process's user + system CPU time so far.
func ProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("cpu of pid %d: %w", pid, err)
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime + stime (fields 14 and 15) of a /proc/<pid>/stat
// line; the command name (field 2) may contain spaces, so fields are
// counted after its closing parenthesis.
func parseStatCPU(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("proc stat: no command field")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime is field 14 → f[11], stime f[12].
	if len(f) < 13 {
		return 0, errors.New("proc stat: too few fields")
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("proc stat: bad utime/stime")
	}
	return time.Duration(u+s) * time.Second / clockTick, nil
}

// ProcRSS is a process's resident set size in bytes.
func ProcRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("rss of pid %d: %w", pid, err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("rss of pid %d: %w", pid, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("rss of pid %d: no VmRSS", pid)
}

// ProcOpenFiles counts a process's open file descriptors.
func ProcOpenFiles(pid int) int {
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(es)
}

// cpuMeter measures a process's CPU use over a window.
type cpuMeter struct {
	pid  int
	t0   time.Time
	cpu0 time.Duration
}

func startCPU(pid int) cpuMeter {
	c, _ := ProcCPU(pid)
	return cpuMeter{pid: pid, t0: time.Now(), cpu0: c}
}

// percent is the CPU used since start as a percentage of one core.
func (m cpuMeter) percent() float64 {
	if m.pid <= 0 {
		return 0
	}
	c, err := ProcCPU(m.pid)
	el := time.Since(m.t0)
	if err != nil || el <= 0 {
		return 0
	}
	return 100 * float64(c-m.cpu0) / float64(el)
}

// machineTimes reads the aggregate cpu line of /proc/stat: busy and total
// jiffies across all cores.
func machineTimes() (busy, total int64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, fmt.Errorf("proc stat: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseMachineLine(line)
}

func parseMachineLine(line string) (busy, total int64, err error) {
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, errors.New("proc stat: no cpu line")
	}
	var idle int64
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("proc stat: %w", err)
		}
		if i >= 8 { // guest and guest_nice are already in user and nice
			break
		}
		total += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	return total - idle, total, nil
}

// machineMeter measures the whole machine's CPU use over a window.
type machineMeter struct{ busy, total int64 }

func startMachine() machineMeter {
	b, t, _ := machineTimes()
	return machineMeter{b, t}
}

// percent is the machine's CPU use since start in % of one core (all
// processes, every core: 100 × cores when saturated).
func (m machineMeter) percent() float64 {
	b, t, err := machineTimes()
	if err != nil || t <= m.total {
		return 0
	}
	return 100 * float64(runtime.NumCPU()) * float64(b-m.busy) / float64(t-m.total)
}
