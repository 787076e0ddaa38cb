package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/wsfleet/wsfleet/testkit/docsnippet"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/testkit/enginetest"
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

// TestDocsWalkThrough runs docs/local-stack.md's walk-through on a stack
// started by this command's own run (make dev's code: its banner, its
// worker lines, its shutdown; free ports and a temporary folder instead of
// .dev) and the CLI of bin/ (`make devstack-bins`), and checks the doc shows
// what they print: the banner and the workers' up lines, the curl's answer
// (the curl's body is the banner's), wsfleet start, the status and workers
// tables, the sink lines, wsfleet stop and the Ctrl-C lines. Values that
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
	wsfleet := filepath.Join(root, "bin", "wsfleet")
	if _, err := os.Stat(wsfleet); err != nil {
		t.Fatalf("the CLI (make devstack-bins): %v", err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "local-stack.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	dir := t.TempDir()
	relDir := rel(root, dir)
	// the state folder as the doc names it
	local := func(s string) string { return strings.ReplaceAll(s, relDir, ".dev") }

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncbuf.Buffer
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, []string{"--dir", dir, "--dynamo-port", "0", "--sqs-port", "0", "--api-port", "0", "--feed-port", "0",
			"--admin-port-base", "0", "--checkpoint-every", "1s"}, &out)
	}()
	stopped := false
	defer func() {
		if !stopped {
			cancel()
			<-errc
		}
	}()
	const last = "Ctrl-C stops everything gracefully.\n"
	testwait.Eventually(t, time.Minute, "the banner", func() bool {
		select {
		case err := <-errc:
			stopped = true
			log, _ := os.ReadFile(filepath.Join(dir, "logs", "worker-1.log"))
			t.Fatalf("the stack ended: %v\n%s\nworker-1.log:\n%s", err, out.String(), log)
		default:
		}
		return strings.Contains(out.String(), last)
	})
	said := out.String()
	banner := said[strings.Index(said, "wsfleet local stack is up"):]
	banner = banner[:strings.Index(banner, last)+len(last)]
	api := regexp.MustCompile(`ingest API   (\S+)`).FindStringSubmatch(banner)[1]
	feedWS := regexp.MustCompile(`demo feed    (wss?://[^/]+)/feed/`).FindStringSubmatch(banner)[1]

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

	// Ctrl-C.
	cancel()
	stopped = true
	if err := <-errc; err != nil {
		t.Fatalf("the stack's end: %v", err)
	}
	said = out.String()
	tail := said[strings.Index(said, "shutting down: "):]
	compareLines(t, "the Ctrl-C lines", strings.Split(docBlock(t, doc, "shutting down: "), "\n"), strings.Split(local(tail), "\n"))
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
