package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/wsfleet/wsfleet/cmd/wsfleet/apiclient"
	"github.com/wsfleet/wsfleet/shared/cmdmain"
)

// A command is one wsfleet subcommand. Its help is generated from the
// FlagSet its flags function fills, so the help cannot drift from the flags.
type command struct {
	name     string
	args     string   // the positional arguments, for the synopsis: "<ws_url>"
	short    string   // one line, for the command list
	long     string   // what it does, for its help
	examples []string // command lines, each "wsfleet <name> ..."
	// minArgs and maxArgs bound the positional arguments (maxArgs -1: any).
	minArgs, maxArgs int
	// flags defines the command's flags on fs and returns what runs the
	// command once they are parsed.
	flags func(fs *flag.FlagSet) action
}

// An action runs a parsed command with its positional arguments. It checks
// its flag values first and asks for the client only then, so a usage
// error needs no credentials.
type action func(ctx context.Context, e *env, pos []string) error

type env struct {
	stdout io.Writer
	client func() (*apiclient.Client, error)
}

// commands is the command table, in the order the usage lists it.
var commands []*command

func init() {
	commands = []*command{
		{
			name: "start", args: "<ws_url>", minArgs: 1, maxArgs: 1,
			short: "start a session (POST /sessions)",
			long: "Start a session on the WebSocket source ws_url (POST /sessions). It prints the session's id, " +
				"desired state, generation and outcome, and names the owner it told through its mailbox. " +
				"Starting a FAILED session again with the same arguments retries it.",
			examples: []string{
				"wsfleet start wss://127.0.0.1:8790/feed/second --id second --resume-param from",
				"wsfleet start wss://ws.okx.com:8443/ws/v5/public --id okx-tickers --seq-mode none --source okx.json",
				"wsfleet start wss://stream.example.com/live --id live --seq-mode none --standby --standby-window 45s",
			},
			flags: startFlags,
		},
		{
			name: "stop", args: "<id>", minArgs: 1, maxArgs: 1,
			short: "stop a session (POST /sessions/{id}/stop)",
			long:  "Stop the session id (POST /sessions/{id}/stop); its owner closes the socket and releases it.",
			examples: []string{
				"wsfleet stop second",
			},
			flags: func(*flag.FlagSet) action { return runStop },
		},
		{
			name: "status", args: "[id ...]", minArgs: 0, maxArgs: -1,
			short: "a table of sessions: state, owner, epoch, last_seq, last error",
			long: "Show sessions as a table (GET /sessions, or GET /sessions/{id} for each id given): " +
				"ID, STATE (FAILED: the source cannot be connected), OWNER (- when no worker owns it), " +
				"EPOCH (the fencing token of the current or last tenure), LAST_SEQ (the last checkpoint) " +
				"and LAST ERROR (marked \"(past, epoch E)\" when seen in an earlier tenure or generation); below the table, " +
				"a line \"standby ID: ...\" for each session with a hot standby: the worker holding it and its epoch (or none held), " +
				"its window, or the source's refusal of a second connection. Both desired states unless --state.",
			examples: []string{
				"wsfleet status --state STARTED",
				"wsfleet status second hello",
			},
			flags: func(fs *flag.FlagSet) action { return statusFlags("status", fs) },
		},
		{
			name: "watch", args: "[id ...]", minArgs: 0, maxArgs: -1,
			short: "status, refreshed until Ctrl-C",
			long:  "Show the status table, refreshed every --every until Ctrl-C.",
			examples: []string{
				"wsfleet watch --state STARTED --every 2s",
			},
			flags: func(fs *flag.FlagSet) action { return statusFlags("watch", fs) },
		},
		{
			name: "workers", args: "", minArgs: 0, maxArgs: 0,
			short: "a table of the workers: alive, dead and left (GET /workers)",
			long: "Show the worker records (GET /workers), alive first: ID, STATE, EPOCH, LOAD/CAP, SHARE, " +
				"MOVES/MIN, HEARTBEAT, ADMIN, HOST and PID (where its process runs), UP SINCE, ENDED and DECLARED DEAD BY, and a summary line.",
			examples: []string{
				"wsfleet workers",
			},
			flags: func(*flag.FlagSet) action { return runWorkers },
		},
		{
			name: "help", args: "[command]", minArgs: 0, maxArgs: 1,
			short: "show the usage, or a command's flags and examples",
			long:  "Show the usage, or with a command its synopsis, every flag with its default, and examples.",
			examples: []string{
				"wsfleet help start",
			},
			flags: func(*flag.FlagSet) action { return runHelp },
		},
	}
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// globalFlags defines the flags that come before the command.
func globalFlags(fs *flag.FlagSet) (api, sig, region *string) {
	api = fs.String("api", apiclient.DefaultAPI, "ingest API base `URL`; $"+apiclient.EnvAPI+" overrides the default")
	sig = fs.String("sigv4", "auto", "`auto|on|off`: sign requests with SigV4 (service execute-api, the standard AWS "+
		"credential chain); auto signs unless the API is on a loopback address")
	region = fs.String("region", "", "AWS `region` for SigV4 (default: the AWS configuration, or the execute-api host name)")
	return api, sig, region
}

// cli runs the command line with args (without the program name). Help goes
// to stdout and returns nil. A usage error (an unknown command or flag, a
// wrong number of arguments) is printed to stderr with a hint and returned
// as reported, so main exits 1 without printing it again.
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	err := dispatch(ctx, args, stdout, stderr)
	var ue *usageError
	if !errors.As(err, &ue) {
		return err
	}
	if ue.cmd == "" {
		fmt.Fprintf(stderr, "wsfleet: %v\nRun 'wsfleet help' for usage.\n", ue.err)
	} else {
		fmt.Fprintf(stderr, "wsfleet %s: %v\nRun 'wsfleet %s -h' for usage.\n", ue.cmd, ue.err, ue.cmd)
	}
	return cmdmain.Reported(err)
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("wsfleet", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	api, sig, region := globalFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return writeUsage(stdout)
		}
		return flagError("", fs, args, err)
	}
	if fs.NArg() == 0 {
		if err := writeUsage(stderr); err != nil {
			return err
		}
		return cmdmain.Reported(errors.New("no command"))
	}
	apiSet := false
	fs.Visit(func(f *flag.Flag) { apiSet = apiSet || f.Name == "api" })
	if v := os.Getenv(apiclient.EnvAPI); v != "" && !apiSet {
		*api = v
	}
	name, rest := fs.Arg(0), fs.Args()[1:]
	cmd := lookup(name)
	if cmd == nil {
		msg := fmt.Sprintf("unknown command %q", name)
		if s := suggest(name, commandNames()); len(s) > 0 {
			msg += " (did you mean " + joinOr(quoteAll(s)) + "?)"
		}
		return &usageError{err: errors.New(msg)}
	}
	run, pos, err := parse(cmd, rest)
	if errors.Is(err, flag.ErrHelp) {
		return writeHelp(stdout, cmd)
	}
	if err != nil {
		return err
	}
	e := &env{stdout: stdout, client: func() (*apiclient.Client, error) { return newClient(ctx, *api, *sig, *region) }}
	return run(ctx, e, pos)
}

// parse parses a command's arguments: its flags (before or after the
// positional arguments) and the number of positional ones. It returns
// flag.ErrHelp for -h, -help or --help.
func parse(cmd *command, args []string) (action, []string, error) {
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	run := cmd.flags(fs)
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil, nil, err
	}
	if err != nil {
		return nil, nil, flagError(cmd.name, fs, args, err)
	}
	switch {
	case len(pos) < cmd.minArgs || cmd.maxArgs >= 0 && len(pos) > cmd.maxArgs:
		want := cmd.args
		if want == "" {
			want = "no arguments"
		}
		return nil, nil, usagef(cmd.name, "got %d argument(s) %q, want %s", len(pos), pos, want)
	}
	return run, pos, nil
}

func newClient(ctx context.Context, api, sig, region string) (*apiclient.Client, error) {
	sign := false
	switch sig {
	case "auto":
		sign = !apiclient.IsLocal(api)
	case "on":
		sign = true
	case "off":
	default:
		return nil, &usageError{err: fmt.Errorf("--sigv4 %q: want auto, on or off", sig)}
	}
	var signer apiclient.Signer
	if sign {
		s, err := apiclient.NewSigV4(ctx, api, region)
		if err != nil {
			return nil, err
		}
		signer = s
	}
	return apiclient.NewClient(api, signer)
}

func runHelp(_ context.Context, e *env, pos []string) error {
	if len(pos) == 0 {
		return writeUsage(e.stdout)
	}
	cmd := lookup(pos[0])
	if cmd == nil {
		msg := fmt.Sprintf("unknown command %q", pos[0])
		if s := suggest(pos[0], commandNames()); len(s) > 0 {
			msg += " (did you mean " + joinOr(quoteAll(s)) + "?)"
		}
		return &usageError{err: errors.New(msg)}
	}
	return writeHelp(e.stdout, cmd)
}

// parseInterspersed parses flags that may come before or after positional
// arguments and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
