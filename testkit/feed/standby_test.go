package feed_test

// Hot standby connections: admitted beside the owner's with AllowStandby,
// like any other connection without it.

import (
	"context"
	"net/http"
	"testing"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/testkit/feed"
)

func TestIsStandbyTenure(t *testing.T) {
	for tenure, want := range map[string]bool{
		"w2/standby/3": true, "worker-1-run1/standby/0": true, "a/b/standby/12": true,
		"w2/3": false, "": false, "/standby/3": false, "w2/standby/": false, "w2/standby/-1": false,
		"w2/standby/x": false, "w2/standby/03": false, "w2/standby/3/4": false,
	} {
		if got := feed.IsStandbyTenure(tenure); got != want {
			t.Errorf("IsStandbyTenure(%q) = %v, want %v", tenure, got, want)
		}
	}
}

// With AllowStandby, under kick-older and refuse-newer alike, a standby
// opened beside the owner is neither refused nor kicks it, a new owner
// connection does not kick the standby (it is the new owner that violates,
// against the old owner only), and the standby is counted apart: no
// violation, no overlap of owners, a standby overlap.
func TestStandbyBesideTheOwnerWhenAllowed(t *testing.T) {
	for _, mode := range []feed.Mode{feed.ModeKickOlder, feed.ModeRefuseNewer} {
		t.Run(string(mode), func(t *testing.T) {
			srv, c := start(t, feed.Config{Mode: mode, TenureHeader: tenureHeader, AllowStandby: true})
			owner := mustDialTenure(t, c.URL("h"), "w1/3")
			read(t, owner, 2)
			sb := mustDialTenure(t, c.URL("h"), "w2/standby/1")
			got := read(t, sb, 5)
			// The owner still streams: the standby kicked nobody.
			last := read(t, owner, 5)[4].Seq
			if got[4].Seq > last+50 || last > got[4].Seq+50 {
				t.Fatalf("standby at seq %d, owner at %d: not the same live stream", got[4].Seq, last)
			}
			st := srv.Stats()
			s := st.Sessions["h"]
			if s.Violations != 0 || s.Kicks != 0 || s.Refused != 0 || s.StandbyConns != 1 || s.MaxStandby != 1 || s.MaxConcurrent != 1 ||
				len(st.Overlaps) != 0 || len(st.StandbyOverlaps) != 1 || !st.StandbyOverlaps[0].End.IsZero() || !st.AllowStandby {
				t.Fatalf("stats %+v", st)
			}
			// A second owner is still two owners: kicked or refused as
			// always, and the standby stays.
			second, resp, err := dial(t, c.URL("h"), tenure("w3/4"))
			if err == nil {
				defer second.CloseNow()
			}
			if mode == feed.ModeRefuseNewer {
				if err == nil || resp.StatusCode != http.StatusConflict {
					t.Fatalf("a second owner beside owner and standby: %v, want HTTP 409", err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if err := readToEnd(t, owner); websocket.CloseStatus(err) != feed.StatusKicked {
					t.Fatalf("the first owner ended with %v, want kicked", err)
				}
			}
			read(t, sb, 2)
			s = srv.Session("h")
			if s.Violations != 1 {
				t.Fatalf("two owners counted %d violations, want 1: %+v", s.Violations, s)
			}
			sb.Close(websocket.StatusNormalClosure, "")
			owner.CloseNow()
			waitFor(t, "the connections of h end", func() bool { return srv.Session("h").Open <= 1 })
			recs := srv.Records("h")
			if !recs[1].Standby || recs[0].Standby || recs[1].Tenure != "w2/standby/1" {
				t.Fatalf("records %+v", recs)
			}
			if err := feed.NoOverlap(recs[:2]); err != nil {
				t.Fatalf("owner and standby reported as an overlap: %v", err)
			}
		})
	}
}

// Without AllowStandby (the default) a standby connection is like any
// other: under kick-older it kicks the owner, under refuse-newer it is
// refused, a violation either way. The control switches it at run time.
func TestStandbyIsAnyConnectionWhenNotAllowed(t *testing.T) {
	for _, mode := range []feed.Mode{feed.ModeKickOlder, feed.ModeRefuseNewer} {
		t.Run(string(mode), func(t *testing.T) {
			srv, c := start(t, feed.Config{Mode: mode, TenureHeader: tenureHeader})
			owner := mustDialTenure(t, c.URL("n"), "w1/3")
			read(t, owner, 2)
			sb, resp, err := dial(t, c.URL("n"), tenure("w2/standby/1"))
			if mode == feed.ModeRefuseNewer {
				if err == nil || resp.StatusCode != http.StatusConflict {
					t.Fatalf("standby not allowed: %v, want HTTP 409", err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				defer sb.CloseNow()
				if err := readToEnd(t, owner); websocket.CloseStatus(err) != feed.StatusKicked {
					t.Fatalf("the owner ended with %v, want kicked by the standby", err)
				}
			}
			s := srv.Session("n")
			if s.Violations != 1 || s.StandbyConns != 0 {
				t.Fatalf("stats %+v", s)
			}
			// Switched on over HTTP: the next standby is admitted.
			if err := c.SetAllowStandby(context.Background(), true); err != nil {
				t.Fatal(err)
			}
			if mode == feed.ModeKickOlder {
				sb.Close(websocket.StatusNormalClosure, "")
				owner = mustDialTenure(t, c.URL("n"), "w1/5")
				read(t, owner, 1)
			}
			sb2 := mustDialTenure(t, c.URL("n"), "w2/standby/2")
			read(t, sb2, 2)
			read(t, owner, 2)
			st := srv.Stats()
			if s := st.Sessions["n"]; s.StandbyConns != 1 || !st.AllowStandby || s.Violations != 1 {
				t.Fatalf("after the switch: %+v", st)
			}
			if err := c.SetAllowStandby(context.Background(), false); err != nil {
				t.Fatal(err)
			}
			if srv.Stats().AllowStandby {
				t.Fatal("standby still allowed after the switch off")
			}
		})
	}
}

// Allowing standbys needs the tenure header, at the start and at run time.
func TestAllowStandbyNeedsTheTenureHeader(t *testing.T) {
	if err := (feed.Config{AllowStandby: true}).Validate(); err == nil {
		t.Fatal("AllowStandby without a tenure header validated")
	}
	_, c := start(t, feed.Config{})
	if err := c.SetAllowStandby(context.Background(), true); err == nil {
		t.Fatal("the standby control accepted allow=true on a feed without a tenure header")
	}
}
