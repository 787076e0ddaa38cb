package bench

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/tlsca"
	"github.com/wsfleet/wsfleet/workers/streamer/envconfig"
)

// The lease phases' stacks serve wss:// by default and ws:// with
// -plain-ws, and the workers the bench starts itself (not devstack's) can
// verify the feed's certificate: their environment, read as the worker
// binary reads it, names the stack's CA, and a client trusting that file
// completes a handshake with the feed's certificate. Without it every dial
// failed "x509: certificate signed by unknown authority" and
// TestRebalanceTwoJoinSixHundredPerWorker delivered nothing on wss. A
// stack for hot standbys (the failover phase's) also has its feed admit
// standby connections and its workers name their tenure to it.
func TestLeaseWorkersTrustTheFeedCA(t *testing.T) {
	t.Setenv(schema.EnvExtraCAFile, "/the/driver/own.pem") // never the worker's
	r := &runner{}
	if dc := r.leaseStackConfig(t.TempDir(), 1, false); dc.PlainWS || dc.Workers != 0 || slices.Contains(dc.FeedArgs, "-allow-standby") {
		t.Fatalf("lease stack: plain ws %v, %d devstack workers; want wss and none", dc.PlainWS, dc.Workers)
	}
	r.cfg.PlainWS = true
	if dc := r.leaseStackConfig(t.TempDir(), 1, false); !dc.PlainWS {
		t.Fatal("-plain-ws: the lease stack serves wss")
	}
	if dc := r.leaseStackConfig(t.TempDir(), 1, true); !slices.Contains(dc.FeedArgs, "-allow-standby") || dc.TenureHeader != devstack.TenureHeader {
		t.Fatalf("standby stack: feed args %q, tenure header %q", dc.FeedArgs, dc.TenureHeader)
	}

	ca, err := tlsca.LoadOrNew(t.TempDir()) // what bin/feed -tls-dir serves with
	if err != nil {
		t.Fatal(err)
	}
	feedSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	feedSrv.TLS = ca.ServerTLS()
	feedSrv.StartTLS()
	defer feedSrv.Close()

	st := &devstack.Stack{Dynamo: &enginetest.Process{Port: 1}, SQS: &enginetest.Process{Port: 2}, CA: ca, QueueURL: "http://127.0.0.1:2/q"}
	ls := &leaseStack{st: st}
	cfg, err := envconfig.FromEnv(ls.workerEnv("w1", "127.0.0.1:3", true, nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Worker.ExtraCAFile != ca.CertFile {
		t.Fatalf("wss: the worker's %s is %q, want the stack's CA %s", schema.EnvExtraCAFile, cfg.Worker.ExtraCAFile, ca.CertFile)
	}
	pool, err := tlsca.LoadPool(cfg.Worker.ExtraCAFile)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", strings.TrimPrefix(feedSrv.URL, "https://"), &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("a client trusting the worker's %s: %v", schema.EnvExtraCAFile, err)
	}
	_ = conn.Close()

	st.CA = nil // -plain-ws: no CA
	cfg, err = envconfig.FromEnv(ls.workerEnv("w1", "127.0.0.1:3", true, nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Worker.ExtraCAFile != "" {
		t.Fatalf("plain ws: the worker got %s=%s", schema.EnvExtraCAFile, cfg.Worker.ExtraCAFile)
	}

	if cfg.Worker.TenureHeader != "" {
		t.Fatalf("a stack without standbys: the worker names its tenure in %q", cfg.Worker.TenureHeader)
	}
	// The failover phase's stack admits standbys: its workers name their
	// tenure in the header the feed reads.
	ls.standby = true
	if cfg, err = envconfig.FromEnv(ls.workerEnv("w1", "127.0.0.1:3", true, nil)); err != nil {
		t.Fatal(err)
	}
	if cfg.Worker.TenureHeader != devstack.TenureHeader {
		t.Fatalf("standby stack: the worker's %s is %q, want %s", schema.EnvTenureHeader, cfg.Worker.TenureHeader, devstack.TenureHeader)
	}
}
