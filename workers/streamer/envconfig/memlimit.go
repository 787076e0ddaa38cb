package envconfig

import (
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// cgroupMemoryFiles are where a container's memory limit is read: cgroup v2
// (ECS on Fargate platform 1.4 and Docker on current hosts), then v1.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// DetectMemoryLimit is the worker's memory limit in bytes: the Go runtime's
// soft limit when GOMEMLIMIT sets one (infra sets it from the task size),
// else the container's cgroup limit, else 0 (unknown). The binary reads it
// once, into Config.MemoryLimit.
func DetectMemoryLimit() int64 {
	if l := debug.SetMemoryLimit(-1); l > 0 && l != math.MaxInt64 {
		return l
	}
	for _, p := range cgroupMemoryFiles {
		if l, ok := readMemoryLimit(p); ok {
			return l
		}
	}
	return 0
}

// readMemoryLimit parses one cgroup file: a byte count, or "max" (none).
// v1 reports no limit as a huge number near 2^63, which counts as none.
func readMemoryLimit(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 || n >= 1<<60 {
		return 0, false
	}
	return n, true
}
