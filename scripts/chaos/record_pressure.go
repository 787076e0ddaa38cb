// The host's CPU pressure (Linux PSI) sampled during a run: context for
// timing violations, never a reason to drop one.

package chaos

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// PressureSample is one reading of /proc/pressure/cpu: the total time (µs)
// some task waited for a CPU, since boot.
type PressureSample struct {
	AtNs    int64 `json:"t"`
	TotalUs int64 `json:"us"`
}

// readCPUPressure reads the "some" total of /proc/pressure/cpu (ok false
// where PSI is not available).
func readCPUPressure() (int64, bool) {
	b, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "some ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "total="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				return n, err == nil
			}
		}
	}
	return 0, false
}

// sampleCPUPressure reads the CPU pressure every `every` until stop is
// closed, then sends what it read on out.
func sampleCPUPressure(every time.Duration, stop <-chan struct{}, out chan<- []PressureSample) {
	var got []PressureSample
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if v, ok := readCPUPressure(); ok {
			got = append(got, PressureSample{AtNs: time.Now().UnixNano(), TotalUs: v})
		}
		select {
		case <-stop:
			out <- got
			return
		case <-t.C:
		}
	}
}
