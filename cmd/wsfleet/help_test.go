package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// flat is s with every run of white space one space, so a wrapped
// description still matches.
func flat(s string) string { return strings.Join(strings.Fields(s), " ") }

// checkFlagsShown fails unless help shows every flag of fs with its
// description and its default.
func checkFlagsShown(t *testing.T, what, help string, fs *flag.FlagSet) {
	t.Helper()
	fs.VisitAll(func(f *flag.Flag) {
		arg, desc := flag.UnquoteUsage(f)
		if !strings.Contains(help, "  --"+f.Name+" "+arg) && !strings.Contains(help, "  --"+f.Name+"\n") {
			t.Errorf("%s does not show --%s:\n%s", what, f.Name, help)
		}
		if !strings.Contains(flat(help), flat(desc)) {
			t.Errorf("%s does not show the description of --%s (%q):\n%s", what, f.Name, desc, help)
		}
		if d, shown := shownDefault(f); shown && !strings.Contains(flat(help), "(default "+d+")") {
			t.Errorf("%s does not show the default of --%s (%s):\n%s", what, f.Name, d, help)
		}
	})
}

// TestEveryCommandHasHelp runs -h, -help, --help and `help <command>` on
// every command of the table: each prints the command's synopsis, every
// flag of its FlagSet with its description and default, and examples that
// parse, on stdout, and succeeds.
func TestEveryCommandHasHelp(t *testing.T) {
	t.Setenv("WSFLEET_API", "http://127.0.0.1:1") // nothing is called
	for _, cmd := range commands {
		fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
		cmd.flags(fs)
		var first string
		for _, args := range [][]string{{cmd.name, "-h"}, {cmd.name, "-help"}, {cmd.name, "--help"}, {"help", cmd.name}, {"--api", "https://example.com", cmd.name, "x", "-h"}} {
			var out, errOut bytes.Buffer
			if err := cli(context.Background(), args, &out, &errOut); err != nil || errOut.Len() != 0 {
				t.Fatalf("wsfleet %s: %v, stderr %q", strings.Join(args, " "), err, errOut.String())
			}
			help := out.String()
			if first == "" {
				first = help
			} else if help != first {
				t.Errorf("wsfleet %s prints another help than wsfleet %s -h:\n%s", strings.Join(args, " "), cmd.name, help)
			}
		}
		if !strings.HasPrefix(first, "usage: wsfleet [global flags] "+cmd.name) || !strings.Contains(flat(first), flat(cmd.long)) {
			t.Errorf("%s -h lacks the synopsis or the description:\n%s", cmd.name, first)
		}
		checkFlagsShown(t, cmd.name+" -h", first, fs)
		_, examples, ok := strings.Cut(first, "\nexamples:\n")
		if !ok || len(cmd.examples) == 0 {
			t.Fatalf("%s -h has no examples:\n%s", cmd.name, first)
		}
		for _, ex := range cmd.examples {
			if !strings.Contains(examples, "\n  "+ex+"\n") && !strings.HasPrefix(examples, "  "+ex+"\n") {
				t.Errorf("%s -h does not show the example %q:\n%s", cmd.name, ex, first)
			}
			// An example is a command line that parses.
			f := strings.Fields(ex)
			if len(f) < 2 || f[0] != "wsfleet" || f[1] != cmd.name {
				t.Errorf("example %q: not a %s command line", ex, cmd.name)
				continue
			}
			if _, _, err := parse(cmd, f[2:]); err != nil {
				t.Errorf("example %q: %v", ex, err)
			}
		}
	}
}

// TestUsage: wsfleet -h and wsfleet help print, on stdout, every command
// with its one line and its flags, and the global flags; bare wsfleet
// prints the same on stderr and fails.
func TestUsage(t *testing.T) {
	var usage bytes.Buffer
	if err := writeUsage(&usage); err != nil {
		t.Fatal(err)
	}
	u := usage.String()
	for _, cmd := range commands {
		if !strings.Contains(u, "\n  "+cmd.name+" ") || !strings.Contains(flat(u), cmd.name+" "+flat(cmd.short)) {
			t.Errorf("usage does not list %s with %q:\n%s", cmd.name, cmd.short, u)
		}
		fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
		cmd.flags(fs)
		fs.VisitAll(func(f *flag.Flag) {
			if !strings.Contains(u, "--"+f.Name) {
				t.Errorf("usage does not list %s --%s", cmd.name, f.Name)
			}
		})
	}
	global := flag.NewFlagSet("wsfleet", flag.ContinueOnError)
	globalFlags(global)
	checkFlagsShown(t, "usage", u, global)
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		var out, errOut bytes.Buffer
		if err := cli(context.Background(), args, &out, &errOut); err != nil || errOut.Len() != 0 || out.String() != u {
			t.Errorf("wsfleet %s: %v, stderr %q, stdout:\n%s", args[0], err, errOut.String(), out.String())
		}
	}
	var out, errOut bytes.Buffer
	if err := cli(context.Background(), nil, &out, &errOut); err == nil || out.Len() != 0 || errOut.String() != u {
		t.Errorf("bare wsfleet: %v, stdout %q, stderr:\n%s", err, out.String(), errOut.String())
	}
}

// TestDocsShowTheHelp: docs/local-stack.md shows what wsfleet -h, wsfleet
// start -h and a misspelt flag print, each in a block of its own.
func TestDocsShowTheHelp(t *testing.T) {
	t.Setenv("WSFLEET_API", "")
	doc, err := os.ReadFile("../../docs/local-stack.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-h"}, {"start", "-h"}, {"start", "wss://127.0.0.1:8790/feed/second", "-resume-parm", "from"}} {
		var out, errOut bytes.Buffer
		_ = cli(context.Background(), args, &out, &errOut) // help, or a usage error on stderr
		block := "$ bin/wsfleet " + strings.Join(args, " ") + "\n" + out.String() + errOut.String()
		if !strings.Contains(string(doc), "```\n"+block+"```\n") {
			t.Errorf("docs/local-stack.md does not show wsfleet %s; paste this block:\n%s", strings.Join(args, " "), block)
		}
	}
}

func TestSuggest(t *testing.T) {
	startFS := flag.NewFlagSet("start", flag.ContinueOnError)
	startFlags(startFS)
	var startNames []string
	startFS.VisitAll(func(f *flag.Flag) { startNames = append(startNames, f.Name) })
	watchNames := []string{"every", "state"}
	for _, c := range []struct {
		typed      string
		candidates []string
		want       []string
	}{
		{"resume-parm", startNames, []string{"resume-param"}},
		{"resume_param", startNames, []string{"resume-param"}},
		{"seqpath", startNames, []string{"seq-path"}},
		{"seq-feild", startNames, []string{"seq-field"}},
		{"hedaer", startNames, []string{"header"}},
		{"chekpoint-every", startNames, []string{"checkpoint-every"}},
		{"ID", startNames, []string{"id"}},
		{"check", startNames, []string{"checkpoint-every"}},                // a unique prefix
		{"seq", startNames, []string{"seq-field", "seq-mode", "seq-path"}}, // a few prefixes
		{"x", startNames, nil},
		{"url", startNames, nil},
		{"evrey", watchNames, []string{"every"}},
		{"stat", watchNames, []string{"state"}},
		{"sate", watchNames, []string{"state"}},
		// commands
		{"stauts", commandNames(), []string{"status"}},
		{"strat", commandNames(), []string{"start"}},
		{"stp", commandNames(), []string{"stop"}},
		{"wrokers", commandNames(), []string{"workers"}},
		{"worker", commandNames(), []string{"workers"}},
		{"hlep", commandNames(), []string{"help"}},
		{"Status", commandNames(), []string{"status"}},
		{"sta", commandNames(), []string{"start", "status"}},
		{"s", commandNames(), nil},
		{"list", commandNames(), nil},
		{"deploy", commandNames(), nil},
	} {
		if got := suggest(c.typed, c.candidates); !reflect.DeepEqual(got, c.want) {
			t.Errorf("suggest(%q) = %q, want %q", c.typed, got, c.want)
		}
	}
}

// A typed name far longer than every candidate is not measured against
// them (finding 9 of issue 35); the work is counted in allocations.
func TestSuggestSkipsFarLongerNames(t *testing.T) {
	long := strings.Repeat("resume-param", 20000)
	var got []string
	allocs := testing.AllocsPerRun(1, func() { got = suggest(long, commandNames()) })
	if got != nil || allocs > 100 {
		t.Fatalf("suggest on a %d-byte name: %v, %.0f allocations", len(long), got, allocs)
	}
}

// TestUsageErrors: a command line wsfleet cannot run says why on stderr,
// with the nearest flag or command and where the help is, and fails
// without printing the error twice.
func TestUsageErrors(t *testing.T) {
	t.Setenv("WSFLEET_API", "http://127.0.0.1:1") // nothing is called
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"start", "-resume-parm", "from", "ws://127.0.0.1:1/x"},
			"wsfleet start: flag provided but not defined: -resume-parm (did you mean -resume-param?)\nRun 'wsfleet start -h' for usage.\n"},
		{[]string{"start", "ws://127.0.0.1:1/x", "--resume-parm=from"},
			"wsfleet start: flag provided but not defined: --resume-parm (did you mean --resume-param?)\nRun 'wsfleet start -h' for usage.\n"},
		{[]string{"start", "--seq", "u", "ws://127.0.0.1:1/x"},
			"wsfleet start: flag provided but not defined: --seq (did you mean --seq-field, --seq-mode or --seq-path?)\n"},
		{[]string{"start", "--url", "ws://127.0.0.1:1/x"},
			"wsfleet start: flag provided but not defined: --url\nRun 'wsfleet start -h' for usage.\n"},
		{[]string{"watch", "--evry", "2s"},
			"wsfleet watch: flag provided but not defined: --evry (did you mean --every?)\n"},
		{[]string{"watch", "--every", "soon"},
			`wsfleet watch: invalid value "soon" for flag -every: parse error` + "\nRun 'wsfleet watch -h' for usage.\n"},
		{[]string{"watch", "--every", "1ms"}, "wsfleet watch: --every 1ms: want >= 100ms\n"},
		{[]string{"status", "--state", "gone"}, "wsfleet status: --state \"GONE\": want STARTED or STOPPED\nRun 'wsfleet status -h' for usage.\n"},
		{[]string{"status", "--api", "http://x"},
			"wsfleet status: flag provided but not defined: --api (--api is a global flag: put it before the command, as in wsfleet --api … status)\n"},
		{[]string{"--ap", "http://x", "status"},
			"wsfleet: flag provided but not defined: --ap (did you mean --api?)\nRun 'wsfleet help' for usage.\n"},
		{[]string{"--sigv4", "maybe", "status"}, "wsfleet: --sigv4 \"maybe\": want auto, on or off\nRun 'wsfleet help' for usage.\n"},
		{[]string{"stauts"}, "wsfleet: unknown command \"stauts\" (did you mean \"status\"?)\nRun 'wsfleet help' for usage.\n"},
		{[]string{"deploy"}, "wsfleet: unknown command \"deploy\"\nRun 'wsfleet help' for usage.\n"},
		{[]string{"help", "wrokers"}, "wsfleet: unknown command \"wrokers\" (did you mean \"workers\"?)\nRun 'wsfleet help' for usage.\n"},
		{[]string{"start"}, "wsfleet start: got 0 argument(s) [], want <ws_url>\nRun 'wsfleet start -h' for usage.\n"},
		{[]string{"start", "ws://127.0.0.1:1/x", "--standby-window", "1m"},
			"wsfleet start: --standby-window and --standby-window-bytes apply with --standby\nRun 'wsfleet start -h' for usage.\n"},
		{[]string{"stop", "a", "b"}, "wsfleet stop: got 2 argument(s) [\"a\" \"b\"], want <id>\n"},
		{[]string{"workers", "all"}, "wsfleet workers: got 1 argument(s) [\"all\"], want no arguments\n"},
	} {
		var out, errOut bytes.Buffer
		err := cli(context.Background(), c.args, &out, &errOut)
		var ue *usageError
		if !errors.As(err, &ue) || out.Len() != 0 || !strings.HasPrefix(errOut.String(), c.want) {
			t.Errorf("wsfleet %s: %v, stdout %q, stderr\n%s\nwant it to start\n%s", strings.Join(c.args, " "), err, out.String(), errOut.String(), c.want)
		}
	}
}

// TestBinaryExitCodes runs the built command: help on every command exits
// 0 with the help on stdout (no "help requested"), a usage error exits 1
// with one message and a hint on stderr.
func TestBinaryExitCodes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	bin := filepath.Join(t.TempDir(), "wsfleet")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(args ...string) (code int, stdout, stderr string) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "WSFLEET_API=http://127.0.0.1:1")
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), o.String(), e.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, o.String(), e.String()
	}
	lines := [][]string{{"-h"}, {"--help"}, {"help"}}
	for _, cmd := range commands {
		lines = append(lines, []string{cmd.name, "-h"}, []string{cmd.name, "--help"}, []string{"help", cmd.name})
	}
	for _, args := range lines {
		code, stdout, stderr := run(args...)
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "usage: wsfleet") || strings.Contains(stdout, "help requested") {
			t.Errorf("wsfleet %s: exit %d, stderr %q, stdout:\n%s", strings.Join(args, " "), code, stderr, stdout)
		}
	}
	code, stdout, stderr := run("start", "-resume-parm", "from", "ws://127.0.0.1:1/x")
	if code != 1 || stdout != "" || stderr != "wsfleet start: flag provided but not defined: -resume-parm (did you mean -resume-param?)\nRun 'wsfleet start -h' for usage.\n" {
		t.Errorf("a misspelt flag: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, stdout, stderr := run(); code != 1 || stdout != "" || !strings.HasPrefix(stderr, "usage: wsfleet") || strings.Contains(stderr, "no command") {
		t.Errorf("bare wsfleet: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	// An API error is still reported once, by main.
	if code, _, stderr := run("stop", "x"); code != 1 || !strings.HasPrefix(stderr, "wsfleet: stop: ") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("stop against no API: exit %d, stderr %q", code, stderr)
	}
}
