package streamer

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/netguard"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
	"github.com/wsfleet/wsfleet/shared/source"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/shared/spec/spectest"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// restartFailed is ingest's start of a FAILED session with the same
// configuration, written the way ingest writes it: generation + 1, and
// sessionitem.ClearFailed under the condition that the item is still FAILED.
func (e *env) restartFailed(id string) {
	e.t.Helper()
	it := e.item(id)
	if !it.Failed() {
		e.t.Fatalf("restart of %s: not FAILED: %+v", id, it)
	}
	in, err := sessionitem.Update(e.table, id,
		sessionitem.Unowned(sessionitem.ClearFailed(expression.Set(sessionitem.Generation, expression.Value(it.Generation+1))), id),
		sessionitem.DesiredState.Equal(expression.Value(schema.StateStarted)).
			And(sessionitem.Generation.Equal(expression.Value(it.Generation))).
			And(sessionitem.FailedAt(*it.FailedGeneration)))
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.db.UpdateItem(context.Background(), in); err != nil {
		e.t.Fatalf("restart of %s: %v", id, err)
	}
}

// failedWithin waits until id is FAILED with a last_error containing want.
func (e *env) failedWithin(id, want string, within time.Duration) lease.Item {
	e.t.Helper()
	var it lease.Item
	testwait.Eventually(e.t, within, id+" FAILED with "+want, func() bool {
		it = e.item(id)
		return it.Failed() && strings.Contains(it.LastError, want)
	})
	return it
}

// passes waits until every worker in ws ran n more reconcile passes.
func passes(t *testing.T, n int64, ws ...*testWorker) {
	t.Helper()
	want := make([]int64, len(ws))
	for i, w := range ws {
		want[i] = w.recon.Passes() + n
	}
	testwait.Eventually(t, time.Duration(n)*time.Second+2*slack, "more reconcile passes", func() bool {
		for i, w := range ws {
			if w.recon.Passes() < want[i] {
				return false
			}
		}
		return true
	})
}

// Sessions that can never connect (address refused by policy, handshake
// 401) end FAILED at the first attempt, leave their worker, are acquired by
// no worker across reconcile passes, and a new start brings them back.
func TestSessionsThatCannotConnectFail(t *testing.T) {
	e := newEnv(t)
	unauthorized := make(chan struct{}, 100) // one element per handshake
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		unauthorized <- struct{}{}
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(src.Close)

	// w1 refuses loopback addresses: the feed's session fails by policy.
	w1 := e.worker(func(c *Config) { c.AllowPrivateIPs = netguard.None })
	refused := e.session(nil)
	p := e.failedWithin(refused, "address refused by policy", slack)
	testwait.Eventually(t, slack, "w1 no longer owns the failed session", func() bool { return w1.Status().Owned == 0 })
	if p.Owner != "" || !p.Failed() {
		t.Fatalf("failed item: %+v", p)
	}
	testwait.Eventually(t, slack, "SessionsFailed counted", func() bool { return w1.Stats().SessionsFailed == 1 })
	w1.stop()

	// w2 may dial loopback; the source answers 401.
	w2 := e.worker(nil)
	denied := e.session(func(it *lease.Item) {
		spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.WSURL = strings.Replace(src.URL, "http://", "ws://", 1) + "/feed?token=secret" })
	})
	d := e.failedWithin(denied, "HTTP 401", slack)
	testwait.Eventually(t, slack, "w2 no longer owns the failed session", func() bool { return w2.Status().Owned == 0 })
	if strings.Contains(d.LastError, "secret") {
		t.Fatalf("last_error carries the URL query: %q", d.LastError)
	}

	// Neither session is taken again, by w2 (which could connect to the
	// first) or a new worker, across several reconcile passes.
	w3 := e.worker(nil)
	passes(t, 3, w2, w3)
	for _, id := range []string{refused, denied} {
		if it := e.item(id); !it.Failed() || it.Epoch != 1 {
			t.Fatalf("%s after reconcile passes: failed %v epoch %d", id, it.Failed(), it.Epoch)
		}
		if w := e.owner(id); w != nil {
			t.Fatalf("%s re-acquired by %s", id, w.ID())
		}
	}
	if n := e.sink.count(refused); n != 0 || len(e.feed.Records(refused)) != 0 || len(unauthorized) != 1 {
		t.Fatalf("after FAILED: %d deliveries, %d feed connections, %d handshakes with the 401 source", n, len(e.feed.Records(refused)), len(unauthorized))
	}

	// A new start clears FAILED: a worker that may dial loopback takes it.
	e.restartFailed(refused)
	testwait.Eventually(t, 2*slack, "messages after the restart", func() bool { return e.sink.count(refused) >= 5 })
	if it := e.item(refused); it.Failed() || it.Epoch != 2 || it.Generation != p.Generation+1 {
		t.Fatalf("after restart: failed %v epoch %d generation %d", it.Failed(), it.Epoch, it.Generation)
	}
}

// A start that changes the configuration while the worker dials the old one
// is never marked FAILED by the old configuration's error: the Fail names
// the generation it dialed, finds a newer one, and the worker releases the
// lease so that the new configuration is dialed.
func TestFailureOfAnOlderGenerationReleases(t *testing.T) {
	m := startMem(t, 0, nil, nil)
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusForbidden) }))
	t.Cleanup(src.Close)
	id := "regen"
	m.store.Put(lease.Item{ConnectionID: id, DesiredState: schema.StateStarted, Generation: 1, LastSeq: lease.NoSeq,
		Spec: spectest.Stored(t, spec.Spec{WSURL: strings.Replace(src.URL, "http://", "ws://", 1) + "/feed", Resume: &spec.Resume{QueryParam: "from"}})})
	restarted := make(chan struct{}, 1) // the start lands once, right before the first Fail
	m.store.SetFail(func(op string) (error, bool) {
		if op == "fail" {
			select {
			case restarted <- struct{}{}:
				m.store.Update(id, func(it *lease.Item) {
					it.Generation = 2
					spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.WSURL = m.feed.URL(id) })
				})
			default:
			}
		}
		return nil, false
	})
	testwait.Eventually(t, 2*slack, "messages from the new configuration", func() bool { return m.sink.count(id) >= 5 })
	it, err := m.store.Get(context.Background(), id)
	if err != nil || it.Failed() || it.FailedGeneration != nil || it.Generation != 2 || it.Epoch != 2 {
		t.Fatalf("item %+v (%v): want generation 2, never FAILED, taken again (epoch 2)", it, err)
	}
	if n := m.Stats().SessionsFailed; n != 0 || !strings.Contains(m.logs.String(), "lease released for the new one") {
		t.Fatalf("SessionsFailed %d; logs:\n%s", n, m.logs.String())
	}
}

// A real source (Debian's websocketd, realsource.sh's subscribe mode) that
// accepts every handshake and closes the connection on open messages it
// does not accept: the worker re-sends them WSFLEET_MAX_DIAL_FAILURES times
// in all, then the session is FAILED with a last_error that does not quote
// them, and leaves the worker.
func TestWebsocketdRefusingTheOpenMessagesFails(t *testing.T) {
	wsd := startWebsocketdScript(t, "realsource.sh")
	obs := newObserver(t, wsd.addr())
	st := memstore.New()
	id := "refused-open"
	cfg := source.Config{OpenMessages: []source.OpenMessage{{Text: textMsg(`{"op":"auth","key":"s3cret"}`)}}}
	st.Put(lease.Item{ConnectionID: id, DesiredState: schema.StateStarted, Generation: 1, LastSeq: lease.NoSeq,
		Spec: spectest.Stored(t, spec.Spec{WSURL: obs.url() + "?mode=subscribe", Config: cfg})})
	m := startMemOn(t, st, 0, func(c *Config) { c.MaxDialFailures = 3 }, nil)
	var it lease.Item
	testwait.Eventually(t, 10*time.Second, id+" FAILED", func() bool {
		var err error
		it, err = st.Get(context.Background(), id)
		return err == nil && it.Failed()
	})
	if n := len(obs.records()); n != 3 {
		t.Fatalf("%d connections to the source, want MaxDialFailures = 3", n)
	}
	if !strings.Contains(it.LastError, "connection ended before the first message") || strings.Contains(it.LastError, "s3cret") {
		t.Fatalf("last_error %q: want the failed connect, never the open message", it.LastError)
	}
	testwait.Eventually(t, slack, "the worker no longer owns the failed session", func() bool { return m.Status().Owned == 0 })
	if n := m.sink.count(id); n != 0 || m.Stats().SessionsFailed != 1 {
		t.Fatalf("%d deliveries, SessionsFailed %d", n, m.Stats().SessionsFailed)
	}
}

// The rollout rule (docs/worker.md, "Stored specs and rollouts"): a stored
// spec with a field this worker does not know fails its session before any
// dial (FAILED, its last_error naming the field, logged once with its
// connection_id), while a spec stored under an older, looser admission rule
// (follow_redirects above today's maximum) runs: the worker never admits a
// stored spec again.
func TestStoredSpecRolloutRule(t *testing.T) {
	m := startMem(t, 0, nil, nil)
	put := func(id, fields string) {
		u, _ := json.Marshal(m.feed.URL(id))
		m.store.Put(lease.Item{ConnectionID: id, DesiredState: schema.StateStarted, Generation: 1, LastSeq: lease.NoSeq,
			Spec: `{"ws_url":` + string(u) + `,"resume":{"query_param":"from"},` + fields + `}`})
	}
	put("older-rule", `"follow_redirects":9`)
	put("newer-field", `"`+spectest.NewerField+`":5000`)
	testwait.Eventually(t, 2*slack, "messages of the spec stored under the older rule", func() bool { return m.sink.count("older-rule") >= 5 })
	var failed lease.Item
	testwait.Eventually(t, 2*slack, "the session with the unknown field FAILED", func() bool {
		it, err := m.store.Get(context.Background(), "newer-field")
		failed = it
		return err == nil && it.Failed()
	})
	if !strings.Contains(failed.LastError, `"`+spectest.NewerField+`"`) || failed.Owner != "" {
		t.Fatalf("FAILED item: owner %q, last_error %q: want no owner and the field named", failed.Owner, failed.LastError)
	}
	if it, err := m.store.Get(context.Background(), "older-rule"); err != nil || it.Failed() {
		t.Fatalf("the session stored under the older rule: %+v (%v)", it, err)
	}
	if n := len(m.feed.Records("newer-field")); n != 0 {
		t.Fatalf("the feed got %d connections for the unknown field's session, want none", n)
	}
	var logged int
	for _, line := range strings.Split(m.logs.String(), "\n") {
		if strings.Contains(line, "does not know") && strings.Contains(line, `"connection_id":"newer-field"`) {
			logged++
		}
	}
	if logged != 1 {
		t.Fatalf("the unknown field logged %d times with its connection_id, want once; logs:\n%s", logged, m.logs.String())
	}
}
