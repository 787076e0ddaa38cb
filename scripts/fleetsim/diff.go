//go:build fleetsim

package fleetsim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Verdict is the judge's pass/fail summary of f: the safety checks (no
// double owner, no fenced delivery, no loss, no silent session, no overlap
// at the source) and every faulted session delivering again within bound.
// "ok" or the first violations.
func (f Figures) Verdict(bound time.Duration) string {
	var bad []string
	if f.DoubleOwners > 0 {
		bad = append(bad, fmt.Sprintf("%d double owners", f.DoubleOwners))
	}
	if f.Fenced > 0 {
		bad = append(bad, fmt.Sprintf("%d fenced deliveries", f.Fenced))
	}
	if f.Gaps > 0 {
		bad = append(bad, fmt.Sprintf("%d seqs lost", f.Gaps))
	}
	if f.Silent > 0 {
		bad = append(bad, fmt.Sprintf("%d silent sessions", f.Silent))
	}
	if f.SourceOverlaps > 0 {
		bad = append(bad, fmt.Sprintf("%d overlaps at the source", f.SourceOverlaps))
	}
	for _, r := range f.Faults {
		if r.Unfenced > 0 {
			bad = append(bad, fmt.Sprintf("%s at %.0fs: %d deliveries after every lease was untrusted", r.Kind, r.At, r.Unfenced))
		}
		if r.Recovered != r.Sessions || r.Max > cmp.Or(r.Bound, bound.Seconds()) {
			bad = append(bad, fmt.Sprintf("%s at %.0fs: %d/%d delivering again, max %.1fs", r.Kind, r.At, r.Recovered, r.Sessions, r.Max))
		}
	}
	if len(bad) == 0 {
		return "ok"
	}
	return fmt.Sprint(bad)
}

// Diff names the figures (JSON paths, one level into table and faults,
// two into a fault's dark)
// that differ between a and b: what a seed did not fix.
func Diff(a, b Figures) []string {
	ma, mb := flat(a), flat(b)
	var out []string
	for k, v := range ma {
		if !reflect.DeepEqual(v, mb[k]) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// DiffBeyond is Diff with the times of delivering again (the faults'
// p50/p99/max, longest_silence, the dark times of the faults and the
// moves, in seconds, a fault's deciles each) compared within tol seconds:
// two claims admitted at one virtual instant may take each other's place
// in a worker's claim pace (the order of goroutines runnable at one
// instant, which no seed fixes), and each then waits the other's drawn
// latency, which moves a recovery time by a call's latency.
func DiffBeyond(a, b Figures, tol float64) []string {
	ma, mb := flat(a), flat(b)
	var out []string
	for _, k := range Diff(a, b) {
		x, xok := ma[k].(float64)
		y, yok := mb[k].(float64)
		if xok && yok && timeFigure(k) && math.Abs(x-y) <= tol {
			continue
		}
		if strings.HasPrefix(k, "faults[") && strings.HasSuffix(k, ".deciles") && withinEach(ma[k], mb[k], tol) {
			continue // times of delivering again, as p50 and max
		}
		out = append(out, k)
	}
	return out
}

// withinEach: a and b are lists of numbers of one length, each pair within
// tol.
func withinEach(a, b any, tol float64) bool {
	xs, ok1 := a.([]any)
	ys, ok2 := b.([]any)
	if !ok1 || !ok2 || len(xs) != len(ys) {
		return false
	}
	for i := range xs {
		x, ok1 := xs[i].(float64)
		y, ok2 := ys[i].(float64)
		if !ok1 || !ok2 || math.Abs(x-y) > tol {
			return false
		}
	}
	return true
}

// timeFigure: k (a flat path) is a time of delivering again, in seconds.
func timeFigure(k string) bool {
	if k == "longest_silence" {
		return true
	}
	if !strings.HasPrefix(k, "faults[") && !strings.HasPrefix(k, "moves.") { // faults[i].dark.p99 and moves.p99 too
		return false
	}
	return strings.HasSuffix(k, ".p50") || strings.HasSuffix(k, ".p99") || strings.HasSuffix(k, ".max")
}

func flat(f Figures) map[string]any {
	var m map[string]any
	b, _ := json.Marshal(f)
	_ = json.Unmarshal(b, &m)
	out := map[string]any{}
	for k, v := range m {
		switch vv := v.(type) {
		case map[string]any:
			for k2, v2 := range vv {
				out[k+"."+k2] = v2
			}
		case []any:
			for i, e := range vv {
				if em, ok := e.(map[string]any); ok {
					for k2, v2 := range em {
						if k2 == "slowest" {
							continue // which sessions, not a figure
						}
						p := fmt.Sprintf("%s[%d].%s", k, i, k2)
						m3, ok := v2.(map[string]any) // a fault's dark: one level further
						if !ok {
							out[p] = v2
							continue
						}
						for k3, v3 := range m3 {
							out[p+"."+k3] = v3
						}
					}
				}
			}
		default:
			out[k] = v
		}
	}
	return out
}
