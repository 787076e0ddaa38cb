package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/testkit/docsnippet"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// standbyHeading starts docs/local-stack.md's hot standby walk-through.
const standbyHeading = "\n## Hot standby"

var (
	workerID   = regexp.MustCompile(`worker-[0-9]+-run[0-9]+(\.r[0-9]+)?`)
	upAdmin    = regexp.MustCompile(`(?m)^[0-9:]{8} (worker-([0-9]+)-run1) up \(pid ([0-9]+), admin ([0-9.:]+)\)$`)
	docKill    = regexp.MustCompile(`kill -9 [0-9]+`)
	docSlotLog = regexp.MustCompile(`worker-([0-9]+)\.(sink\.jsonl|log)`)
	docAdmin   = regexp.MustCompile(`http://127\.0\.0\.1:88([0-9]{2})/`)
)

// standbySlot is a worker slot of the walk-through's run: its up line's
// worker id, pid and admin address.
type standbySlot struct {
	id, pid, admin string
	slot           int
}

// TestDocsHotStandby runs docs/local-stack.md's hot standby walk-through
// (the "$ " commands of the section's block) through bash on a stack
// started by this command's run, as a user runs them in the folder whose
// .dev is the stack's (bin/ the repository's, WSFLEET_API the stack's
// ingest API, the doc's ports the stack's), and checks the doc shows what
// they print: the start with --standby, the status naming the owner and
// the standby's worker, kill -9 of the owner's pid, the status naming the
// standby's worker as the owner at epoch 2 (and a new standby), the old
// owner's last sink lines and the new owner's first, the new owner's
// "lease acquired" log line with "standby":true and its /stats standby
// counters. The doc names its run's owner and standby by their slots and
// pid; the test runs each command on this run's (the owner's pid, its
// sink file, the standby's sink, log and admin port). Values that change
// per run are normalised on both sides: every number, every worker id
// (an incarnation's .rN too), JSON values, column widths. It waits with
// deadlines for what each command shows: the standby holding a window
// before the first status, the promotion and a replacement standby before
// the second, three lines in the new owner's sink, the log line. Then it
// checks the behaviour the doc claims, whatever it shows: the feed's seqs
// delivered across the crash have no hole (repeats allowed), the new
// owner delivered under epoch 2 on the standby's connection (the feed
// saw no owner connection of the new owner's: it never dialled), and
// the new owner counts one promotion. About 25 s.
func TestDocsHotStandby(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the stack")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatalf("the doc's commands are curls: %v", err)
	}
	root := enginetest.InstalledRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "docs", "local-stack.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, standbyHeading)
	if i < 0 {
		t.Fatalf("docs/local-stack.md has no %q section", strings.TrimSpace(standbyHeading))
	}
	section := doc[i+1:]
	if j := strings.Index(section, "\n## "); j >= 0 {
		section = section[:j]
	}
	secs := docsnippet.Sections(section)
	cmds := make([]string, len(secs))
	for k, s := range secs {
		cmds[k] = s.Cmd
	}
	if len(secs) < 7 || !strings.Contains(secs[0].Cmd, "--standby") || !strings.HasPrefix(secs[2].Cmd, "kill -9 ") {
		t.Fatalf("the hot standby block shows %q, want start --standby, status, kill -9, status, the sinks, the log, /stats", cmds)
	}
	docOwner, docStandby := docStatusSlots(t, secs[1].Out)

	home := t.TempDir()
	if err := os.Symlink(filepath.Join(root, "bin"), filepath.Join(home, "bin")); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(home, ".dev")
	st := startDocStack(t, dir)
	defer func() {
		if err := st.stop(); err != nil {
			t.Errorf("the stack's end: %v", err)
		}
	}()
	slots := map[string]standbySlot{}
	for _, m := range upAdmin.FindAllStringSubmatch(st.out.String(), -1) {
		n, _ := strconv.Atoi(m[2])
		slots[m[1]] = standbySlot{id: m[1], slot: n, pid: m[3], admin: m[4]}
	}
	token, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	stats := func(admin string) (s struct {
		Standbys           int   `json:"standbys"`
		StandbyWindowBytes int64 `json:"standby_window_bytes"`
		StandbyPromotions  int64 `json:"standby_promotions"`
	}) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/stats", nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		resp, err := standbyHTTP.Do(req)
		if err != nil {
			return s
		}
		defer resp.Body.Close()
		_ = json.NewDecoder(resp.Body).Decode(&s)
		return s
	}

	var owner, standby standbySlot // this run's
	killed := false
	// aimed is the doc's command c aimed at this run's owner and standby.
	aimed := func(c string) string {
		c = st.local(docKill.ReplaceAllString(c, "kill -9 "+owner.pid))
		c = docSlotLog.ReplaceAllStringFunc(c, func(s string) string {
			m := docSlotLog.FindStringSubmatch(s)
			return fmt.Sprintf("worker-%d.%s", mapSlot(t, m[1], docOwner, docStandby, owner, standby).slot, m[2])
		})
		c = docAdmin.ReplaceAllStringFunc(c, func(s string) string {
			return "http://" + mapSlot(t, strings.TrimLeft(docAdmin.FindStringSubmatch(s)[1], "0"), docOwner, docStandby, owner, standby).admin + "/"
		})
		return c
	}
	run := func(c string) string {
		t.Helper()
		return shDoc(t, home, []string{"WSFLEET_API=" + st.api}, aimed(c), false)
	}
	// asShown is a command aimed at this run as make dev's ports name it
	// (for pasting its run into the doc).
	asShown := func(c string) string {
		c = strings.ReplaceAll(aimed(c), strings.SplitN(st.feedWS, "://", 2)[1], "127.0.0.1:8790")
		for _, s := range []standbySlot{owner, standby} {
			if s.admin != "" {
				c = strings.ReplaceAll(c, s.admin, fmt.Sprintf("127.0.0.1:%d", devstack.DefaultAdminBase+s.slot))
			}
		}
		return c
	}
	var transcript []string
	for k, s := range secs {
		c := s.Cmd
		switch {
		case k == 1: // the standby holds a window of the live stream
			testwait.Eventually(t, 45*time.Second, "live owned, checkpointed, and its standby holding a window", func() bool {
				g := standbyNow(st.api, "live")
				if g.Owner == "" || g.LastSeq == nil || g.Holder == nil {
					return false
				}
				owner, standby = slots[g.Owner], slots[g.Holder.WorkerID]
				return owner.id != "" && standby.id != "" && stats(standby.admin).StandbyWindowBytes > 0
			})
		case killed && strings.HasPrefix(c, "bin/wsfleet status"): // promoted, and a standby again
			testwait.Eventually(t, 45*time.Second, "live owned by its standby's worker at epoch 2, with a new standby", func() bool {
				g := standbyNow(st.api, "live")
				return g.Owner == standby.id && g.Epoch == 2 && g.Holder != nil && g.Holder.WorkerID != standby.id
			})
		}
		var out string
		switch {
		case strings.Contains(c, "| head -n "), strings.Contains(c, `"standby":true`):
			n := len(s.Out)
			testwait.Eventually(t, 20*time.Second, fmt.Sprintf("$ %s printing %d line(s)", c, n), func() bool {
				out = run(c)
				return out != "" && len(strings.Split(out, "\n")) == n
			})
		default:
			out = run(c)
		}
		if strings.HasPrefix(c, "kill -9 ") {
			killed = true
		}
		printed := []string{}
		if out != "" {
			printed = strings.Split(out, "\n")
		}
		transcript = append(transcript, "$ "+asShown(c), out)
		if strings.HasPrefix(c, "bin/wsfleet status") {
			compareLines(t, "$ "+c, statusForm(s.Out), statusForm(printed))
		} else {
			compareLines(t, "$ "+c, lineForms(s.Out), lineForms(printed))
		}
	}
	t.Logf("the run (owner %s, standby %s):\n%s", owner.id, standby.id, strings.Join(transcript, "\n"))

	// No hole in the feed's seqs across the crash; the new owner at epoch 2.
	var lastOld, firstNew int64 = -1, -1
	seen := map[int64]bool{}
	for _, id := range []string{owner.id, standby.id} {
		b, err := os.ReadFile(filepath.Join(dir, "logs", fmt.Sprintf("worker-%d.sink.jsonl", slots[id].slot)))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range sinkLine.FindAllString(string(b), -1) {
			var r struct {
				ConnectionID string `json:"connection_id"`
				LeaseEpoch   int64  `json:"lease_epoch"`
				WorkerID     string `json:"worker_id"`
				Data         struct {
					Seq int64 `json:"seq"`
				} `json:"data"`
			}
			if err := json.Unmarshal([]byte(l), &r); err != nil || r.ConnectionID != "live" {
				continue
			}
			seen[r.Data.Seq] = true
			switch {
			case r.WorkerID == owner.id && r.LeaseEpoch == 1:
				lastOld = max(lastOld, r.Data.Seq)
			case r.WorkerID == standby.id && r.LeaseEpoch == 2:
				if firstNew < 0 {
					firstNew = r.Data.Seq
				}
			default:
				t.Errorf("live delivered by %s at epoch %d: want %s at 1, then %s at 2", r.WorkerID, r.LeaseEpoch, owner.id, standby.id)
			}
		}
	}
	if lastOld < 0 || firstNew < 0 || firstNew > lastOld+1 {
		t.Errorf("across the crash: the old owner's last seq %d, the new owner's first %d: want both, with no hole", lastOld, firstNew)
	}
	var all []int64
	for s := range seen {
		all = append(all, s)
	}
	slices.Sort(all)
	if len(all) == 0 || all[len(all)-1]-all[0]+1 != int64(len(all)) {
		t.Errorf("live's delivered seqs have a hole: %d seqs from %d to %d", len(all), all[0], all[len(all)-1])
	}

	// No dial: the new owner opened no owner connection at the feed; it
	// delivers on its standby's, still open.
	fc := feed.NewClient(strings.Replace(st.feedWS, "ws", "http", 1))
	if err := fc.TrustCA(filepath.Join(dir, "tls", "ca.pem")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	recs, err := fc.Records(ctx, "live")
	if err != nil {
		t.Fatal(err)
	}
	dials, promoted := 0, false
	for _, r := range recs {
		switch {
		case !r.Standby && strings.HasPrefix(r.Tenure, standby.id+"/"):
			dials++
		case r.Standby && strings.HasPrefix(r.Tenure, standby.id+feed.StandbyTenurePart) && r.Open() && r.Sent > 0:
			promoted = true
		}
	}
	if dials != 0 || !promoted {
		t.Errorf("the feed's records of live: %d owner connection(s) of %s, its standby's still open: %v; want 0 and true (no dial on the takeover)\n%+v", dials, standby.id, promoted, recs)
	}
	if p := stats(standby.admin).StandbyPromotions; p != 1 {
		t.Errorf("%s counts %d standby promotions, want 1", standby.id, p)
	}
}

// docStatusSlots are the slots of the owner and the standby's worker in
// the doc's status of live (its OWNER cell, its "standby live:" line).
func docStatusSlots(t *testing.T, out []string) (owner, standby string) {
	t.Helper()
	slot := regexp.MustCompile(`^worker-([0-9]+)-run`)
	for _, l := range out {
		f := strings.Fields(l)
		switch {
		case len(f) > 2 && f[0] == "live":
			if m := slot.FindStringSubmatch(f[2]); m != nil {
				owner = m[1]
			}
		case len(f) > 2 && f[0] == "standby" && f[1] == "live:":
			if m := slot.FindStringSubmatch(f[2]); m != nil {
				standby = m[1]
			}
		}
	}
	if owner == "" || standby == "" || owner == standby {
		t.Fatalf("docs/local-stack.md's status of live names no owner and standby worker:\n%s", strings.Join(out, "\n"))
	}
	return owner, standby
}

// mapSlot is this run's slot for the doc's slot n: the owner's or the
// standby's.
func mapSlot(t *testing.T, n, docOwner, docStandby string, owner, standby standbySlot) standbySlot {
	t.Helper()
	switch n {
	case docOwner:
		return owner
	case docStandby:
		return standby
	}
	t.Fatalf("the hot standby block names slot %s, neither the owner's (%s) nor the standby's (%s)", n, docOwner, docStandby)
	return standbySlot{}
}

// standbyNow is GET api/sessions/id's owner, epoch, checkpoint and standby
// holder; zero when there is none.
func standbyNow(api, id string) (s struct {
	Owner   string `json:"lease_owner"`
	Epoch   int64  `json:"lease_epoch"`
	LastSeq *int64 `json:"last_seq"`
	Holder  *struct {
		WorkerID string `json:"worker_id"`
	} `json:"standby_holder"`
}) {
	resp, err := standbyHTTP.Get(api + "/sessions/" + id)
	if err != nil {
		return s
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(resp.Body).Decode(&s)
	return s
}

// standbyHTTP is the walk-through's client of the API and the workers'
// admin endpoints: every request within 2 s.
var standbyHTTP = &http.Client{Timeout: 2 * time.Second}

// statusForm is a wsfleet status output's form: its table and summary
// (tableForm), each "standby ID: …" line with its numbers N; every
// worker id (an incarnation's .rN too) worker-N-runN first, so that the
// standby a run places (on a restarted incarnation or not) reads alike.
func statusForm(lines []string) []string {
	var table, sb []string
	for _, l := range lines {
		l = workerID.ReplaceAllString(l, "worker-N-runN")
		if strings.HasPrefix(l, standbyLinePrefixCLI) {
			sb = append(sb, numbersOut(l))
			continue
		}
		table = append(table, l)
	}
	if len(table) < 2 {
		return append(table, sb...)
	}
	return append(tableForm(table), sb...)
}

// standbyLinePrefixCLI starts the status line wsfleet adds for a session's
// hot standby (cmd/wsfleet's standbyLinePrefix).
const standbyLinePrefixCLI = "standby "

// lineForms are lines' forms: a JSON line's keys (jsonForm), any other
// line with its numbers N, worker ids worker-N-runN first.
func lineForms(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		if strings.HasPrefix(l, "{") {
			out[i] = jsonForm(l)
			continue
		}
		out[i] = numbersOut(workerID.ReplaceAllString(l, "worker-N-runN"))
	}
	return out
}
