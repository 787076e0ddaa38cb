package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	suggestpkg "github.com/wsfleet/wsfleet/shared/suggest"
)

// helpWidth is the column the help text wraps at.
const helpWidth = 80

// writeUsage writes the top-level usage: every command with one line, and
// the global flags.
func writeUsage(w io.Writer) error {
	b := bufio.NewWriter(w)
	fmt.Fprint(b, "usage: wsfleet [global flags] <command> [flags] [arguments]\n\n")
	wrap(b, "wsfleet starts, stops and shows sessions through the ingest API. "+
		"A command's flags may come before or after its arguments.", "", helpWidth)
	fmt.Fprint(b, "\ncommands:\n")
	width := 0
	for _, c := range commands {
		width = max(width, len(c.name))
	}
	for _, c := range commands {
		fmt.Fprintf(b, "  %-*s  %s\n", width, c.name, c.short)
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.flags(fs)
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, "--"+f.Name) })
		if len(names) > 0 {
			wrap(b, "flags: "+strings.Join(names, " "), strings.Repeat(" ", width+4), helpWidth)
		}
	}
	fmt.Fprint(b, "\nglobal flags (before the command):\n")
	fs := flag.NewFlagSet("wsfleet", flag.ContinueOnError)
	globalFlags(fs)
	writeFlags(b, fs)
	fmt.Fprint(b, "\n'wsfleet <command> -h' or 'wsfleet help <command>': its flags and examples.\n")
	return b.Flush()
}

// writeHelp writes a command's help: its synopsis, what it does, every flag
// of its FlagSet with its default and description, and examples.
func writeHelp(w io.Writer, cmd *command) error {
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	cmd.flags(fs)
	b := bufio.NewWriter(w)
	synopsis := "usage: wsfleet [global flags] " + cmd.name
	if hasFlags(fs) {
		synopsis += " [flags]"
	}
	if cmd.args != "" {
		synopsis += " " + cmd.args
	}
	fmt.Fprint(b, synopsis, "\n\n")
	wrap(b, cmd.long, "", helpWidth)
	if hasFlags(fs) {
		fmt.Fprint(b, "\nflags:\n")
		writeFlags(b, fs)
	}
	fmt.Fprint(b, "\nexamples:\n")
	for _, ex := range cmd.examples {
		fmt.Fprintf(b, "  %s\n", ex)
	}
	fmt.Fprint(b, "\nThe global flags (--api, --sigv4, --region) are in 'wsfleet help'.\n")
	return b.Flush()
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// writeFlags writes every flag of fs, sorted by name: "--name ARG", then
// its description and its default, if it has one.
func writeFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		arg, desc := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if arg != "" {
			line += " " + arg
		}
		fmt.Fprintln(w, line)
		if d, ok := shownDefault(f); ok {
			desc += " (default " + d + ")"
		}
		wrap(w, desc, "        ", helpWidth)
	})
}

// shownDefault is the default the help shows for f: none for a zero value
// (off, 0, empty), which the description says when it matters.
func shownDefault(f *flag.Flag) (string, bool) {
	d := f.DefValue
	return d, d != "" && d != "0" && d != "false" && d != "0s"
}

// wrap writes text in lines of at most width columns (a longer word gets
// its own line), each starting with indent.
func wrap(w io.Writer, text, indent string, width int) {
	line := indent
	for _, word := range strings.Fields(text) {
		if line != indent && len(line)+1+len(word) > width {
			fmt.Fprintln(w, line)
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += word
	}
	if line != indent {
		fmt.Fprintln(w, line)
	}
}

// A usageError is a command line wsfleet cannot run: an unknown command or
// flag, a bad flag value, a wrong number of arguments. cmd is the command,
// "" for the top level.
type usageError struct {
	cmd string
	err error
}

func (e *usageError) Error() string {
	if e.cmd == "" {
		return e.err.Error()
	}
	return e.cmd + ": " + e.err.Error()
}

func (e *usageError) Unwrap() error { return e.err }

func usagef(cmd, format string, args ...any) error {
	return &usageError{cmd: cmd, err: fmt.Errorf(format, args...)}
}

// flagError turns an error of fs.Parse(args) into a usage error; an unknown
// flag names the nearest flags of fs, written with the dashes the user
// typed.
func flagError(cmd string, fs *flag.FlagSet, args []string, err error) error {
	name, names, ok := suggestpkg.UnknownFlag(fs, err)
	if !ok {
		return &usageError{cmd: cmd, err: err}
	}
	dashes := "-"
	for _, a := range args {
		if a == "--" {
			break
		}
		n, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && n == name {
			dashes = a[:len(a)-len(strings.TrimLeft(a, "-"))]
			break
		}
	}
	msg := "flag provided but not defined: " + dashes + name
	if s := suggest(name, names); len(s) > 0 {
		for i := range s {
			s[i] = dashes + s[i]
		}
		msg += " (did you mean " + joinOr(s) + "?)"
	} else if cmd != "" && isGlobal(name) {
		msg += " (" + dashes + name + " is a global flag: put it before the command, as in wsfleet " + dashes + name + " … " + cmd + ")"
	}
	return &usageError{cmd: cmd, err: fmt.Errorf("%s", msg)}
}

func isGlobal(name string) bool {
	fs := flag.NewFlagSet("wsfleet", flag.ContinueOnError)
	globalFlags(fs)
	return fs.Lookup(name) != nil
}

func commandNames() []string {
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	return names
}

// maxDistance is the largest edit distance a suggestion may be at.
const maxDistance = 2

// suggest returns the candidates nearest to typed, sorted: those at the
// smallest edit distance (Damerau–Levenshtein, case folded) if it is at
// most maxDistance and at most half of typed's length; else the candidates
// typed is a prefix of (at least 2 characters typed), if there are at most
// 3 of them; else none.
func suggest(typed string, candidates []string) []string {
	t := strings.ToLower(typed)
	best, dist := []string(nil), maxDistance+1
	for _, c := range candidates {
		d := suggestpkg.DistanceAtMost(t, strings.ToLower(c), maxDistance)
		if d > maxDistance || 2*d > len(t) {
			continue
		}
		switch {
		case d < dist:
			best, dist = []string{c}, d
		case d == dist:
			best = append(best, c)
		}
	}
	if len(best) == 0 && len(t) >= 2 {
		for _, c := range candidates {
			if strings.HasPrefix(strings.ToLower(c), t) {
				best = append(best, c)
			}
		}
		if len(best) > 3 {
			best = nil
		}
	}
	sort.Strings(best)
	return best
}

// joinOr joins "a", "a or b", "a, b or c".
func joinOr(s []string) string {
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

func quoteAll(s []string) []string {
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = strconv.Quote(x)
	}
	return q
}
