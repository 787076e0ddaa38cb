// /status: the worker's view of itself and its fleet, and the address
// other workers call.

package streamer

import (
	"net"
	"os"
	"sort"
	"time"

	"github.com/wsfleet/wsfleet/workers/streamer/internal/session"
)

// Status is the /status document.
type Status struct {
	WorkerID string `json:"worker_id"`
	// PID and Host find the process: the worker's process id and the
	// machine's host name (on Fargate, the task's).
	PID         int       `json:"pid"`
	Host        string    `json:"host"`
	State       string    `json:"state"`
	Since       time.Time `json:"since"`
	MaxSessions int       `json:"max_sessions"`
	Owned       int       `json:"owned"`
	// LargeFrameBytes is what large messages being read hold of the
	// worker's large-frame budget now (LargeFrameBudgetBytes, 0: no bound;
	// Stats has their peak and messages.large_frame_waits the waits).
	LargeFrameBytes       int64 `json:"large_frame_bytes"`
	LargeFrameBudgetBytes int64 `json:"large_frame_budget_bytes"`
	// Record is the worker record as the last heartbeat returned it;
	// TrustedFor is how long the worker may still act as owner without
	// another successful heartbeat (0: fenced).
	Record       WorkerRecord     `json:"record"`
	TrustedForMs int64            `json:"trusted_for_ms"`
	AliveWorkers int              `json:"alive_workers"`
	Rebalance    RebalanceStatus  `json:"rebalance"`
	Watching     []string         `json:"watching"`
	Sessions     []session.Status `json:"sessions"`
	// Standbys are the standbys this worker holds for sessions other
	// workers own (their windows, connections and dials).
	Standbys []StandbyView `json:"standbys"`
}

// hostname is the machine's host name, read once ("" when the system has
// none to give).
var hostname, _ = os.Hostname()

// WorkerRecord is the /status view of a lease.WorkerRecord.
type WorkerRecord struct {
	State         string   `json:"state"`
	Epoch         int64    `json:"epoch"`
	HeartbeatSeq  int64    `json:"heartbeat_seq"`
	HeartbeatAtMs int64    `json:"heartbeat_at_ms"`
	TTLMs         int64    `json:"ttl_ms"`
	Load          int      `json:"load"`
	Capacity      int      `json:"capacity"`
	Mailbox       []string `json:"mailbox,omitempty"`
	StartedAtMs   int64    `json:"started_at_ms"`
}

// Status returns the worker's state and its sessions.
func (w *Worker) Status() Status {
	w.mu.Lock()
	st := Status{WorkerID: w.cfg.WorkerID, PID: os.Getpid(), Host: hostname, State: w.state.String(), Since: w.started,
		MaxSessions: w.cfg.MaxSessions, Owned: len(w.sessions),
		LargeFrameBytes: w.env.Frames.Used(), LargeFrameBudgetBytes: w.cfg.LargeFrameBudget}
	ss := make([]*session.Session, 0, len(w.sessions))
	for _, s := range w.sessions {
		ss = append(ss, s)
	}
	w.mu.Unlock()
	rec := w.keeper.Record()
	st.Record = WorkerRecord{State: rec.State, Epoch: rec.Epoch, HeartbeatSeq: rec.HeartbeatSeq, HeartbeatAtMs: rec.HeartbeatAtMs,
		TTLMs: rec.TTL.Milliseconds(), Load: rec.Load, Capacity: rec.Capacity, Mailbox: rec.Mailbox, StartedAtMs: rec.StartedAtMs}
	st.TrustedForMs = max(w.keeper.TrustedUntil().Sub(w.deps.Clock.Now()).Milliseconds(), 0)
	if !w.keeper.Trusted() {
		st.TrustedForMs = 0
	}
	st.AliveWorkers = w.keeper.AliveWorkers()
	st.Rebalance = w.rebalanceStatus()
	st.Watching = w.keeper.Targets()
	st.Sessions = make([]session.Status, 0, len(ss))
	for _, s := range ss {
		ss := s.Status()
		ss.StandbyWorker, _ = w.standbyOf(s.ID())
		st.Sessions = append(st.Sessions, ss)
	}
	st.Standbys = w.standbyViews()
	sort.Slice(st.Sessions, func(i, j int) bool { return st.Sessions[i].ConnectionID < st.Sessions[j].ConnectionID })
	return st
}

// advertised is the admin address to put in the worker record: the
// configured one, else the listener's, with an unspecified host (0.0.0.0,
// ::) replaced by this host's first private non-loopback address (a
// Fargate task's ENI address), so that other workers can reach it.
func advertised(listen, configured string) string {
	if configured != "" {
		return configured
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
		return listen
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return listen
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && n.IP.IsPrivate() {
			return net.JoinHostPort(n.IP.String(), port)
		}
	}
	return listen
}
