//go:build fleetsim

package fleetsim

import (
	"fmt"
	"strconv"
	"strings"
)

// Size is a fleet's size: workers × sessions.
type Size struct {
	Workers  int `json:"workers"`
	Sessions int `json:"sessions"`
}

func (s Size) String() string { return fmt.Sprintf("%dx%d", s.Workers, s.Sessions) }

// ParseSizes reads a list of sizes, WORKERSxSESSIONS comma-separated
// (make sim's SIZES=: "100x100000,1000x1000000"), in its order; each count
// a positive integer.
func ParseSizes(list string) ([]Size, error) {
	var out []Size
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		w, s, ok := strings.Cut(strings.ToLower(f), "x")
		if !ok {
			return nil, fmt.Errorf("size %q: want WORKERSxSESSIONS, e.g. 100x100000", f)
		}
		workers, err := strconv.Atoi(w)
		if err != nil || workers <= 0 {
			return nil, fmt.Errorf("size %q: workers %q is not a positive integer", f, w)
		}
		sessions, err := strconv.Atoi(s)
		if err != nil || sessions <= 0 {
			return nil, fmt.Errorf("size %q: sessions %q is not a positive integer", f, s)
		}
		out = append(out, Size{Workers: workers, Sessions: sessions})
	}
	return out, nil
}

// runLabel names m in SCALE.md's tables that have no size column: its
// scenario, and the size it ran at (Measured.Size: the workers it started
// with, not those a scale-out or a deploy added) when the runs are of more
// than one size.
func runLabel(runs []Measured, m Measured) string {
	for _, o := range runs {
		if o.Size != m.Size {
			return fmt.Sprintf("%s %d × %d", m.Scenario, m.Size.Workers, m.Size.Sessions)
		}
	}
	return m.Scenario
}
