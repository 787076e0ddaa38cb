package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wsfleet/wsfleet/cmd/wsfleet/apiclient"
	"github.com/wsfleet/wsfleet/shared/cmdmain"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/spec"
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

type headerFlags map[string]string

func (h headerFlags) String() string { return "" }
func (h headerFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("header %q: want NAME=VALUE", v)
	}
	h[k] = val
	return nil
}

func startFlags(fs *flag.FlagSet) action {
	var r apiclient.StartRequest
	fs.StringVar(&r.ConnectionID, "id", "", "connection `ID` (default: generated by the API)")
	fs.StringVar(&r.SeqField, "seq-field", "", "JSON `field` holding the sequence number (API default: seq)")
	fs.StringVar(&r.ResumeQueryParam, "resume-param", "", "query `parameter` the worker sets to last_seq+1 on reconnect")
	fs.StringVar(&r.CheckpointEvery, "checkpoint-every", "", "checkpoint `interval`, 1s..10m (API default: the worker's)")
	fs.StringVar(&r.SeqPath, "seq-path", "", "dotted `path` to the sequence number, such as data.u (API default: seq)")
	fs.StringVar(&r.SeqMode, "seq-mode", "", "`field|none`: field (the default) reads the sequence number; none: the worker numbers the messages")
	sourceFile := fs.String("source", "", "JSON `file` of start fields, set over the flags: usually the source protocol (open_messages, app_ping, keepalive_reply, idle_timeout, resume, on_missing_seq, …; docs/sources.md)")
	hdr := headerFlags{}
	fs.Var(hdr, "header", "dial header `NAME=VALUE` (repeatable)")
	standby := fs.Bool("standby", false, "hold a hot standby: a second connection, by another worker, that takes over with no dial when the owner dies (docs/api.md)")
	window := fs.String("standby-window", "", "with --standby: the `age` bound of what the standby keeps, 5s..10m (API default: 30s)")
	windowBytes := fs.Int64("standby-window-bytes", 0, "with --standby: the `size` bound of what it keeps, 65536..16777216 bytes (API default: 1048576)")
	return func(ctx context.Context, e *env, pos []string) error {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if (set["standby-window"] || set["standby-window-bytes"]) && !*standby {
			return usagef("start", "--standby-window and --standby-window-bytes apply with --standby")
		}
		if *standby {
			r.Standby = &spec.Standby{Enabled: new(true)}
			if set["standby-window"] {
				r.Standby.Window = window
			}
			if set["standby-window-bytes"] {
				r.Standby.WindowBytes = windowBytes
			}
		}
		if *sourceFile != "" {
			if err := readSource(*sourceFile, &r); err != nil {
				return fmt.Errorf("start: %w", err)
			}
		}
		r.WSURL = pos[0]
		if len(hdr) > 0 {
			r.Headers = hdr
		}
		c, err := e.client()
		if err != nil {
			return err
		}
		ch, err := c.Start(ctx, r)
		if err != nil {
			return fmt.Errorf("start: %w", err)
		}
		fmt.Fprintf(e.stdout, "%s %s (generation %d, %s%s)\n", ch.ConnectionID, ch.DesiredState, ch.Generation, ch.Outcome, ownerNote(ch))
		return nil
	}
}

// readSource reads start fields from a JSON file, usually the source
// protocol ones (open messages may carry credentials: a file keeps them out
// of the shell history). The fields it holds are set on r over the flags; a
// field the API does not know is an error naming its path and the field it
// may have meant, as the API's refusal does (spec.CheckKeys).
func readSource(path string, r *apiclient.StartRequest) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--source: %w", err)
	}
	if err := spec.CheckKeys(b, reflect.TypeFor[apiclient.StartRequest]()); err != nil {
		return fmt.Errorf("--source %s: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(r); err != nil {
		return fmt.Errorf("--source %s: %w", path, err)
	}
	return nil
}

func runStop(ctx context.Context, e *env, pos []string) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	ch, err := c.Stop(ctx, pos[0])
	if err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	fmt.Fprintf(e.stdout, "%s %s (generation %d, %s%s)\n", ch.ConnectionID, ch.DesiredState, ch.Generation, ch.Outcome, ownerNote(ch))
	return nil
}

// ownerNote says which worker a start or stop told: "; owner w1 told", or
// "; owner w1 not alive" when its mailbox could not take it.
func ownerNote(ch apiclient.Change) string {
	switch {
	case ch.Owner == "":
		return ""
	case ch.OwnerNotified:
		return "; owner " + ch.Owner + " told"
	}
	return "; owner " + ch.Owner + " not told (not alive)"
}

// statusFlags defines the flags of status and watch (name).
func statusFlags(name string, fs *flag.FlagSet) action {
	var state string
	var every time.Duration
	fs.StringVar(&state, "state", "", "only sessions in this desired `state`: STARTED or STOPPED (default: both)")
	if name == "watch" {
		fs.DurationVar(&every, "every", time.Second, "refresh `interval`, at least 100ms")
	}
	return func(ctx context.Context, e *env, ids []string) error {
		state = strings.ToUpper(state)
		if state != "" && state != "STARTED" && state != "STOPPED" {
			return usagef(name, "--state %q: want STARTED or STOPPED", state)
		}
		if name == "watch" && every < 100*time.Millisecond {
			return usagef(name, "--every %v: want >= 100ms", every)
		}
		c, err := e.client()
		if err != nil {
			return err
		}
		if name == "watch" {
			return watch(ctx, c, state, every, ids, e.stdout)
		}
		ss, err := fetch(ctx, c, state, ids)
		if err != nil {
			return fmt.Errorf("status: %w", err)
		}
		return writeTable(e.stdout, ss)
	}
}

func fetch(ctx context.Context, c *apiclient.Client, state string, ids []string) ([]apiclient.Session, error) {
	if len(ids) == 0 {
		return c.List(ctx, state)
	}
	var out []apiclient.Session
	for _, id := range ids {
		s, err := c.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func watch(ctx context.Context, c *apiclient.Client, state string, every time.Duration, ids []string, out io.Writer) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		ss, err := fetch(ctx, c, state, ids)
		var b strings.Builder
		b.WriteString("\x1b[H\x1b[2J") // home, clear
		fmt.Fprintf(&b, "wsfleet watch  %s  every %v  (Ctrl-C to quit)\n\n", c.Base(), every)
		if err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
		} else if werr := writeTable(&b, ss); werr != nil {
			return werr
		}
		if _, err := io.WriteString(out, b.String()); err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// writeTable writes sessions as the status table, sorted by id.
func writeTable(w io.Writer, ss []apiclient.Session) error {
	sort.Slice(ss, func(i, j int) bool { return ss[i].ConnectionID < ss[j].ConnectionID })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tOWNER\tEPOCH\tLAST_SEQ\tLAST ERROR")
	for _, s := range ss {
		owner := s.LeaseOwner
		if owner == "" {
			owner = "-"
		}
		last := "-"
		if s.LastSeq != nil {
			last = strconv.FormatInt(*s.LastSeq, 10)
		}
		state := s.DesiredState
		if s.Failed {
			state = "FAILED"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", s.ConnectionID, state, owner, s.LeaseEpoch, last, lastError(s))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	for _, s := range ss {
		if line := standbyLine(s); line != "" {
			fmt.Fprintln(w, line)
		}
	}
	_, err := fmt.Fprintf(w, "%d session(s)\n", len(ss))
	return err
}

// standbyLinePrefix starts the line the status table adds, below its rows,
// for each session with a hot standby.
const standbyLinePrefix = "standby "

// standbyLine is the status line of s's hot standby, "" when it has none:
// the worker holding it and its epoch, or that none is held yet, or the
// source's refusal at the current generation, with the window's bounds
// and the last standby error.
func standbyLine(s apiclient.Session) string {
	if s.Standby == nil && s.StandbyHolder == nil && s.StandbyRefused == nil {
		return ""
	}
	line := standbyLinePrefix + s.ConnectionID + ": "
	switch {
	case s.StandbyRefused != nil:
		line += "refused by the source at generation " + strconv.FormatInt(s.StandbyRefused.Generation, 10)
		if s.StandbyRefused.Error != "" {
			line += " (" + s.StandbyRefused.Error + ")"
		}
		return line + "; the session goes on without one"
	case s.StandbyHolder != nil:
		line += s.StandbyHolder.WorkerID + ", epoch " + strconv.FormatInt(s.StandbyHolder.Epoch, 10)
	default:
		line += "none held"
	}
	if sb := s.Standby; sb != nil {
		line += " (window " + sb.Window + ", " + strconv.FormatInt(sb.WindowBytes, 10) + " bytes)"
	}
	if s.StandbyError != "" {
		line += "; last error: " + s.StandbyError
	}
	return line
}

// lastError is s's LAST ERROR cell: the text and its time, and, when it was
// seen in an earlier tenure or generation than the session's current ones,
// "(past, generation G, epoch E)" naming those it was seen in, so that an
// old error does not read as a live failure. An error recorded before its
// generation and epoch were shows without the marker.
func lastError(s apiclient.Session) string {
	if s.LastError == "" {
		return "-"
	}
	text := s.LastError
	if s.LastErrorAt != "" {
		text += " (" + s.LastErrorAt + ")"
	}
	if !s.PastError() {
		return text
	}
	var in []string
	if s.LastErrorGeneration > 0 && s.LastErrorGeneration < s.Generation {
		in = append(in, "generation "+strconv.FormatInt(s.LastErrorGeneration, 10))
	}
	if s.LastErrorEpoch > 0 && s.LastErrorEpoch < s.LeaseEpoch {
		in = append(in, "epoch "+strconv.FormatInt(s.LastErrorEpoch, 10))
	}
	return text + " (past, " + strings.Join(in, ", ") + ")"
}

func runWorkers(ctx context.Context, e *env, _ []string) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	ws, err := c.Workers(ctx)
	if err != nil {
		return fmt.Errorf("workers: %w", err)
	}
	return writeWorkers(e.stdout, ws, time.Now())
}

// writeWorkers writes the workers table in the API's order (alive first),
// times relative to now, and a summary line.
func writeWorkers(w io.Writer, ws apiclient.Workers, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tEPOCH\tLOAD/CAP\tSHARE\tMOVES/MIN\tHEARTBEAT\tADMIN\tHOST\tPID\tUP SINCE\tENDED\tDECLARED DEAD BY")
	count := map[string]int{}
	load, capacity := 0, 0
	for _, x := range ws.Workers {
		count[x.State]++
		if x.State == schema.WorkerAlive {
			load += x.Load
			capacity += x.Capacity
		}
		// Only an alive worker's load, share and draining flag mean anything:
		// a dead or left record keeps the last ones it wrote.
		state, loadCap, share := x.State, "-", "-"
		if x.State == schema.WorkerAlive {
			loadCap = fmt.Sprintf("%d/%d", x.Load, x.Capacity)
			if x.Draining {
				state += " (draining)"
			} else {
				share = fmt.Sprintf("%.1f", x.FairShare)
			}
		}
		pid := "-"
		if x.PID > 0 {
			pid = strconv.Itoa(x.PID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", x.ID, state, x.Epoch, loadCap, share, x.MovesPerMin,
			ago(x.HeartbeatAtMs, now), dash(x.AdminAddr), dash(x.Host), pid, ago(x.StartedAtMs, now), ago(x.EndedAtMs, now), dash(x.DeclaredDeadBy))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	_, err := fmt.Fprintf(w, "%d worker(s): %d alive (load %d/%d, imbalance %.2f = max load ÷ fair share), %d dead, %d left\n", len(ws.Workers),
		count[schema.WorkerAlive], load, capacity, ws.Imbalance, count[schema.WorkerDead], count[schema.WorkerLeft])
	if err == nil && ws.Truncated {
		_, err = fmt.Fprintf(w, "(only the first %d records: there are more)\n", ws.Limit)
	}
	return err
}

// ago renders a wall-clock time in Unix ms relative to now: "1.2s ago",
// "3m4s ago", "-" for none. Clocks differ, so a time slightly in the
// future reads "0s ago".
func ago(ms int64, now time.Time) string {
	if ms == 0 {
		return "-"
	}
	d := now.Sub(time.UnixMilli(ms))
	switch {
	case d < 0:
		d = 0
	case d < time.Minute:
		d = d.Round(100 * time.Millisecond)
	default:
		d = d.Round(time.Second)
	}
	return d.String() + " ago"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
