package main

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/scripts/chaos"
)

// announced is a run's first line: its name, plan, seed and replay command.
var announced = regexp.MustCompile(`^(\w+): plan (\S+), seed (\d+) \(replay: (.+)\)$`)

// The replay command a run prints replays that run's seed: `make demo`
// (a seed drawn, not given) prints a seed and a replay line; the replay
// line, expanded by make (make -n: nothing runs) and read by bin/chaos's
// own argument parsing, is the same plan with the seed printed. The same
// for `make chaos` and -short. The demo plan itself is not run (minutes).
func TestDemoReplayCarriesTheSeed(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	for _, tc := range []struct {
		args []string // what make demo / make chaos / the short run pass
		make bool     // the replay line is a make command
	}{
		{[]string{"-plan", "demo"}, true},
		{[]string{"-duration", "3m"}, true},
		{[]string{"-short"}, false},
	} {
		inv, err := parseArgs(tc.args)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		line := inv.announce()
		m := announced.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("%v: the first line %q is not \"NAME: plan P, seed N (replay: CMD)\"", tc.args, line)
		}
		seed, replay := m[3], m[4]
		if seed == "0" || seed != strings.TrimLeft(seed, "0") {
			t.Fatalf("%v: printed seed %q", tc.args, seed)
		}
		chaosArgs := replayArgs(t, replay, tc.make)
		again, err := parseArgs(chaosArgs)
		if err != nil {
			t.Fatalf("%v: the replay's arguments %v: %v", tc.args, chaosArgs, err)
		}
		if again.cfg.Seed != inv.cfg.Seed || again.cfg.Plan != inv.cfg.Plan || again.short != inv.short || again.cfg.Duration != inv.cfg.Duration {
			t.Errorf("%v printed %q; its replay runs bin/chaos %v: plan %s, seed %d, short %v, duration %v (want plan %s, seed %s, short %v, duration %v)",
				tc.args, line, chaosArgs, again.cfg.Plan, again.cfg.Seed, again.short, again.cfg.Duration, inv.cfg.Plan, seed, inv.short, inv.cfg.Duration)
		}
		if tc.args[0] == "-plan" {
			if m[1] != "demo" || m[2] != chaos.PlanDemo {
				t.Errorf("make demo's line %q names another run", line)
			}
			// docs/local-stack.md shows the line make demo prints.
			doc, err := os.ReadFile("../../../../docs/local-stack.md")
			if err != nil {
				t.Fatal(err)
			}
			shown := regexp.MustCompile(`(?m)^demo: plan .*$`).FindString(string(doc))
			digits := regexp.MustCompile(`\d+`)
			if ds := announced.FindStringSubmatch(shown); ds == nil || digits.ReplaceAllString(shown, "N") != digits.ReplaceAllString(line, "N") || !strings.Contains(ds[4], "-seed "+ds[3]) {
				t.Errorf("docs/local-stack.md shows make demo's first line as %q; it prints %q (its replay with its seed)", shown, line)
			}
		}
	}
}

// replayArgs are the arguments bin/chaos gets from a replay command: a make
// command is expanded by the Makefile (make -n at the repository root: its
// last line is the bin/chaos line); otherwise the command is bin/chaos's.
func replayArgs(t *testing.T, replay string, viaMake bool) []string {
	t.Helper()
	if !viaMake {
		f := strings.Fields(replay)
		if len(f) == 0 || f[0] != "bin/chaos" {
			t.Fatalf("replay %q is not a bin/chaos command", replay)
		}
		return f[1:]
	}
	if !strings.HasPrefix(replay, "make ") {
		t.Fatalf("replay %q is not a make command", replay)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The replay as the user pastes it (bash reads its quotes), dry.
	cmd := exec.CommandContext(ctx, "bash", "-c", "make -n "+strings.TrimPrefix(replay, "make "))
	cmd.Dir = "../../../.."
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s (make -n): %v\n%s", replay, err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) == 0 || !strings.HasSuffix(f[0], "/bin/chaos") {
		t.Fatalf("%s: make's last command is not bin/chaos:\n%s", replay, out)
	}
	return f[1:]
}
