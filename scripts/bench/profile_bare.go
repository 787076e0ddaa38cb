// The worker's heap against the bare client's in a side-by-side run: the
// two heap profiles diffed allocation site by allocation site, and that
// block of the run's "Where it goes".

package bench

import (
	"context"
	"fmt"
	"math"
)

// heapAboveBareNodes is how many entries of the diff the report keeps.
const heapAboveBareNodes = 15

// addHeapAboveBare diffs the worker's heap profile against the bare
// client's from the same side-by-side run (bare: the bare client's
// figures); an error joins p.Err. Nothing without both profiles.
func (p *Profiles) addHeapAboveBare(ctx context.Context, bare ClientFigures) {
	var err error
	switch {
	case bare.HeapError != "":
		err = fmt.Errorf("bare client heap profile: %s", bare.HeapError)
	case bare.HeapFile == "" || len(p.HeapTop) == 0:
		return // a run cut short, or the worker's heap profile failed (its error is in p.Err)
	default:
		err = p.diffHeap(ctx, bare.HeapFile)
	}
	if err == nil {
		return
	}
	if p.Err != "" {
		p.Err += "; "
	}
	p.Err += err.Error()
}

// diffHeap reads the bare client's in-use total from bareFile and the
// worker's heap above it, site by site (go tool pprof -diff_base).
func (p *Profiles) diffHeap(ctx context.Context, bareFile string) error {
	top, err := pprofTop(ctx, bareFile, "-sample_index=inuse_space", "-nodecount=1")
	if err != nil {
		return err
	}
	total := totalBytes(top)
	if total <= 0 {
		return fmt.Errorf("go tool pprof %s: no in-use total in %q", bareFile, top)
	}
	diff, err := pprofTop(ctx, p.HeapFile, "-sample_index=inuse_space", "-nodecount="+itoa(heapAboveBareNodes), "-diff_base", bareFile)
	if err != nil {
		return err
	}
	p.BareHeapFile, p.BareLiveHeapBytes, p.HeapAboveBare = bareFile, total, diff
	return nil
}

// memProfileRate is the heap profiles' sampling rate, Go's default
// runtime.MemProfileRate (neither bin/memstreamer nor bin/bareclient sets
// one): one sample per 512 KiB allocated, on average.
const memProfileRate = 512 << 10

// heapAboveBareKiB is the worker's in-use heap above the bare client's,
// per session held.
func (p Profiles) heapAboveBareKiB(held int) float64 {
	return (p.LiveHeapBytes - p.BareLiveHeapBytes) / 1024 / float64(max(held, 1))
}

// heapAboveBareErrKiB is heapAboveBareKiB's standard error from the
// sampling alone: a profile's in-use total T is counted in about T ÷ rate
// samples (Poisson), so it is known to √(T × rate); the two profiles'
// errors add in quadrature.
func (p Profiles) heapAboveBareErrKiB(held int) float64 {
	return math.Sqrt(memProfileRate*(p.LiveHeapBytes+p.BareLiveHeapBytes)) / 1024 / float64(max(held, 1))
}

// renderHeapAboveBare prints the diff and its per-session figure (nothing
// for a run without one).
func renderHeapAboveBare(p printer, run CapRunResult) {
	pr := run.Profiles
	if len(pr.HeapAboveBare) == 0 {
		return
	}
	excerpt(p, fmt.Sprintf("Heap in use above the bare client, per allocation site (`go tool pprof -top -sample_index=inuse_space -diff_base %s %s`; flat is the worker's bytes at a site minus the bare client's, negative where the bare client holds more; the percentages are of the bare client's total)",
		relProfile(pr.BareHeapFile), relProfile(pr.HeapFile)), pr.HeapAboveBare)
	above := pr.heapAboveBareKiB(run.Held)
	if math.Abs(above) < 0.05 {
		above = 0 // "+0.0", not "-0.0"
	}
	sessions := thousands(run.Held) + " sessions"
	if run.Held == 1 {
		sessions = "1 session"
	}
	p("Heap in use above the bare client, per session: (%.1f − %.1f MiB) ÷ %s = %+.1f ± %.1f KiB (the two heap profiles' in-use totals, each taken after a collection at the end of its window, each with its process's fixed heap; ± one standard error of the profiles' sampling, one sample per %d KiB allocated on average, Go's default rate: a site within a sample or two of 0 is noise).\n\n",
		pr.LiveHeapBytes/(1<<20), pr.BareLiveHeapBytes/(1<<20), sessions, above, pr.heapAboveBareErrKiB(run.Held), memProfileRate>>10)
}
