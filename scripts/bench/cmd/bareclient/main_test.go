package main

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/tlsca"
)

func TestParse(t *testing.T) {
	o, err := parse([]string{"-n", "3", "-urls", "ws://127.0.0.1:1/f/{id},wss://127.0.0.2:1/f/{n}", "-prefix", "b-"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range []string{"ws://127.0.0.1:1/f/b-000000", "wss://127.0.0.2:1/f/1", "ws://127.0.0.1:1/f/b-000002"} {
		if got := o.URL(n); got != want {
			t.Errorf("URL(%d) = %s, want %s", n, got, want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "2"}, "need at least one URL pattern"},
		{[]string{"-n", "1", "-urls", "http://x/"}, "want ws:// or wss://"},
		{[]string{"-admin", "0.0.0.0:1"}, "loopback"},
		{[]string{"-n", "-1"}, "want ≥ 0"},
		{[]string{"-dials-in-flight", "-1"}, "want ≥ 0"},
		{[]string{"x"}, "unexpected arguments"},
	} {
		if _, err := parse(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
	if _, err := New(Options{CAFile: filepath.Join(t.TempDir(), "none.pem")}); err == nil {
		t.Error("a missing -ca file accepted")
	}
	empty := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(empty, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{CAFile: empty}); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a -ca file without a certificate: %v", err)
	}
}

// holds runs a client of n connections on urls until every one has read
// messages, and returns its stats.
func holds(t *testing.T, o Options) Stats {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	admin := httptest.NewServer(c.Handler())
	defer admin.Close()
	ctx, cancel := context.WithCancel(context.Background())
	c.Start(ctx)
	deadline := time.Now().Add(20 * time.Second)
	var st Stats
	for {
		resp, err := http.Get(admin.URL + "/stats")
		if err != nil {
			t.Fatal(err)
		}
		st = Stats{}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if st.Connections == o.N && st.Messages >= int64(3*o.N) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats after 20 s: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	done := make(chan struct{})
	go func() { c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("connections still open 10 s after the cancel")
	}
	return st
}

func TestReadsEveryConnectionOverWS(t *testing.T) {
	srv, err := feed.New(feed.Config{Rate: 50, PayloadBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	pattern := strings.Replace(srv.URL("X"), "X", "{id}", 1)
	st := holds(t, Options{N: 4, URLs: []string{pattern}, Prefix: "ws-", DialRate: 100, InFlight: 1, Redial: 10 * time.Millisecond})
	if st.Dialled != 4 || st.Goroutines < 4 || st.HeapInuse == 0 || st.StackInuse == 0 || st.DialErrors != 0 {
		t.Fatalf("%+v", st)
	}
	for i := range 4 {
		if got := srv.Session(fmt.Sprintf("ws-%06d", i)).Connections; got < 1 {
			t.Errorf("session %d: %d connections at the feed", i, got)
		}
	}
}

func TestVerifiesWSSAgainstTheCA(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlsca.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := feed.New(feed.Config{Rate: 50, TLS: ca.ServerTLS()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	pattern := strings.Replace(srv.URL("X"), "X", "{id}", 1)
	if !strings.HasPrefix(pattern, "wss://") {
		t.Fatalf("feed URL %s", pattern)
	}
	holds(t, Options{N: 2, URLs: []string{pattern}, Prefix: "wss-", CAFile: ca.CertFile, DialRate: 100, Redial: 10 * time.Millisecond})

	// Without the CA the handshake fails verification.
	c, err := New(Options{N: 1, URLs: []string{pattern}, Prefix: "nocas-", Redial: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.Start(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats().DialErrors == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	st := c.Stats()
	cancel()
	c.Wait()
	if st.DialErrors == 0 || st.Messages != 0 {
		t.Fatalf("without the CA: %+v", st)
	}
	var msgs []string
	for k := range st.Errors {
		msgs = append(msgs, k)
	}
	if !strings.Contains(strings.Join(msgs, " "), "certificate") {
		t.Errorf("errors without the CA: %q", msgs)
	}
}

// The bench diffs the worker's heap against this one's: /debug/pprof/heap
// serves the binary (gzipped protobuf) profile, after a collection with gc=1.
func TestServesTheBinaryHeapProfile(t *testing.T) {
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	admin := httptest.NewServer(c.Handler())
	defer admin.Close()
	resp, err := http.Get(admin.URL + "/debug/pprof/heap?gc=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	zr, err := gzip.NewReader(resp.Body)
	if resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("HTTP %d, %v", resp.StatusCode, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil || len(b) == 0 {
		t.Fatalf("%d B, %v", len(b), err)
	}
	if !strings.Contains(string(b), "inuse_space") {
		t.Error("no inuse_space sample type in the profile")
	}
}
