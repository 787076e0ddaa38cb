package main

// The status and list commands: one session, a page, and watch mode.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wsfleet/wsfleet/cmd/wsfleet/apiclient"
)

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
