// Package sessionapi owns the JSON contract of the sessions API and of GET
// /workers: the bodies ingest answers with and clients (the wsfleet CLI,
// users' code) decode. The server's strict request decoding lives in
// ingest; the shapes live here.
package sessionapi

import "github.com/wsfleet/wsfleet/shared/spec"

// StartRequest is the body of POST /sessions: the connection id (absent:
// ingest generates one) and the session's spec (shared/spec).
type StartRequest struct {
	ConnectionID string `json:"connection_id,omitempty"`
	spec.Spec
}

// Change is the 202 body of a start or a stop.
type Change struct {
	ConnectionID string `json:"connection_id"`
	DesiredState string `json:"desired_state"`
	Generation   int64  `json:"generation"`
	Outcome      string `json:"outcome"`
	Notified     bool   `json:"notified"`
	// Owner is the worker that owned the session when it was written
	// (absent: none) and OwnerNotified whether the connection id went into
	// its mailbox (false when that worker is no longer alive).
	Owner         string `json:"owner,omitempty"`
	OwnerNotified bool   `json:"owner_notified,omitempty"`
}

// Session is a session as the API shows it: its spec's redacted view
// (ws_url with query values redacted, header names only: values never
// leave the table) and its state.
type Session struct {
	ConnectionID string `json:"connection_id"`
	DesiredState string `json:"desired_state"`
	spec.View
	Generation  int64  `json:"generation"`
	LeaseOwner  string `json:"lease_owner"` // "": no owner
	LeaseEpoch  int64  `json:"lease_epoch"`
	LastSeq     *int64 `json:"last_seq"` // where the next owner resumes: the larger of the session's last checkpoint and the last release's release_seq; null until a worker checkpoints or releases
	CreatedAtMs int64  `json:"created_at_ms"`
	UpdatedAtMs int64  `json:"updated_at_ms"`
	// Failed: the session is FAILED (its source can never be connected:
	// address refused by policy, handshake 401/403/404/410, a redirect, or
	// too many failed connects in a row: a connect fails when it does not reach
	// the first message); no worker holds it until a new start.
	Failed bool `json:"failed"`
	// LastError is the last connection error a worker recorded (no URL, no
	// header value) and LastErrorAt when (RFC 3339); absent when none.
	LastError   string `json:"last_error,omitempty"`
	LastErrorAt string `json:"last_error_at,omitempty"`
	// LastErrorGeneration and LastErrorEpoch are the generation and the
	// tenure (lease epoch) the error was seen in; absent when none, or
	// when the error was recorded before they were. An error with a
	// LastErrorEpoch below LeaseEpoch (or a LastErrorGeneration below
	// Generation) is a past one: a later tenure (or configuration) has
	// not recorded any since.
	LastErrorGeneration int64 `json:"last_error_generation,omitempty"`
	LastErrorEpoch      int64 `json:"last_error_epoch,omitempty"`
	// The hot standby's state (its configuration is the view's standby):
	// StandbyHolder is the worker holding it (absent: none);
	// StandbyRefused says that the source refused a second connection at
	// the current generation (the session goes on without a standby until
	// a new generation); StandbyError is why the last standby was dropped
	// otherwise (absent when none).
	StandbyHolder  *StandbyHolder  `json:"standby_holder,omitempty"`
	StandbyRefused *StandbyRefused `json:"standby_refused,omitempty"`
	StandbyError   string          `json:"standby_error,omitempty"`
}

// StandbyHolder is the worker holding a session's hot standby and its
// standby epoch (the standby's fencing token: it grows at every
// assignment).
type StandbyHolder struct {
	WorkerID string `json:"worker_id"`
	Epoch    int64  `json:"epoch"`
}

// StandbyRefused is a source's refusal of the standby's connection (a
// one-connection-per-session policy): the generation it was refused at and
// the error the standby saw.
type StandbyRefused struct {
	Generation int64  `json:"generation"`
	Error      string `json:"error,omitempty"`
}

// PastError reports whether s's last error was seen in an earlier tenure
// (lease epoch) or an earlier generation than the session's current ones;
// false when there is none, or it was recorded without them.
func (s Session) PastError() bool {
	return s.LastError != "" && ((s.LastErrorEpoch > 0 && s.LastErrorEpoch < s.LeaseEpoch) ||
		(s.LastErrorGeneration > 0 && s.LastErrorGeneration < s.Generation))
}

// Page is one page of GET /sessions.
type Page struct {
	Sessions []Session `json:"sessions"`
	Next     string    `json:"next,omitempty"`
}

// Worker is a worker record as GET /workers shows it.
type Worker struct {
	ID    string `json:"id"`
	State string `json:"state"` // ALIVE | DEAD | LEFT
	// List is ALIVE, GONE (dead or left, may still own sessions: being
	// taken over) or DONE (owns none).
	List      string `json:"list"`
	Epoch     int64  `json:"epoch"`
	Load      int    `json:"load"`
	Capacity  int    `json:"capacity"`
	AdminAddr string `json:"admin_addr,omitempty"`
	Draining  bool   `json:"draining,omitempty"`
	// FairShare is the sessions this worker should hold (shared/rebalance,
	// from the alive workers' load and capacity); alive workers only.
	FairShare      float64 `json:"fair_share,omitempty"`
	MovesPerMin    int     `json:"moves_per_min,omitempty"`
	HeartbeatAtMs  int64   `json:"hb_at_ms"`
	StartedAtMs    int64   `json:"started_at_ms"`
	EndedAtMs      int64   `json:"ended_at_ms,omitempty"`
	DeclaredDeadBy string  `json:"declared_dead_by,omitempty"`
	// Host and PID find the worker's process: its host name and process
	// id when it registered.
	Host string `json:"host,omitempty"`
	PID  int    `json:"pid,omitempty"`
}

// Workers is the body of GET /workers: alive workers first, then dead or
// left ones, at most Limit of them (Truncated: there are more).
type Workers struct {
	Workers []Worker `json:"workers"`
	// Imbalance is max(load ÷ fair share) over the alive workers (1 = even).
	Imbalance float64 `json:"imbalance"`
	Limit     int     `json:"limit"`
	Truncated bool    `json:"truncated"`
}
