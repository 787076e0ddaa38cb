package streamer

import (
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
)

// StoreStatser is implemented by stores that count their requests by kind
// (dynamostore.Store.Stats): /stats reports them for the cost benchmark.
type StoreStatser interface {
	Stats() map[string]int64
}

// StoreMeter is implemented by stores that count what their requests are
// billed (dynamostore.Store.BilledUnits: write, index write and read units
// by request kind): /stats reports it as store_units for the cost
// benchmark.
type StoreMeter interface {
	BilledUnits() any
}

// heartbeatBucketsMs are the upper bounds of the heartbeat latency histogram in
// /stats (the last bucket is everything slower).
var heartbeatBucketsMs = [...]int64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000}

// runStats are cumulative counts since the worker started, read by /stats.
// The per-message counters (session.Counters) are swapped to zero by every
// metrics flush; totals keeps what each flush took.
type runStats struct {
	mu     sync.Mutex
	totals map[string]int64

	heartbeatsOK    atomic.Int64
	heartbeatErrors atomic.Int64
	leaseLost       atomic.Int64
	failed          atomic.Int64
	// Hot standby: claims that adopted a standby (the takeovers with no
	// dial) and standbys the source refused.
	promotions     atomic.Int64
	standbyRefused atomic.Int64
	heartbeatHist  [len(heartbeatBucketsMs) + 1]atomic.Int64
}

// flushedLocked adds a flushed counter's value to its total (under mu, so that a
// concurrent /stats never sees the value twice or not at all).
func (r *runStats) flushedLocked(name string, v int64) {
	if r.totals == nil {
		r.totals = map[string]int64{}
	}
	r.totals[name] += v
}

func (r *runStats) heartbeat(latency time.Duration, err error) {
	if err != nil {
		r.heartbeatErrors.Add(1)
		return
	}
	r.heartbeatsOK.Add(1)
	ms := latency.Milliseconds()
	i := 0
	for i < len(heartbeatBucketsMs) && ms > heartbeatBucketsMs[i] {
		i++
	}
	r.heartbeatHist[i].Add(1)
}

// Stats is the /stats document: cumulative counts since the worker started,
// cheap to produce at any session count (unlike /status, which lists every
// session).
type Stats struct {
	WorkerID   string  `json:"worker_id"`
	State      string  `json:"state"`
	UptimeSec  float64 `json:"uptime_s"`
	Owned      int     `json:"owned"`
	Claiming   int     `json:"claiming"`
	Goroutines int     `json:"goroutines"`
	// SwitchBufferedBytes is what planned reconnects' new connections hold
	// now before their switch (session.SwitchBudget, at most
	// WSFLEET_SWITCH_BUFFER_BUDGET).
	SwitchBufferedBytes int64 `json:"switch_buffered_bytes"`
	// LargeFrameBytes is what messages larger than
	// schema.SmallFrameAllowance being read hold now of the large-frame
	// budget (session.FrameBudget, at most WSFLEET_LARGE_FRAME_BUDGET);
	// LargeFramePeakBytes the most they held at once.
	LargeFrameBytes     int64 `json:"large_frame_bytes"`
	LargeFramePeakBytes int64 `json:"large_frame_peak_bytes"`
	// Messages are the cumulative per-message counters: messages_in,
	// duplicates_dropped, sink_errors, sink_stalls, reconnects.
	Messages map[string]int64 `json:"messages"`
	// HeartbeatsOK / HeartbeatErrors count the worker's heartbeats; LeaseLost
	// the tenures that ended other than by a release or a stop.
	HeartbeatsOK    int64 `json:"heartbeats_ok"`
	HeartbeatErrors int64 `json:"heartbeat_errors"`
	LeaseLost       int64 `json:"lease_lost"`
	// SessionsFailed counts the sessions this worker failed (source cannot
	// be connected; the SessionsFailed metric).
	SessionsFailed int64 `json:"sessions_failed"`
	// Standbys are the standbys this worker holds now (each takes one of
	// its max_sessions), StandbyWindowBytes what their windows hold;
	// StandbyPromotions the claims that adopted a standby's connection (a
	// takeover with no dial), StandbyRefused the standbys whose source
	// refused a second connection.
	Standbys           int   `json:"standbys"`
	StandbyWindowBytes int64 `json:"standby_window_bytes"`
	StandbyPromotions  int64 `json:"standby_promotions"`
	StandbyRefused     int64 `json:"standby_refused"`
	// HeartbeatLatency is a histogram of successful heartbeat latencies:
	// count per bucket, bucket i holding latencies ≤ HeartbeatBucketsMs[i]
	// (the last one: slower than every bound).
	HeartbeatBucketsMs []int64 `json:"heartbeat_buckets_ms"`
	HeartbeatLatency   []int64 `json:"heartbeat_latency_hist"`
	// StoreRequests are the store's own request counts by kind
	// (dynamostore: heartbeat, acquire, checkpoint, release, …); absent when the store does not count.
	StoreRequests map[string]int64 `json:"store_requests,omitempty"`
	// StoreUnits are the store's billed units by request kind (dynamostore:
	// {"heartbeat": {"writes":…, "write_units":…, "index_write_units":…,
	// "read_units":…}, …}); absent when the store does not meter.
	StoreUnits any `json:"store_units,omitempty"`
	// Sink are the batched sink's counts (requests, records, entry errors,
	// …; sink/batch.Stats); absent for an unbatched sink.
	Sink *batch.Stats `json:"sink,omitempty"`
}

// Stats returns the cumulative counts.
func (w *Worker) Stats() Stats {
	w.mu.Lock()
	st := Stats{WorkerID: w.cfg.WorkerID, State: w.state.String(), Owned: len(w.sessions), Claiming: len(w.claiming)}
	started := w.started
	w.mu.Unlock()
	if !started.IsZero() {
		st.UptimeSec = clock.Since(w.deps.Clock, started).Seconds()
	}
	st.Goroutines = runtime.NumGoroutine()
	st.SwitchBufferedBytes = w.env.Switch.Used()
	st.LargeFrameBytes, st.LargeFramePeakBytes = w.env.Frames.Used(), w.env.Frames.Peak()
	st.Messages = map[string]int64{}
	w.stats.mu.Lock()
	for name, c := range w.flushedCounters() {
		st.Messages[metricKey(name)] = w.stats.totals[name] + c.Load()
	}
	w.stats.mu.Unlock()
	st.HeartbeatsOK = w.stats.heartbeatsOK.Load()
	st.HeartbeatErrors = w.stats.heartbeatErrors.Load()
	st.LeaseLost = w.stats.leaseLost.Load()
	st.SessionsFailed = w.stats.failed.Load()
	st.Standbys, st.StandbyWindowBytes = w.standbyTotals()
	st.StandbyPromotions, st.StandbyRefused = w.stats.promotions.Load(), w.stats.standbyRefused.Load()
	st.HeartbeatBucketsMs = heartbeatBucketsMs[:]
	st.HeartbeatLatency = make([]int64, len(w.stats.heartbeatHist))
	for i := range w.stats.heartbeatHist {
		st.HeartbeatLatency[i] = w.stats.heartbeatHist[i].Load()
	}
	if s, ok := w.deps.Store.(StoreStatser); ok {
		st.StoreRequests = s.Stats()
	}
	if s, ok := w.deps.Store.(StoreMeter); ok {
		st.StoreUnits = s.BilledUnits()
	}
	if b, ok := w.deps.Handler.(interface{ Stats() batch.Stats }); ok {
		bs := b.Stats()
		st.Sink = &bs
	}
	return st
}

// flushedCounters are the per-message counters the metrics flush reports
// (and resets), by metric name.
func (w *Worker) flushedCounters() map[string]*atomic.Int64 {
	return map[string]*atomic.Int64{
		schema.MetricMessagesIn:        &w.counters.MessagesIn,
		schema.MetricDuplicatesDropped: &w.counters.DuplicatesDropped,
		schema.MetricSinkErrors:        &w.counters.SinkErrors,
		schema.MetricSinkStalls:        &w.counters.SinkStalls,
		schema.MetricSinkRefused:       &w.counters.SinkRefused,
		schema.MetricSinkSkipped:       &w.counters.SinkSkipped,
		schema.MetricSinkTextBase64:    &sink.Base64Text,
		schema.MetricReconnects:        &w.counters.Reconnects,
		schema.MetricSeqMissingDropped: &w.counters.SeqMissingDropped,
		schema.MetricPlannedReconnects: &w.counters.PlannedReconnects,
		schema.MetricPlannedFailed:     &w.counters.PlannedFailed,
		schema.MetricSwitchOverlap:     &w.counters.SwitchOverlap,
		schema.MetricGapSavedMs:        &w.counters.GapSavedMs,
		schema.MetricLargeFrameWaits:   &w.counters.LargeFrameWaits,
	}
}

func metricKey(name string) string {
	switch name {
	case schema.MetricMessagesIn:
		return "messages_in"
	case schema.MetricDuplicatesDropped:
		return "duplicates_dropped"
	case schema.MetricSinkErrors:
		return "sink_errors"
	case schema.MetricSinkStalls:
		return "sink_stalls"
	case schema.MetricSinkRefused:
		return "sink_refused"
	case schema.MetricSinkSkipped:
		return "sink_skipped"
	case schema.MetricSinkTextBase64:
		return "sink_text_base64"
	case schema.MetricReconnects:
		return "reconnects"
	case schema.MetricSeqMissingDropped:
		return "seq_missing_dropped"
	case schema.MetricPlannedReconnects:
		return "planned_reconnects"
	case schema.MetricPlannedFailed:
		return "planned_reconnects_failed"
	case schema.MetricSwitchOverlap:
		return "switch_overlap"
	case schema.MetricGapSavedMs:
		return "gap_saved_ms"
	case schema.MetricLargeFrameWaits:
		return "large_frame_waits"
	}
	return name
}

// mountPprof adds net/http/pprof under /debug/pprof/ to mux, answering
// loopback clients only (the admin server may listen on every interface in a
// container; profiles are for an operator on the host or a benchmark).
func mountPprof(mux *http.ServeMux) {
	guard := func(h http.HandlerFunc) http.HandlerFunc {
		return func(rw http.ResponseWriter, r *http.Request) {
			if !loopbackClient(r.RemoteAddr) {
				http.Error(rw, "pprof: loopback clients only", http.StatusForbidden)
				return
			}
			h(rw, r)
		}
	}
	mux.HandleFunc("/debug/pprof/", guard(pprof.Index))
	mux.HandleFunc("/debug/pprof/cmdline", guard(pprof.Cmdline))
	mux.HandleFunc("/debug/pprof/profile", guard(pprof.Profile))
	mux.HandleFunc("/debug/pprof/symbol", guard(pprof.Symbol))
	mux.HandleFunc("/debug/pprof/trace", guard(pprof.Trace))
}

func loopbackClient(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
