package streamer

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// countingStore is a memstore that reports request counts like dynamostore.
type countingStore struct{ *memstore.Store }

func (c countingStore) Stats() map[string]int64 { return map[string]int64{"heartbeat": 7} }

func (c countingStore) BilledUnits() any { return map[string]int64{"heartbeat_write_units": 7} }

func newStatsWorker(t *testing.T, pprofOn bool) *Worker {
	t.Helper()
	cfg := DefaultConfig()
	cfg.WorkerID = "w-stats"
	cfg.AdminAddr = "127.0.0.1:0"
	cfg.AdminPprof = pprofOn
	log := zerolog.Nop()
	w, err := New(cfg, Deps{Store: countingStore{memstore.New()}, Handler: sink.Discard, Logger: &log, Metrics: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestStatsTotalsSurviveMetricsFlush(t *testing.T) {
	w := newStatsWorker(t, false)
	w.counters.MessagesIn.Add(5)
	w.counters.DuplicatesDropped.Add(1)
	w.counters.SeqMissingDropped.Add(3)
	w.flushMetrics()
	w.counters.MessagesIn.Add(2)
	w.counters.SeqMissingDropped.Add(1)
	w.stats.heartbeat(3*time.Millisecond, nil)
	w.stats.heartbeat(time.Hour, nil)
	w.stats.heartbeat(0, errors.New("timeout"))
	st := w.Stats()
	if st.Messages["messages_in"] != 7 || st.Messages["duplicates_dropped"] != 1 || st.Messages["seq_missing_dropped"] != 4 {
		t.Fatalf("messages %v: want messages_in 7 (5 flushed + 2 pending), duplicates_dropped 1, seq_missing_dropped 4", st.Messages)
	}
	if st.HeartbeatsOK != 2 || st.HeartbeatErrors != 1 {
		t.Fatalf("heartbeats ok %d errors %d: want 2 and 1", st.HeartbeatsOK, st.HeartbeatErrors)
	}
	if len(st.HeartbeatLatency) != len(st.HeartbeatBucketsMs)+1 || st.HeartbeatLatency[2] != 1 || st.HeartbeatLatency[len(st.HeartbeatLatency)-1] != 1 {
		t.Fatalf("heartbeat histogram %v over %v: want 3 ms in the ≤5 ms bucket and 1 h in the last", st.HeartbeatLatency, st.HeartbeatBucketsMs)
	}
	if st.StoreRequests["heartbeat"] != 7 {
		t.Fatalf("store requests %v: want the store's own counts", st.StoreRequests)
	}
	if u, ok := st.StoreUnits.(map[string]int64); !ok || u["heartbeat_write_units"] != 7 {
		t.Fatalf("store units %v: want the store's own meter", st.StoreUnits)
	}
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp := adminDo(t, http.MethodGet, url)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func runStatsWorker(t *testing.T, w *Worker) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	testwait.Eventually(t, 5*time.Second, "admin server up", func() bool { return w.AdminAddr() != "" })
	return "http://" + w.AdminAddr()
}

func TestAdminStatsAndPprofGuard(t *testing.T) {
	t.Run("disabled", func(t *testing.T) {
		base := runStatsWorker(t, newStatsWorker(t, false))
		code, body := get(t, base+"/stats")
		var st Stats
		if code != http.StatusOK || json.Unmarshal(body, &st) != nil || st.WorkerID != "w-stats" {
			t.Fatalf("/stats: %d %s", code, body)
		}
		if code, _ := get(t, base+"/debug/pprof/"); code != http.StatusNotFound {
			t.Fatalf("/debug/pprof/ without %s: HTTP %d, want 404", schema.EnvAdminPprof, code)
		}
	})
	t.Run("enabled", func(t *testing.T) {
		w := newStatsWorker(t, true)
		base := runStatsWorker(t, w)
		if code, _ := get(t, base+"/debug/pprof/heap?debug=1"); code != http.StatusOK {
			t.Fatalf("/debug/pprof/heap from loopback: HTTP %d", code)
		}
		req := httptest.NewRequest(http.MethodGet, "/debug/pprof/heap", nil)
		req.RemoteAddr = "10.1.2.3:4567"
		req.Header.Set("Authorization", "Bearer "+testAdminToken)
		rec := httptest.NewRecorder()
		w.AdminHandler().ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden {
			t.Fatalf("/debug/pprof/heap from 10.1.2.3: HTTP %d, want 403", rec.Code)
		}
	})
}
