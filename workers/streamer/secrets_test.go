package streamer

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/logging"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/secretref"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/shared/spec/spectest"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// The library hook: a program embedding the worker supplies its own
// SecretProvider in Deps, here one that mints a new token per call. Every
// dial asks it (no cache of the worker's in between), so every reconnect
// carries a new token; none is logged or shown in /status.
func TestASecretProviderOfTheLibraryUsersIsAskedAtEveryDial(t *testing.T) {
	f := feed.StartForTest(t, feed.Config{Rate: feedRate, Mode: feed.ModeAllow})
	st := memstore.New()
	st.Put(lease.Item{ConnectionID: "minted", DesiredState: schema.StateStarted, Generation: 1, LastSeq: lease.NoSeq,
		Spec: spectest.Stored(t, spec.Spec{WSURL: f.URL("minted"), Resume: &spec.Resume{QueryParam: "from"},
			Headers: map[string]string{"Authorization": "Bearer {{secret:app/session-token}}"}})})
	var minted atomic.Int64
	var asked atomic.Value // the last name asked
	provider := SecretProviderFunc(func(_ context.Context, name string) (string, error) {
		asked.Store(name)
		return fmt.Sprintf("minted-%d", minted.Add(1)), nil
	})
	logs, rec := &syncBuffer{}, &recSink{by: map[string][]delivery{}}
	log := logging.New(logs, schema.ServiceStreamer, "debug")
	cfg := testConfig("mint-worker")
	cfg.ReconcileEvery = 200 * time.Millisecond
	src, err := url.Parse(f.URL("minted"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SecretHosts, err = secretref.ParseBindings("app/=" + src.Host); err != nil { // WSFLEET_SECRET_HOSTS
		t.Fatal(err)
	}
	w, err := New(cfg, Deps{Store: st, Handler: rec, Logger: &log, Metrics: &syncBuffer{}, Secrets: provider})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("logs:\n%s", logs.String())
		}
	})
	const conns = 3
	for i := 1; i <= conns; i++ {
		testwait.Eventually(t, 5*time.Second, fmt.Sprintf("connection %d streaming", i), func() bool {
			return len(f.Records("minted")) == i && rec.count("minted") > 3*i
		})
		if i < conns {
			f.Drop("minted", websocket.StatusServiceRestart)
		}
	}
	for i, r := range f.Records("minted") {
		if got, want := r.Header.Get("Authorization"), fmt.Sprintf("Bearer minted-%d", i+1); got != want {
			t.Errorf("connection %d: Authorization %q, want %q (a new token per dial)", i+1, got, want)
		}
	}
	if name, _ := asked.Load().(string); name != "app/session-token" || minted.Load() != conns {
		t.Errorf("provider asked %d times, last for %q: want %d, for app/session-token", minted.Load(), name, conns)
	}
	var status Status
	testwait.Eventually(t, 5*time.Second, "admin server", func() bool { return w.AdminAddr() != "" })
	getJSON(t, "http://"+w.AdminAddr()+"/status", &status)
	shown := fmt.Sprintf("%+v", status)
	for where, text := range map[string]string{"the log": logs.String(), "/status": shown} {
		if strings.Contains(text, "minted-") {
			t.Errorf("%s holds a minted token", where)
		}
	}
}
