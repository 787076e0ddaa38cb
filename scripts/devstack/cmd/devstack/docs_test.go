package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/testkit/docsnippet"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/proc"
	"github.com/wsfleet/wsfleet/testkit/syncbuf"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// docBlock is the first fenced block of doc whose text starts with prefix.
func docBlock(t *testing.T, doc, prefix string) string {
	t.Helper()
	i := strings.Index(doc, "```\n"+prefix)
	if i < 0 {
		t.Fatalf("docs/local-stack.md has no block starting %q", prefix)
	}
	b := doc[i+4:]
	return b[:strings.Index(b, "```\n")]
}

// firstSection is the first section of doc running cmd.
func firstSection(t *testing.T, doc, cmd string) docsnippet.Section {
	t.Helper()
	for _, s := range docsnippet.Sections(doc) {
		if s.Cmd == cmd {
			return s
		}
	}
	t.Fatalf("docs/local-stack.md shows no $ %s", cmd)
	return docsnippet.Section{}
}

var (
	number   = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)
	ago      = regexp.MustCompile(`^[0-9.]+[µnmsh0-9.]* ago$`)
	jsonStr  = regexp.MustCompile(`:"[^"]*"`)
	jsonNum  = regexp.MustCompile(`:-?[0-9]+`)
	upLine   = regexp.MustCompile(`(?m)^[0-9:]{8} worker-[0-9]+-run1 up \(pid .*$`)
	sinkLine = regexp.MustCompile(`(?m)^\{"connection_id":"[^"]*","seq":.*$`)
)

// numbersOut is s with every number N: the form of a line whose numbers
// (ports, pids, times, seqs, counts) change per run.
func numbersOut(s string) string { return number.ReplaceAllString(s, "N") }

// jsonForm is a compact JSON line's keys and nesting, its values aside.
func jsonForm(s string) string {
	return jsonNum.ReplaceAllString(jsonStr.ReplaceAllString(s, ":S"), ":N")
}

// tableForm is a tabwriter table (header, rows, summary line) with its
// per-run values out: the header and each row as its cells (split at the
// header's column starts) joined by one space, every number N, every age
// "T ago", the HOST column H; the summary line with its numbers N.
func tableForm(lines []string) []string {
	header := lines[0]
	var starts []int
	for i := range header {
		if i == 0 || header[i] != ' ' && i >= 2 && header[i-1] == ' ' && header[i-2] == ' ' {
			starts = append(starts, i)
		}
	}
	cells := func(row string) []string {
		var out []string
		for k, s := range starts {
			end := len(row)
			if k+1 < len(starts) {
				end = min(starts[k+1], len(row))
			}
			if s >= end {
				out = append(out, "")
				continue
			}
			out = append(out, strings.TrimSpace(row[s:end]))
		}
		return out
	}
	names := cells(header)
	out := []string{strings.Join(names, " ")}
	for _, row := range lines[1 : len(lines)-1] {
		c := cells(row)
		for k := range c {
			switch {
			case names[k] == "HOST" && c[k] != "-":
				c[k] = "H"
			case ago.MatchString(c[k]):
				c[k] = "T ago"
			default:
				c[k] = numbersOut(c[k])
			}
		}
		out = append(out, strings.Join(c, " "))
	}
	return append(out, numbersOut(lines[len(lines)-1]))
}

// TestDocsShowTheSinkLine: every sink line pasted in docs/local-stack.md
// is what the stdout sink writes (sink.AppendJSON) for its own values, byte
// for byte: a key added, renamed or moved fails it.
func TestDocsShowTheSinkLine(t *testing.T) {
	doc, err := os.ReadFile("../../../../docs/local-stack.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := sinkLine.FindAllString(string(doc), -1)
	if len(lines) < 2 {
		t.Fatalf("docs/local-stack.md shows %d sink lines", len(lines))
	}
	for _, l := range lines {
		var r struct {
			ConnectionID string          `json:"connection_id"`
			Seq          int64           `json:"seq"`
			LeaseEpoch   int64           `json:"lease_epoch"`
			WorkerID     string          `json:"worker_id"`
			ReceivedAtMs int64           `json:"received_at_ms"`
			Data         json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Errorf("sink line %s: %v", l, err)
			continue
		}
		m := sink.Message{ConnectionID: r.ConnectionID, Seq: r.Seq, LeaseEpoch: r.LeaseEpoch, WorkerID: r.WorkerID, ReceivedAtMs: r.ReceivedAtMs, Data: r.Data}
		if got := string(sink.AppendJSON(nil, m)); got != l {
			t.Errorf("docs/local-stack.md shows the sink line\n%s\nthe stdout sink writes\n%s", l, got)
		}
	}
}

var (
	duration   = regexp.MustCompile(`\b[0-9][0-9.]*(ns|µs|ms|s|m|h)([0-9][0-9.]*(ns|µs|ms|s|m|h))*\b`)
	inlineCode = regexp.MustCompile("`([^`]+)`")
	timeOfDay  = regexp.MustCompile(`^[0-9]{2}:[0-9]{2}:[0-9]{2} `)
	// a code span quoting (part of) a report
	reportSpan = regexp.MustCompile(`\(pid |exited with code|was killed by signal|before it was ready|restarting in|not restarted|could not start`)
	// the form of a whole report line, not a part of one
	wholeReport = regexp.MustCompile(`^(N:N:N )?(devstack: |[a-z][a-zA-Z0-9.-]* (up )?\(pid )`)
)

// reportForm is a report line's form: every duration D (20.441s, 12ms,
// 1m0s), then every other number N (times of day, pids, ports, run and
// incarnation numbers, codes, signals).
func reportForm(s string) string { return numbersOut(duration.ReplaceAllString(s, "D")) }

// docReports are the stack's report lines shown in doc: the lines of its
// fenced blocks that start with a time of day or "devstack: " (what the
// stack prints on its terminal, and on stderr when it ends), and its
// inline code spans that quote a report or a part of one (a pid, an exit,
// a restart, a start that failed), a span's line breaks read as spaces.
func docReports(doc string) (fenced, inline []string) {
	var para []string
	spans := func() {
		for _, m := range inlineCode.FindAllStringSubmatch(strings.Join(para, "\n"), -1) {
			if s := strings.ReplaceAll(m[1], "\n", " "); reportSpan.MatchString(s) {
				inline = append(inline, s)
			}
		}
		para = para[:0]
	}
	in := false
	for _, l := range strings.Split(doc, "\n") {
		switch {
		case strings.HasPrefix(strings.TrimLeft(l, " "), "```"):
			in = !in
			spans()
		case in:
			if timeOfDay.MatchString(l) || strings.HasPrefix(l, "devstack: ") {
				fenced = append(fenced, l)
			}
		case strings.TrimSpace(l) == "": // a span ends with its paragraph
			spans()
		default:
			para = append(para, l)
		}
	}
	spans()
	return fenced, inline
}

// TestDocsShowTheExitReports keeps the supervisor's report lines in the
// docs (README.md and docs/, docs/local-stack.md's in practice) the lines
// the stack prints. It renders, from fixed inputs, every kind of line the
// docs show through the code the stack prints them with (exitLog, the
// OnWorker and OnExit hook of run; startErr and devstack.NotReadyError for
// a start that fails; exitLog.err for the exit status with
// --restart=false, printed by cmdmain as "devstack: " and the error): a
// worker up, the same after a restart (.r2), a kill -9 restarted, a
// SIGTERM restarted, an exit before it was ready (the report and the
// stack's error), a kill -9 not restarted and the status the stack then
// exits with. Then every report line of a doc's fenced blocks (a time of
// day or "devstack: " first) must have the form of a rendered line, every
// inline span quoting a whole report the form of a rendered line (its
// time of day aside), and every span quoting a part of one (`exited with
// code 0`, `; not restarted`) must be a part of a rendered line's form;
// forms have every duration D and every other number N. Every rendered
// kind must be shown somewhere, so a doc line the selection misses
// fails too.
func TestDocsShowTheExitReports(t *testing.T) {
	var out bytes.Buffer
	log := "/repo/.dev/logs/worker-1.log" // make dev's state folder, root /repo
	on := &exitLog{out: &out, file: zerolog.Nop(), root: "/repo"}
	up := func(id string, pid int) {
		on.worker(devstack.WorkerEvent{ID: id, Slot: 1, Pid: pid, Admin: "127.0.0.1:8801", Log: log})
	}
	ended := func(l *exitLog, id string, before bool, e proc.Exit) {
		e.Name = id
		l.worker(devstack.WorkerEvent{ID: id, Slot: 1, Pid: e.Pid, Log: log, BeforeReady: before, Exit: &e})
	}
	kill9 := proc.Exit{Pid: 31221, Code: -1, Signal: syscall.SIGKILL, Err: errors.New("signal: killed"), Ran: 20441 * time.Millisecond}
	up("worker-1-run1", 31221)
	restarted := kill9
	restarted.RestartIn = time.Second
	ended(on, "worker-1-run1", false, restarted)
	up("worker-1-run1.r2", 31564)
	ended(on, "worker-1-run1.r2", false, proc.Exit{Pid: 31564, Code: 0, Ran: 8112 * time.Millisecond, RestartIn: time.Second})
	// A start that fails: Worker.onExit clears RestartIn; the stack's error.
	ended(on, "worker-1-run2", true, proc.Exit{Pid: 25172, Code: 1, Err: errors.New("exit status 1"), Ran: 12 * time.Millisecond})
	startFailed := "devstack: " + startErr("/repo", &devstack.NotReadyError{ID: "worker-1-run2", Err: errors.New("exit status 1"), Log: log}).Error()
	// --restart=false: the report, and the stack's exit status.
	off := &exitLog{out: &out, file: zerolog.Nop(), root: "/repo"}
	ended(off, "worker-1-run5", false, kill9)
	printed := append(strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"), startFailed, "devstack: "+off.err().Error())
	rendered := make([]string, len(printed))
	for i, l := range printed {
		rendered[i] = reportForm(l)
	}
	t.Logf("rendered:\n%s", strings.Join(printed, "\n"))

	root := "../../../.."
	files := []string{filepath.Join(root, "README.md")}
	if err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	shown := make([]bool, len(rendered))
	check := func(file, l string, fenced bool) {
		f := reportForm(l)
		whole := fenced || wholeReport.MatchString(f)
		ok := false
		for i, r := range rendered {
			if whole && (f == r || !fenced && f == strings.TrimPrefix(r, "N:N:N ")) || !whole && strings.Contains(r, f) {
				shown[i], ok = true, true
			}
		}
		if !ok {
			what := "the report line"
			if !whole {
				what = "a part of a report line"
			}
			t.Errorf("%s shows %s\n  %s\nof the form\n  %s\nwhich the stack does not print; it prints the forms\n  %s",
				strings.TrimPrefix(file, root+"/"), what, l, f, strings.Join(rendered, "\n  "))
		}
	}
	var found []string
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		fenced, inline := docReports(string(b))
		for _, l := range fenced {
			check(file, l, true)
		}
		for _, l := range inline {
			check(file, l, false)
		}
		for _, l := range append(fenced, inline...) {
			found = append(found, strings.TrimPrefix(file, root+"/")+": "+l)
		}
	}
	for i, ok := range shown {
		if !ok {
			t.Errorf("no doc shows a line of the form %q (of %s): the selection of the docs' report lines misses it, or the kind is no longer shown (then drop it here)", rendered[i], printed[i])
		}
	}
	t.Logf("the docs' report lines and quotes:\n%s", strings.Join(found, "\n"))
}

// TestDocsWalkThrough runs docs/local-stack.md's walk-through on a stack
// started by this command's own run (make dev's code: its banner, its
// worker lines, its shutdown; free ports and a temporary folder instead of
// .dev) and the CLI of bin/ (`make devstack-bins`), and checks the doc shows
// what they print: the banner and the workers' up lines, the curl's answer
// (the curl's body is the banner's), wsfleet start, the status and workers
// tables, a frame of wsfleet watch (interrupted after two), the sink lines,
// wsfleet stop, the past error (third started on ws://, then on wss://: its
// status marks the error "(past, generation 1)") and the Ctrl-C lines. Values that
// change per run are normalised on both sides before the comparison:
// every number (ports, pids, seqs, epochs, loads, shares, times of day),
// the ages in the workers table, the HOST column, the state folder (.dev
// in the doc), the --api the banner adds for a port other than 8787, the
// rotate command (the aws CLI's or a curl, as the machine has aws) and the
// column widths (the cells are compared, split at the header's columns);
// the status and workers headers of every other block of the doc are the
// ones the CLI printed here. About 3 s.
func TestDocsWalkThrough(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the stack")
	}
	root := enginetest.InstalledRoot(t)
	wsfleet := installedBin(t, root, "wsfleet")
	b, err := os.ReadFile(filepath.Join(root, "docs", "local-stack.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	dir := t.TempDir()
	relDir := rel(root, dir)
	// the state folder as the doc names it
	local := func(s string) string { return strings.ReplaceAll(s, relDir, ".dev") }

	st := startDocStack(t, dir)
	out := st.out
	const last = bannerEnd
	said := out.String()
	banner := said[strings.Index(said, "wsfleet local stack is up"):]
	banner = banner[:strings.Index(banner, last)+len(last)]
	api, feedWS := st.api, st.feedWS

	// The banner, its rotate command aside.
	bannerForm := func(s string) []string {
		var out []string
		skip := 0
		for _, l := range strings.Split(local(strings.ReplaceAll(s, " --api "+api, "")), "\n") {
			switch {
			case skip > 0:
				skip--
			case strings.HasPrefix(l, "Rotate it"):
				skip = 2
				fallthrough
			default:
				out = append(out, numbersOut(l))
			}
		}
		return out
	}
	compareLines(t, "the banner", bannerForm(docBlock(t, doc, "wsfleet local stack is up")), bannerForm(banner))
	ups := upLine.FindAllString(said, -1)
	compareLines(t, "the workers' up lines", forms(strings.Split(strings.TrimSuffix(docBlock(t, doc, upLine.FindString(doc)), "\n"), "\n")), forms(ups))

	// In another shell: the banner's curl, then the CLI.
	body := regexp.MustCompile(`(?s)-d '(\{"connection_id":"hello".*?\})'`).FindStringSubmatch(banner)[1]
	resp, err := http.Post(api+"/sessions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var curl docsnippet.Section
	for _, s := range docsnippet.Sections(doc) {
		if strings.HasPrefix(s.Cmd, "curl -sS -X POST ") && strings.Contains(s.Cmd, `"connection_id":"hello"`) {
			curl = s
			break
		}
	}
	bannerCurl := regexp.MustCompile(`(?m)^  (curl .*) \\\n    (-d '\{"connection_id":"hello".*)$`).FindStringSubmatch(banner)
	compareLines(t, "the banner's curl", []string{numbersOut(curl.Cmd)}, []string{numbersOut(bannerCurl[1] + " " + bannerCurl[2])})
	compareLines(t, "the curl's answer", curl.Out, []string{strings.TrimSpace(string(answer))})

	cli := func(args ...string) []string {
		t.Helper()
		cmd := exec.Command(wsfleet, append([]string{"--api", api}, args...)...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("wsfleet %s: %v\n%s", strings.Join(args, " "), err, e.String())
		}
		return strings.Split(strings.TrimSuffix(o.String(), "\n"), "\n")
	}
	start := firstSection(t, doc, "bin/wsfleet start wss://127.0.0.1:8790/feed/second --id second --resume-param from")
	compareLines(t, "wsfleet start", forms(start.Out), forms(cli("start", feedWS+"/feed/second", "--id", "second", "--resume-param", "from")))

	// Both sessions owned and checkpointed, as in the doc's table.
	next := time.Now()
	testwait.Eventually(t, 30*time.Second, "both sessions checkpointed", func() bool {
		if time.Now().Before(next) {
			return false
		}
		next = time.Now().Add(100 * time.Millisecond)
		resp, err := http.Get(api + "/sessions")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var page struct {
			Sessions []struct {
				LastSeq *int64 `json:"last_seq"`
				Owner   string `json:"lease_owner"`
			} `json:"sessions"`
		}
		if json.NewDecoder(resp.Body).Decode(&page) != nil || len(page.Sessions) != 2 {
			return false
		}
		for _, s := range page.Sessions {
			if s.LastSeq == nil || s.Owner == "" {
				return false
			}
		}
		return true
	})
	status, workers := cli("status"), cli("workers")
	compareLines(t, "wsfleet status", tableForm(firstSection(t, doc, "bin/wsfleet status").Out), tableForm(status))
	compareLines(t, "wsfleet workers", tableForm(firstSection(t, doc, "bin/wsfleet workers").Out), tableForm(workers))
	for _, s := range docsnippet.Sections(doc) {
		var live []string
		switch s.Cmd {
		case "bin/wsfleet status":
			live = status
		case "bin/wsfleet workers":
			live = workers
		default:
			continue
		}
		if len(s.Out) == 0 || strings.Join(strings.Fields(s.Out[0]), " ") != strings.Join(strings.Fields(live[0]), " ") {
			t.Errorf("docs/local-stack.md: $ %s shows the header %q; the CLI prints\n%s", s.Cmd, s.Out, live[0])
		}
	}

	compareLines(t, "wsfleet watch", watchForm(firstSection(t, doc, "bin/wsfleet watch hello").Out), watchForm(watchFrame(t, wsfleet, api, "hello")))

	// The sink lines: the doc's have the form of the workers' own.
	var real []string
	for n := 1; n <= 3; n++ {
		b, err := os.ReadFile(filepath.Join(dir, "logs", fmt.Sprintf("worker-%d.sink.jsonl", n)))
		if err != nil {
			t.Fatal(err)
		}
		real = append(real, sinkLine.FindAllString(string(b), -1)...)
	}
	if len(real) == 0 {
		t.Fatal("no sink line")
	}
	for _, l := range real {
		if jsonForm(l) != jsonForm(real[0]) {
			t.Fatalf("sink lines of two forms:\n%s\n%s", real[0], l)
		}
	}
	for _, l := range sinkLine.FindAllString(doc, -1) {
		if jsonForm(l) != jsonForm(real[0]) {
			t.Errorf("docs/local-stack.md shows the sink line\n%s\na worker writes\n%s", l, real[0])
		}
	}

	stop := firstSection(t, doc, "bin/wsfleet stop second")
	compareLines(t, "wsfleet stop", forms(stop.Out), forms(cli("stop", "second")))

	// A past error: third on ws:// fails to connect, then on wss:// (a new
	// generation) delivers and keeps the error, marked (past, generation 1).
	var third []docsnippet.Section
	for _, s := range docsnippet.Sections(doc) {
		if strings.HasSuffix(s.Cmd, "/feed/third --id third --resume-param from") || s.Cmd == "bin/wsfleet status third" {
			third = append(third, s)
		}
	}
	if len(third) != 4 {
		t.Fatalf("docs/local-stack.md shows %d of the past error's commands, want start ws://, status, start wss://, status", len(third))
	}
	for i, s := range third {
		if i%2 == 0 {
			compareLines(t, "$ "+s.Cmd, forms(s.Out), forms(cli(strings.Fields(strings.ReplaceAll(s.Cmd, "127.0.0.1:8790", strings.SplitN(feedWS, "://", 2)[1]))[1:]...)))
			continue
		}
		wait := "third's error recorded"
		if i == 3 {
			wait = "third delivering on generation 2"
		}
		testwait.Eventually(t, 30*time.Second, wait, func() bool {
			g := sessionNow(api, "third")
			return g.LastError != "" && (i == 1 || g.Generation == 2 && g.LastSeq != nil)
		})
		compareLines(t, "$ "+s.Cmd, tableForm(s.Out), tableForm(cli("status", "third")))
	}

	// Ctrl-C.
	if err := st.stop(); err != nil {
		t.Fatalf("the stack's end: %v", err)
	}
	said = out.String()
	tail := said[strings.Index(said, "shutting down: "):]
	compareLines(t, "the Ctrl-C lines", strings.Split(docBlock(t, doc, "shutting down: "), "\n"), strings.Split(local(tail), "\n"))
}

// watchFrame runs wsfleet watch ids until it has drawn two frames, then
// interrupts it (Ctrl-C), which must end it with status 0, and returns the
// last frame's lines (the screen after its clear).
func watchFrame(t *testing.T, wsfleet, api string, ids ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := &syncbuf.Buffer{}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, wsfleet, append([]string{"--api", api, "watch"}, ids...)...)
	cmd.Stdout, cmd.Stderr = out, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 20*time.Second, "two frames of wsfleet watch", func() bool {
		return strings.Count(out.String(), " session(s)\n") >= 2
	})
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("wsfleet watch after Ctrl-C: %v\n%s", err, stderr.String())
	}
	frames := strings.Split(out.String(), "\x1b[H\x1b[2J")
	return strings.Split(strings.TrimSuffix(frames[len(frames)-1], "\n"), "\n")
}

// watchForm is a watch frame's form: its title and blank line with their
// numbers N, then its status table's (tableForm).
func watchForm(lines []string) []string {
	if len(lines) < 4 {
		return lines
	}
	return append(forms(lines[:2]), tableForm(lines[2:])...)
}

// sessionNow is GET api/sessions/id's answer, zero when there is none.
func sessionNow(api, id string) (s struct {
	Generation int64  `json:"generation"`
	LastSeq    *int64 `json:"last_seq"`
	LastError  string `json:"last_error"`
}) {
	resp, err := http.Get(api + "/sessions/" + id)
	if err != nil {
		return s
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(resp.Body).Decode(&s)
	return s
}

// forms is numbersOut of every line.
func forms(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = numbersOut(l)
	}
	return out
}

// compareLines fails t unless the doc's lines are the lines a run printed,
// naming the first that differs.
func compareLines(t *testing.T, what string, doc, printed []string) {
	t.Helper()
	for i := 0; i < max(len(doc), len(printed)); i++ {
		d, p := "(none)", "(none)"
		if i < len(doc) {
			d = doc[i]
		}
		if i < len(printed) {
			p = printed[i]
		}
		if d != p {
			t.Errorf("docs/local-stack.md does not show %s (values that change per run normalised): line %d\n  doc: %s\n  run: %s\nthe run printed:\n%s",
				what, i+1, d, p, strings.Join(printed, "\n"))
			return
		}
	}
}
