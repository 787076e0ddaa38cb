package feed_test

// Planned reconnects (make-before-break): overlaps of one tenure, and
// connections that end on the source's schedule.

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

const tenureHeader = "X-Wsfleet-Tenure"

func tenure(v string) http.Header {
	if v == "" {
		return nil
	}
	return http.Header{tenureHeader: {v}}
}

func mustDialTenure(t *testing.T, url, ten string) *websocket.Conn {
	t.Helper()
	ws, _, err := dial(t, url, tenure(ten))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	return ws
}

// A second connection of the same tenure is a planned overlap in every
// mode: neither is kicked nor refused, both get the session's seqs, and it
// is no violation and no overlap. One of another tenure, or of none, is the
// violation it always was.
func TestSameTenureOverlapIsPlanned(t *testing.T) {
	for _, mode := range []feed.Mode{feed.ModeKickOlder, feed.ModeRefuseNewer, feed.ModeAllow} {
		t.Run(string(mode), func(t *testing.T) {
			srv, c := start(t, feed.Config{Mode: mode, TenureHeader: tenureHeader})
			a := mustDialTenure(t, c.URL("p"), "w1/3")
			last := read(t, a, 3)[2].Seq
			// The next connection resumes after a's last seq, as a worker's
			// switch does.
			b := mustDialTenure(t, c.URL("p")+"?from="+itoa(last+1), "w1/3")
			got := read(t, b, 20)
			for i, m := range got {
				if m.Seq != last+1+int64(i) {
					t.Fatalf("second connection's message %d: seq %d, want %d", i, m.Seq, last+1+int64(i))
				}
			}
			// The older one was not kicked: it still gets the same seqs.
			for i, m := range read(t, a, 20) {
				if m.Seq != last+1+int64(i) {
					t.Fatalf("first connection's message %d after the second opened: seq %d, want %d", i, m.Seq, last+1+int64(i))
				}
			}
			st := srv.Stats()
			s := st.Sessions["p"]
			if s.Violations != 0 || s.Kicks != 0 || s.Refused != 0 || s.PlannedOverlaps != 1 || s.MaxConcurrent != 2 || len(st.Overlaps) != 0 {
				t.Fatalf("stats %+v", st)
			}
			if len(st.PlannedOverlaps) != 1 || st.PlannedOverlaps[0].Tenure != "w1/3" || !st.PlannedOverlaps[0].End.IsZero() || st.PlannedOverlaps[0].Max != 2 {
				t.Fatalf("planned overlaps %+v", st.PlannedOverlaps)
			}
			// The switch: the older one closes; the planned overlap ends.
			a.Close(websocket.StatusNormalClosure, "")
			waitFor(t, "the planned overlap ends", func() bool {
				po := srv.Stats().PlannedOverlaps
				return len(po) == 1 && !po[0].End.IsZero()
			})
			b.Close(websocket.StatusNormalClosure, "")
			recs := waitEnded(t, srv, "p")
			if len(recs) != 2 || recs[0].Tenure != "w1/3" || recs[1].Tenure != "w1/3" || recs[0].Reason != feed.ReasonClient || recs[1].Reason != feed.ReasonClient {
				t.Fatalf("records %+v", recs)
			}
			if err := feed.NoOverlap(recs); err != nil {
				t.Fatalf("a planned overlap reported: %v", err)
			}
			// The tenure travels in the records over HTTP too.
			hr, err := c.Records(context.Background(), "p")
			if err != nil || len(hr) != 2 || hr[1].Tenure != "w1/3" {
				t.Fatalf("records over HTTP %+v, %v", hr, err)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Another tenure, or none, while a tenure's connection is open is a
// violation: kicked under kick-older, refused under refuse-newer.
func TestOtherTenureStillViolates(t *testing.T) {
	for _, tc := range []struct {
		mode   feed.Mode
		newer  string // the newer connection's tenure
		header string // the feed's TenureHeader
	}{
		{feed.ModeKickOlder, "w2/4", tenureHeader},
		{feed.ModeKickOlder, "", tenureHeader},
		{feed.ModeKickOlder, "w1/3", ""}, // tenures not read: the same value is no exception
		{feed.ModeRefuseNewer, "w2/4", tenureHeader},
		{feed.ModeRefuseNewer, "w1/4", tenureHeader}, // a new lease epoch is another tenure
	} {
		t.Run(string(tc.mode)+"/"+strings.ReplaceAll(cmp.Or(tc.newer, "none"), "/", "-")+"/"+cmp.Or(tc.header, "off"), func(t *testing.T) {
			srv, c := start(t, feed.Config{Mode: tc.mode, TenureHeader: tc.header})
			a := mustDialTenure(t, c.URL("v"), "w1/3")
			read(t, a, 2)
			b, resp, err := dial(t, c.URL("v")+"?from=1", tenure(tc.newer))
			if tc.mode == feed.ModeRefuseNewer {
				if err == nil || resp.StatusCode != http.StatusConflict {
					t.Fatalf("other tenure: %v, want HTTP 409", err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				defer b.CloseNow()
				read(t, b, 2)
				if err := readToEnd(t, a); websocket.CloseStatus(err) != feed.StatusKicked {
					t.Fatalf("older connection ended with %v, want kicked", err)
				}
				b.Close(websocket.StatusNormalClosure, "")
			}
			a.Close(websocket.StatusNormalClosure, "")
			recs := waitEnded(t, srv, "v")
			st := srv.Stats()
			s := st.Sessions["v"]
			if s.Violations != 1 || s.PlannedOverlaps != 0 || len(st.PlannedOverlaps) != 0 {
				t.Fatalf("stats %+v", st)
			}
			wantTenure := "w1/3"
			if tc.header == "" {
				wantTenure = ""
			}
			if recs[0].Tenure != wantTenure {
				t.Fatalf("record's tenure %q, want %q", recs[0].Tenure, wantTenure)
			}
			if tc.mode == feed.ModeKickOlder {
				if s.Kicks != 1 || recs[0].Reason != feed.ReasonKicked || len(st.Overlaps) != 1 {
					t.Fatalf("stats %+v, records %+v", st, recs)
				}
				if feed.NoOverlap(recs) == nil {
					t.Fatal("overlapping connections of different tenures not reported")
				}
			} else if s.Refused != 1 || recs[1].RefusedBy != string(feed.ModeRefuseNewer) || len(st.Overlaps) != 0 {
				t.Fatalf("stats %+v, records %+v", st, recs)
			}
		})
	}
}

// Under kick-older a third tenure kicks both connections of the planned
// overlap it interrupts.
func TestOtherTenureKicksAPlannedOverlap(t *testing.T) {
	srv, c := start(t, feed.Config{TenureHeader: tenureHeader})
	a := mustDialTenure(t, c.URL("k3"), "w1/3")
	read(t, a, 1)
	b := mustDialTenure(t, c.URL("k3"), "w1/3")
	read(t, b, 1)
	n := mustDialTenure(t, c.URL("k3"), "w2/4")
	read(t, n, 1)
	for _, ws := range []*websocket.Conn{a, b} {
		if err := readToEnd(t, ws); websocket.CloseStatus(err) != feed.StatusKicked {
			t.Fatalf("a planned-overlap connection ended with %v, want kicked", err)
		}
	}
	n.Close(websocket.StatusNormalClosure, "")
	recs := waitEnded(t, srv, "k3")
	st := srv.Stats()
	if s := st.Sessions["k3"]; s.Violations != 1 || s.Kicks != 2 || s.PlannedOverlaps != 1 || s.MaxConcurrent != 3 {
		t.Fatalf("stats %+v", s)
	}
	if len(st.Overlaps) != 1 || st.Overlaps[0].Max != 3 || st.Overlaps[0].End.IsZero() || len(st.PlannedOverlaps) != 1 || st.PlannedOverlaps[0].End.IsZero() {
		t.Fatalf("overlaps %+v, planned %+v", st.Overlaps, st.PlannedOverlaps)
	}
	if recs[0].Reason != feed.ReasonKicked || recs[1].Reason != feed.ReasonKicked {
		t.Fatalf("records %+v", recs)
	}
}

// scheduled is what a client read from a connection until its end.
type scheduled struct {
	seqs      []int64
	noticeIdx int // index in seqs before which the notice came; -1: none
	notices   int
	noticeMs  int64
	end       error
}

func readScheduled(t *testing.T, ws *websocket.Conn, within time.Duration) scheduled {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	out := scheduled{noticeIdx: -1}
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("connection still open after %s", within)
			}
			out.end = err
			return out
		}
		var m struct {
			Seq *int64 `json:"seq"`
			E   string `json:"e"`
			EMs int64  `json:"E"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("decode %q: %v", b, err)
		}
		switch {
		case m.E == feed.ShutdownEvent && m.Seq == nil:
			out.notices++
			out.noticeIdx, out.noticeMs = len(out.seqs), m.EMs
		case m.Seq != nil && m.E == "":
			out.seqs = append(out.seqs, *m.Seq)
		default:
			t.Fatalf("unexpected message %s", b)
		}
	}
}

// checkContiguous fails t unless seqs are contiguous and match rec.
func checkContiguous(t *testing.T, seqs []int64, rec feed.ConnRecord) {
	t.Helper()
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("seq %d after %d", seqs[i], seqs[i-1])
		}
	}
	if len(seqs) == 0 || seqs[0] != rec.FirstSeq || seqs[len(seqs)-1] != rec.LastSeq || rec.Sent != int64(len(seqs)) || rec.Sent != rec.LastSeq-rec.FirstSeq+1 {
		t.Fatalf("read %d seqs (%v..), record %+v", len(seqs), seqs[:min(len(seqs), 1)], rec)
	}
}

// A connection reaches its max age: the feed closes it with 1001, and not
// before that age.
func TestMaxConnAgeClosesWithGoingAway(t *testing.T) {
	const age = 700 * time.Millisecond
	srv, c := start(t, feed.Config{Rate: 100, MaxConnAge: age})
	ws := mustDial(t, c.URL("age"))
	got := readScheduled(t, ws, age+within)
	if websocket.CloseStatus(got.end) != websocket.StatusGoingAway {
		t.Fatalf("connection ended with %v, want 1001", got.end)
	}
	if got.notices != 0 {
		t.Fatalf("%d shutdown notices without ShutdownNotice", got.notices)
	}
	r := waitEnded(t, srv, "age")[0]
	if r.Reason != feed.ReasonMaxAge || !r.NoticeAt.IsZero() {
		t.Fatalf("record %+v", r)
	}
	if open := r.ClosedAt.Sub(r.OpenedAt); open < age || open > age+3*time.Second {
		t.Fatalf("closed after %s, want about %s", open, age)
	}
	checkContiguous(t, got.seqs, r)
}

// ShutdownNotice before the age the connection gets the notice, once; the
// stream goes on, without a gap, until the close at age.
func TestShutdownNoticeThenStreamUntilClose(t *testing.T) {
	const age, notice = 1500 * time.Millisecond, 800 * time.Millisecond
	srv, c := start(t, feed.Config{Rate: 100, MaxConnAge: age, ShutdownNotice: notice})
	ws := mustDial(t, c.URL("notice"))
	got := readScheduled(t, ws, age+within)
	if websocket.CloseStatus(got.end) != websocket.StatusGoingAway {
		t.Fatalf("connection ended with %v, want 1001", got.end)
	}
	r := waitEnded(t, srv, "notice")[0]
	if got.notices != 1 || got.noticeIdx < 1 || got.noticeIdx >= len(got.seqs) {
		t.Fatalf("%d notices before seq index %d of %d: want one, amid the stream", got.notices, got.noticeIdx, len(got.seqs))
	}
	t.Logf("%d seqs before the notice, %d between it and the close", got.noticeIdx, len(got.seqs)-got.noticeIdx)
	if r.Reason != feed.ReasonMaxAge || r.NoticeAt.IsZero() {
		t.Fatalf("record %+v", r)
	}
	if at := r.NoticeAt.Sub(r.OpenedAt); at < age-notice || !r.NoticeAt.Before(r.ClosedAt) || r.ClosedAt.Sub(r.OpenedAt) < age {
		t.Fatalf("notice %s and close %s after the open, want %s and %s", at, r.ClosedAt.Sub(r.OpenedAt), age-notice, age)
	}
	if d := got.noticeMs - r.NoticeAt.UnixMilli(); d < -1 || d > 1 {
		t.Fatalf("notice's E %d, record's notice %d", got.noticeMs, r.NoticeAt.UnixMilli())
	}
	checkContiguous(t, got.seqs, r)
	if st := srv.Session("notice"); st.Sent != r.Sent || st.Head != r.LastSeq {
		t.Fatalf("the notice counted as a stream message: stats %+v, record %+v", st, r)
	}
}

// The schedule switched over HTTP applies to the connections opened after
// the switch; one opened before keeps its own.
func TestSetScheduleOverHTTP(t *testing.T) {
	const age, notice = 800 * time.Millisecond, 300 * time.Millisecond
	srv, c := start(t, feed.Config{Rate: 50})
	ctx := context.Background()
	before := mustDial(t, c.URL("before"))
	read(t, before, 1)
	if err := c.SetSchedule(ctx, age, notice); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Stats(ctx); err != nil || st.MaxConnAgeMs != age.Milliseconds() || st.ShutdownNoticeMs != notice.Milliseconds() {
		t.Fatalf("stats %+v, %v", st, err)
	}
	on := mustDial(t, c.URL("on"))
	if err := c.SetSchedule(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	off := mustDial(t, c.URL("off"))
	read(t, off, 1)
	// The connection opened while the schedule was on gets it.
	got := readScheduled(t, on, age+within)
	if websocket.CloseStatus(got.end) != websocket.StatusGoingAway || got.notices != 1 {
		t.Fatalf("scheduled connection: %d notices, ended with %v", got.notices, got.end)
	}
	if r := waitEnded(t, srv, "on")[0]; r.Reason != feed.ReasonMaxAge || r.NoticeAt.IsZero() {
		t.Fatalf("record %+v", r)
	}
	// The others outlive that age.
	testwait.Holds(t, age, "connections opened without a schedule stay open", func() bool {
		return srv.Session("before").Open == 1 && srv.Session("off").Open == 1
	})
	if st, err := c.Stats(ctx); err != nil || st.MaxConnAgeMs != 0 || st.ShutdownNoticeMs != 0 {
		t.Fatalf("stats %+v, %v", st, err)
	}
	// Bad schedules are refused, over HTTP and as methods.
	for _, bad := range [][2]time.Duration{{time.Second, 2 * time.Second}, {time.Second, time.Second}, {0, time.Second}, {-time.Second, 0}} {
		if err := c.SetSchedule(ctx, bad[0], bad[1]); err == nil {
			t.Errorf("schedule %v accepted", bad)
		}
		if err := srv.SetSchedule(bad[0], bad[1]); err == nil {
			t.Errorf("schedule %v accepted by the method", bad)
		}
	}
	resp, err := http.Post(c.Base+"/control/schedule?max_age=soon", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("max_age=soon: %s", resp.Status)
	}
	// Empty parameters are off.
	resp, err = http.Post(c.Base+"/control/schedule", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("empty schedule: %s", resp.Status)
	}
	before.Close(websocket.StatusNormalClosure, "")
	off.Close(websocket.StatusNormalClosure, "")
	waitEnded(t, srv, "before")
	waitEnded(t, srv, "off")
}

// A make-before-break switch as the worker does it: the old connection gets
// the notice, the next one (same tenure) opens from the old one's next seq
// while the old one still delivers, and the old one ends at its age. No
// violation, one planned overlap, no seq missing from the two together.
func TestMakeBeforeBreakSwitch(t *testing.T) {
	const age, notice = 1500 * time.Millisecond, 700 * time.Millisecond
	srv, c := start(t, feed.Config{Rate: 100, Mode: feed.ModeKickOlder, TenureHeader: tenureHeader, MaxConnAge: age, ShutdownNotice: notice})
	old := mustDialTenure(t, c.URL("mbb"), "w1/7")
	ctx, cancel := context.WithTimeout(context.Background(), age+within)
	defer cancel()
	var last int64
	for {
		_, b, err := old.Read(ctx)
		if err != nil {
			t.Fatalf("no notice: %v", err)
		}
		if strings.Contains(string(b), feed.ShutdownEvent) {
			break
		}
		var m msg
		_ = json.Unmarshal(b, &m)
		last = m.Seq
	}
	// Switch off the schedule so the next connection stays.
	if err := srv.SetSchedule(0, 0); err != nil {
		t.Fatal(err)
	}
	next := mustDialTenure(t, c.URL("mbb")+"?from="+itoa(last+1), "w1/7")
	if m := read(t, next, 1)[0]; m.Seq != last+1 {
		t.Fatalf("next connection starts at %d, want %d", m.Seq, last+1)
	}
	if err := readToEnd(t, old); websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("old connection ended with %v, want 1001", err)
	}
	testwait.Eventually(t, within, "the old connection's record is final", func() bool {
		r := srv.Records("mbb")
		return len(r) == 2 && !r[0].EndedAt.IsZero()
	})
	next.Close(websocket.StatusNormalClosure, "")
	recs := waitEnded(t, srv, "mbb")
	st := srv.Stats()
	if s := st.Sessions["mbb"]; s.Violations != 0 || s.Kicks != 0 || s.PlannedOverlaps != 1 || len(st.Overlaps) != 0 || len(st.PlannedOverlaps) != 1 {
		t.Fatalf("stats %+v", st)
	}
	if recs[0].Reason != feed.ReasonMaxAge || recs[1].FirstSeq != last+1 || recs[1].FirstSeq > recs[0].LastSeq+1 {
		t.Fatalf("records %+v", recs)
	}
	if err := feed.NoOverlap(recs); err != nil {
		t.Fatal(err)
	}
}

func TestScheduleAndTenureConfigValidate(t *testing.T) {
	ok := feed.Config{MaxConnAge: time.Second, ShutdownNotice: 500 * time.Millisecond, TenureHeader: tenureHeader}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid schedule: %v", err)
	}
	for _, bad := range []feed.Config{
		{MaxConnAge: -time.Second},
		{MaxConnAge: time.Second, ShutdownNotice: -time.Second},
		{ShutdownNotice: time.Second},                          // notice without an age
		{MaxConnAge: time.Second, ShutdownNotice: time.Second}, // notice >= age
		{MaxConnAge: time.Second, ShutdownNotice: 2 * time.Second},
	} {
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "shutdown notice") && !strings.Contains(err.Error(), "max connection age") {
			t.Errorf("%+v: error %v", bad, err)
		}
		if _, err := feed.New(bad); err == nil {
			t.Errorf("New accepted %+v", bad)
		}
	}
}
