package streamer

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/shared/spec/spectest"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/testkit/tlsca"
)

// A wss:// source whose certificate comes from a private CA: a worker
// trusting that CA (WSFLEET_EXTRA_CA_FILE) streams it, and reconnects to it
// after a drop (resuming its TLS session); a worker trusting only the system's roots refuses the
// handshake, and says why in last_error (verification is never skipped).
func TestWssSourceVerifiedAgainstTheExtraCA(t *testing.T) {
	e := newEnv(t)
	ca, err := tlsca.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var handshakes, resumed atomic.Int64
	srvTLS := ca.ServerTLS()
	srvTLS.VerifyConnection = func(cs tls.ConnectionState) error {
		handshakes.Add(1)
		if cs.DidResume {
			resumed.Add(1)
		}
		return nil
	}
	f := feed.StartForTest(t, feed.Config{Rate: feedRate, Mode: feed.ModeAllow, TLS: srvTLS})
	trusting := e.worker(func(c *Config) { c.ExtraCAFile = ca.CertFile })
	id := e.session(func(it *lease.Item) {
		spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.WSURL = f.URL(it.ConnectionID) })
	})
	if !strings.HasPrefix(f.URL(id), "wss://") {
		t.Fatalf("feed URL %s", f.URL(id))
	}
	e.notify(schema.NotifyStart, id)
	testwait.Eventually(t, 10*time.Second, "messages over wss", func() bool { return e.sink.count(id) >= 10 })
	if n := f.Drop(id, 0); n != 1 {
		t.Fatalf("dropped %d connections", n)
	}
	before := e.sink.count(id)
	testwait.Eventually(t, 10*time.Second, "messages after the reconnect", func() bool { return e.sink.count(id) > before+10 })
	contiguous(t, e.sink.get(id))
	// The reconnect resumed the TLS session of the first connection.
	if h, r := handshakes.Load(), resumed.Load(); h != 2 || r != 1 {
		t.Fatalf("%d handshakes, %d resumed: want the reconnect's resumed", h, r)
	}
	trusting.stop()

	// A worker without the CA: the handshake fails verification.
	e.worker(nil)
	testwait.Eventually(t, 15*time.Second, "the refusal recorded", func() bool {
		return strings.Contains(e.item(id).LastError, "certificate")
	})
	t.Logf("last_error: %s", e.item(id).LastError)
}

func TestExtraCAFileMustHoldACertificate(t *testing.T) {
	cfg := testConfig("w-ca")
	cfg.ExtraCAFile = filepath.Join(t.TempDir(), "none.pem")
	if _, err := sourceTLS(cfg); err == nil || !strings.Contains(err.Error(), "extra CA file") {
		t.Fatalf("a missing file: %v", err)
	}
	if err := os.WriteFile(cfg.ExtraCAFile, []byte("no certificate here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sourceTLS(cfg); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("a file without a certificate: %v", err)
	}
}

// TLS session resumption is on by default and WSFLEET_TLS_RESUMPTION=false
// (NoTLSResumption) turns it off; verification stays on either way.
func TestTLSResumptionSetting(t *testing.T) {
	cfg := testConfig("w-tls")
	conf, err := sourceTLS(cfg)
	if err != nil || conf.ClientSessionCache == nil || conf.InsecureSkipVerify {
		t.Fatalf("default: %+v, %v", conf, err)
	}
	cfg.NoTLSResumption = true
	if conf, err = sourceTLS(cfg); err != nil || conf.ClientSessionCache != nil || conf.InsecureSkipVerify {
		t.Fatalf("NoTLSResumption: %+v, %v", conf, err)
	}
}
