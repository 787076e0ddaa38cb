package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/wsfleet/wsfleet/scripts/bench/memseed"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/spec"
)

func TestSeed(t *testing.T) {
	st := memstore.New()
	ids, err := Seed{Sessions: 3, Prefix: "b-", URLs: []string{"ws://127.0.0.1:1/f/{id}", "ws://127.0.0.2:1/f/{n}"}, ResumeParam: "from"}.Put(st)
	if err != nil || len(ids) != 3 || ids[2] != "b-000002" {
		t.Fatalf("%v %v", ids, err)
	}
	want := []string{"ws://127.0.0.1:1/f/b-000000", "ws://127.0.0.2:1/f/1", "ws://127.0.0.1:1/f/b-000002"}
	for i, id := range ids {
		it, err := st.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		sp, err := spec.Decode(it.Spec)
		if err != nil || sp.WSURL != want[i] || it.DesiredState != schema.StateStarted || sp.ResumeParam() != "from" || it.LastSeq != lease.NoSeq {
			t.Fatalf("%s: %+v %+v %v", id, it, sp, err)
		}
	}
	if _, err := (Seed{Sessions: 1}).Put(st); err == nil {
		t.Fatal("sessions without URLs accepted")
	}
	if _, err := (Seed{Sessions: -1}).Put(st); err == nil {
		t.Fatal("a negative count accepted")
	}
}

func TestRunRefusesBadSettings(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		environ []string
		want    string
	}{
		{[]string{"-sessions", "2"}, nil, "need at least one URL pattern"},
		{nil, []string{schema.EnvSink + "=sqs", schema.EnvOutputQueueURL + "=https://q"}, "stdout or discard"},
		{nil, []string{"WSFLEET_MAX_SESION=3"}, "unknown variable WSFLEET_MAX_SESION (did you mean WSFLEET_MAX_SESSIONS?)"},
		{[]string{"extra"}, nil, "unexpected arguments"},
	} {
		err := run(context.Background(), tc.args, append(tc.environ, schema.EnvAdminAddr+"=127.0.0.1:0"), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q %q: %v, want %q", tc.args, tc.environ, err, tc.want)
		}
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stderr bytes.Buffer
	err := run(ctx, []string{"-sessions", "2", "-urls", "ws://127.0.0.1:1/feed/{id}"},
		[]string{schema.EnvAdminAddr + "=127.0.0.1:0", schema.EnvSink + "=discard"}, io.Discard, &stderr)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{`"sessions":2`, "worker stopped"} {
		if !strings.Contains(stderr.String(), want) {
			t.Fatalf("logs lack %q:\n%s", want, stderr.String())
		}
	}
	// The bench reads the seeded table's size from this log.
	log := filepath.Join(t.TempDir(), "worker.log")
	if err := os.WriteFile(log, stderr.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, found, err := memseed.StoreBytes(log); err != nil || !found {
		t.Fatalf("the bench finds no table size (%v, %v) in:\n%s", found, err, stderr.String())
	}
}

func TestMeasuredPutCountsTheTable(t *testing.T) {
	const n = 5000
	st := memstore.New()
	b, err := Seed{Sessions: n, URLs: []string{"ws://127.0.0.1:1/f/{id}"}, ResumeParam: "from"}.measuredPut(st)
	if err != nil {
		t.Fatal(err)
	}
	// Each item holds at least its id and its stored spec (over 50 B of
	// JSON with the URL), and the table is not the whole heap.
	if lo, hi := int64(n*64), int64(n*8<<10); b < lo || b > hi {
		t.Fatalf("table of %d sessions: %d B, want %d..%d", n, b, lo, hi)
	}
	runtime.KeepAlive(st)
}
