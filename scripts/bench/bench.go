// Run: the selected phases in order, each failure recorded, a merged re-run
// (-merge), and the report written.

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// runner runs the phases of one Config.
type runner struct {
	cfg Config
	sz  Sizes
	log zerolog.Logger
	rep *Report
	// model is the DynamoDB model's profile the lease stacks start on now
	// ("": dynalite alone): set for a ModelPhase's second run.
	model string
}

// Run runs the selected phases and writes the report. A phase that fails
// is reported as such and the others still run; Run returns an error when
// any phase failed or the report could not be written.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("bench config: %w", err)
	}
	bins := []string{cfg.Bin.Streamer, cfg.Bin.MemStreamer, cfg.Bin.Ingest, cfg.Bin.Feed}
	if slices.Contains(cfg.Phases, PhaseCapacity) || slices.Contains(cfg.Phases, PhaseStandbyMem) {
		bins = append(bins, cfg.Bin.BareClient)
	}
	if cfg.Model != "" {
		bins = append(bins, cfg.Bin.Model)
	}
	for _, b := range bins {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("bench: %s missing (make bench builds it): %w", b, err)
		}
	}
	if err := os.MkdirAll(cfg.WorkDir, 0o755); err != nil {
		return nil, fmt.Errorf("bench work dir: %w", err)
	}
	r := &runner{cfg: cfg, sz: cfg.Sizes, log: cfg.Log, rep: &Report{
		Mode: cfg.Mode, Invocation: cfg.Invocation, Started: time.Now().UTC(), Errors: map[string]string{},
		Sizes: cfg.Sizes.Describe(),
	}}
	if cfg.Merge {
		prev, err := readReport(cfg.OutJSON)
		if err != nil {
			return nil, fmt.Errorf("bench -merge: %w", err)
		}
		if prev.Mode != cfg.Mode {
			return nil, fmt.Errorf("bench -merge: %s holds a %s run, not %s", cfg.OutJSON, prev.Mode, cfg.Mode)
		}
		return runMerged(ctx, r, prev)
	}
	r.rep.Machine = ReadMachine(ctx, cfg.Root)
	r.rep.LoadBefore = ReadLoad()
	if cfg.QuietLoad > 0 {
		waited, quiet := WaitQuiet(ctx, cfg.QuietLoad, cfg.QuietWait, func(f string, a ...any) { r.log.Info().Msgf(f, a...) })
		r.rep.Quiet = &QuietWait{Threshold: cfg.QuietLoad, Waited: waited.Round(time.Second).String(), Quiet: quiet}
	}
	r.rep.LoadStart = ReadLoad()
	ran, failed := r.runPhases(ctx)
	r.rep.Finished = time.Now().UTC()
	r.rep.LoadEnd = ReadLoad()
	if ran == 0 {
		// Interrupted before any phase (e.g. while waiting for a quiet
		// machine): keep the previous report.
		return r.rep, fmt.Errorf("bench interrupted before any phase: %w", ctx.Err())
	}
	if err := r.write(); err != nil {
		return r.rep, err
	}
	if ctx.Err() != nil {
		return r.rep, fmt.Errorf("bench interrupted: %w", ctx.Err())
	}
	if len(failed) > 0 {
		return r.rep, fmt.Errorf("bench: phase(s) %s failed (see the report)", strings.Join(failed, ", "))
	}
	return r.rep, nil
}

// runPhases runs the selected phases in order (until ctx ends), recording
// each failure in the report; it returns how many ran and which failed.
func (r *runner) runPhases(ctx context.Context) (ran int, failed []string) {
	for _, ph := range phases {
		if !slices.Contains(r.cfg.Phases, ph.name) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		delete(r.rep.Errors, ph.name) // a merged report's earlier failure of it
		ran++
		if err := r.runPhase(ctx, ph); err != nil {
			failed = append(failed, ph.name)
		}
		if r.cfg.Model != "" && ph.onModel != nil && ctx.Err() == nil {
			if err := r.onModel(ctx, ph); err != nil {
				failed = append(failed, ph.name+"@"+r.cfg.Model)
			}
		}
	}
	return ran, failed
}

// runPhase runs ph (on the DynamoDB model when r.model is set), logging it
// and filing its failure in the report under its name (name@model on the
// model).
func (r *runner) runPhase(ctx context.Context, ph phase) error {
	key, onWhat, lc := ph.name, "", r.log.With().Str("phase", ph.name)
	if r.model != "" {
		key, onWhat, lc = ph.name+"@"+r.model, " on the DynamoDB model", lc.Str("dynamo_model", r.model)
	}
	log := lc.Logger()
	log.Info().Str("load", ReadLoad().String()).Msg("phase starting" + onWhat)
	start := time.Now()
	err := ph.run(r, ctx)
	if err != nil {
		r.rep.Errors[key] = err.Error()
		log.Error().Err(err).Msg("phase failed")
	}
	log.Info().Dur("took", time.Since(start).Round(time.Second)).Msg("phase done" + onWhat)
	return err
}

// onModel runs ph again with its lease stacks on the DynamoDB model and
// files its result under Report.OnModel, the dynalite result staying where
// it is.
func (r *runner) onModel(ctx context.Context, ph phase) error {
	if r.rep.OnModel == nil || r.rep.OnModel.Profile != r.cfg.Model {
		r.rep.OnModel = &ModelResults{Profile: r.cfg.Model}
	}
	delete(r.rep.Errors, ph.name+"@"+r.cfg.Model)
	saved := *r.rep
	r.model = r.cfg.Model
	err := r.runPhase(ctx, ph)
	r.model = ""
	got := *r.rep
	ph.onModel(r.rep.OnModel, &got)
	// The dynalite figures stay the report's own.
	saved.OnModel, saved.Errors = r.rep.OnModel, r.rep.Errors
	*r.rep = saved
	return err
}

// runMerged runs cfg's phases into prev, a report read back, and rewrites
// it: the other phases' figures stay as they were measured.
func runMerged(ctx context.Context, r *runner, prev *Report) (*Report, error) {
	fresh := r.rep
	r.rep = prev
	// The sizes of this build (only the phases' own code changes them;
	// the capacity runs' did in issue 27).
	r.rep.Sizes = fresh.Sizes
	if r.rep.Errors == nil {
		r.rep.Errors = map[string]string{}
	}
	m := ReadMachine(ctx, r.cfg.Root)
	rerun := Rerun{Phases: r.cfg.Phases, Invocation: fresh.Invocation, Started: fresh.Started, Commit: m.Commit}
	_, failed := r.runPhases(ctx)
	rerun.Finished = time.Now().UTC()
	// An earlier re-run of only these phases no longer stands for any figure.
	r.rep.Reruns = slices.DeleteFunc(r.rep.Reruns, func(x Rerun) bool {
		return !slices.ContainsFunc(x.Phases, func(p string) bool { return !slices.Contains(r.cfg.Phases, p) })
	})
	r.rep.Reruns = append(r.rep.Reruns, rerun)
	if err := r.write(); err != nil {
		return r.rep, err
	}
	if len(failed) > 0 {
		return r.rep, fmt.Errorf("bench: phase(s) %s failed (see the report)", strings.Join(failed, ", "))
	}
	return r.rep, ctx.Err()
}

// Rerender writes the Markdown report at md ("": docs/BENCHMARKS.md) from
// the figures at js ("": docs/benchmarks.json) with this build's renderer,
// running nothing.
func Rerender(js, md string) error {
	c := Config{OutJSON: js, OutMD: md}
	if err := c.fill(); err != nil {
		return err
	}
	rep, err := readReport(c.OutJSON)
	if err != nil {
		return fmt.Errorf("bench -rerender: %w", err)
	}
	if err := writeMarkdown(rep, c.OutMD); err != nil {
		return fmt.Errorf("bench -rerender: %w", err)
	}
	return nil
}

// writeMarkdown writes the report at md and its charts beside it.
func writeMarkdown(rep *Report, md string) error {
	if rep.Capacity != nil {
		charts := CapacityCharts(rep.Capacity)
		rep.Capacity.Charts = chartNames(charts)
		for name, b := range charts {
			if err := os.WriteFile(filepath.Join(filepath.Dir(md), name), b, 0o644); err != nil {
				return err
			}
		}
	}
	if svg := BillChartSVG(rep); svg != nil {
		if err := os.WriteFile(filepath.Join(filepath.Dir(md), BillChart), svg, 0o644); err != nil {
			return err
		}
	}
	for name, b := range LatencyCharts(rep) {
		if err := os.WriteFile(filepath.Join(filepath.Dir(md), name), b, 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(md, []byte(Render(rep)), 0o644)
}

func readReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &rep, nil
}

// phaseCommand is the command that reruns one phase.
func (r *runner) phaseCommand(name string) string {
	return fmt.Sprintf("bin/bench -mode %s -only %s", r.cfg.Mode, name)
}

// begin returns the phase header, its load and start time filled in.
func (r *runner) begin(name string, settings map[string]string) Phase {
	return Phase{Command: r.phaseCommand(name), Started: time.Now().UTC(), LoadStart: ReadLoad(), Settings: settings}
}

// end fills the phase's end.
func (p *Phase) end() {
	p.Seconds = time.Since(p.Started).Round(100 * time.Millisecond).Seconds()
	p.LoadEnd = ReadLoad()
}

func (r *runner) write() error {
	if c := r.rep.Capacity; c != nil {
		c.Charts = chartNames(CapacityCharts(c))
	}
	if r.cfg.OutJSON != "-" {
		b, err := json.MarshalIndent(r.rep, "", "  ")
		if err != nil {
			return fmt.Errorf("report json: %w", err)
		}
		if err := os.WriteFile(r.cfg.OutJSON, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("report json: %w", err)
		}
	}
	if r.cfg.OutMD != "-" {
		if err := writeMarkdown(r.rep, r.cfg.OutMD); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	return nil
}
