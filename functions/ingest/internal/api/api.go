// Package api owns the ingest HTTP API: an http.Handler (routing on
// net/http ServeMux patterns, request signing, decoding and validation, the
// calls to the sessions store and the work queue, the responses, the request
// log line and the EMF metrics of each request), and the Lambda handler that
// serves it API Gateway's HTTP API (payload format 2.0) events through
// httpadapter. It defines the small interfaces it needs from storage and the
// queue; it never sees an SDK type.
package api

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/functions/ingest/internal/config"
	"github.com/wsfleet/wsfleet/functions/ingest/internal/sessions"
	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/rebalance"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionapi"
	"github.com/wsfleet/wsfleet/shared/spec"
)

// Store is what the handler needs from the sessions table.
type Store interface {
	Start(ctx context.Context, d sessions.Desired) (sessions.Result, error)
	Stop(ctx context.Context, id string) (sessions.Result, error)
	Get(ctx context.Context, id string) (sessions.Session, error)
	List(ctx context.Context, state string, limit int, cursor string) (sessions.Page, error)
	Workers(ctx context.Context, limit int) (sessions.WorkerList, error)
}

// NonceStore remembers the nonces of signed requests (sessions.Store in
// production): RememberNonce fails with sessions.ErrReplay for a nonce it
// already holds.
type NonceStore interface {
	RememberNonce(ctx context.Context, nonce string, until time.Time) error
}

// Notifier sends work-queue notifications (sqsnotify.Queue in production).
type Notifier interface {
	Publish(ctx context.Context, n notify.Notification) error
}

// Deps are the handler's collaborators.
type Deps struct {
	Store    Store
	Nonces   NonceStore // required when requests are signed
	Notifier Notifier
	Clock    clock.Clock    // default clock.Real
	Log      zerolog.Logger // the base logger (JSON to stdout in Lambda)
	Metrics  io.Writer      // where the EMF line of each invocation goes (nil: none)
}

// Handler serves the API (an http.Handler; Lambda runs it through Lambda).
// Build it once per process; it is safe for concurrent use (ingest-local
// serves it from many goroutines).
type Handler struct {
	cfg      config.Config
	policy   URLPolicy
	verifier *Verifier // nil when unsigned requests are accepted
	nonces   NonceStore
	store    Store
	notifier Notifier
	clock    clock.Clock
	log      zerolog.Logger
	meter    *meter
	mux      *http.ServeMux // routes
}

// New returns a Handler. cfg must be valid (config.Validate).
func New(cfg config.Config, d Deps) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Store == nil || d.Notifier == nil {
		return nil, errors.New("ingest handler: store and notifier are required")
	}
	h := &Handler{
		cfg:      cfg,
		policy:   URLPolicy{AllowedHosts: cfg.AllowedHosts, PrivateIPs: cfg.AllowPrivateIPs, SecretPrefix: cfg.SecretPrefix, SecretHosts: cfg.SecretHosts},
		store:    d.Store,
		notifier: d.Notifier,
		clock:    d.Clock,
		log:      d.Log,
		meter:    newMeter(cfg.MetricsNamespace, cfg.Environment, d.Metrics),
	}
	if h.clock == nil {
		h.clock = clock.Real{}
	}
	if cfg.SigningSecret != "" {
		if d.Nonces == nil {
			return nil, errors.New("ingest handler: signed requests need a nonce store")
		}
		h.verifier = NewVerifier([]byte(cfg.SigningSecret), cfg.SignatureWindow)
		h.nonces = d.Nonces
	}
	h.mux = h.routes()
	return h, nil
}

// Default list page size.
const (
	DefaultListLimit = 25
	retryAfterSecs   = "1"
)

// Routes: their ServeMux patterns, as logged and as an API Gateway route key
// names them.
const (
	routeStart   = "POST /sessions"
	routeStop    = "POST /sessions/{id}/stop"
	routeStatus  = "GET /sessions/{id}"
	routeList    = "GET /sessions"
	routeWorkers = "GET /workers"
)

// reply is what serving one request produced, for the response, the log
// line and the metrics.
type reply struct {
	status     int
	body       any
	err        *apiError
	route      string
	connID     string
	generation int64
	outcome    sessions.Outcome
	notified   *bool
	wsURL      string // redacted
	headers    int    // number of dial headers (never their values)
	cause      error  // internal error behind a 5xx
}

func (h *Handler) start(ctx context.Context, req *http.Request, body []byte, r reply, log *zerolog.Logger) reply {
	if e := requireJSON(req); e != nil {
		r.err = e
		return r
	}
	d, e := DecodeStart(body, h.policy)
	if e != nil {
		r.err = e
		return r
	}
	r.connID, r.wsURL, r.headers = d.ConnectionID, spec.RedactURL(d.Spec.WSURL), len(d.Spec.Headers)
	sctx, cancel := context.WithTimeout(ctx, h.cfg.StoreTimeout)
	res, err := h.store.Start(sctx, d)
	cancel()
	if err != nil {
		return h.storeFailed(r, err)
	}
	r.generation, r.outcome = res.Generation, res.Outcome
	h.mailboxFailed(log, d.ConnectionID, res)
	r.notified = h.publish(ctx, log, schema.NotifyStart, d.ConnectionID, res.Generation)
	h.meter.add(schema.MetricStarts)
	r.status = http.StatusAccepted
	r.body = sessionapi.Change{ConnectionID: d.ConnectionID, DesiredState: schema.StateStarted, Generation: res.Generation,
		Outcome: string(res.Outcome), Notified: *r.notified, Owner: res.Owner, OwnerNotified: res.OwnerNotified}
	return r
}

func (h *Handler) stop(ctx context.Context, req *http.Request, body []byte, r reply, log *zerolog.Logger) reply {
	if len(strings.TrimSpace(string(body))) > 0 {
		if e := requireJSON(req); e != nil {
			r.err = e
			return r
		}
	}
	if e := DecodeStop(body); e != nil {
		r.err = e
		return r
	}
	sctx, cancel := context.WithTimeout(ctx, h.cfg.StoreTimeout)
	res, err := h.store.Stop(sctx, r.connID)
	cancel()
	if err != nil {
		return h.storeFailed(r, err)
	}
	r.generation, r.outcome = res.Generation, res.Outcome
	h.mailboxFailed(log, r.connID, res)
	r.notified = h.publish(ctx, log, schema.NotifyStop, r.connID, res.Generation)
	h.meter.add(schema.MetricStops)
	r.status = http.StatusAccepted
	r.body = sessionapi.Change{ConnectionID: r.connID, DesiredState: schema.StateStopped, Generation: res.Generation,
		Outcome: string(res.Outcome), Notified: *r.notified, Owner: res.Owner, OwnerNotified: res.OwnerNotified}
	return r
}

// mailboxFailed logs and counts a mailbox write that failed for another
// reason than its worker not being alive. The session write stands: the
// owner's audit of its sessions finds the change within a reconcile
// interval, a standby's check within its interval, so the request still
// succeeds.
func (h *Handler) mailboxFailed(log *zerolog.Logger, id string, res sessions.Result) {
	if res.MailboxErr != nil {
		h.meter.add(schema.MetricNotifyFailures)
		log.Warn().Err(res.MailboxErr).Str("connection_id", id).Str("owner", res.Owner).
			Msg("owner's mailbox not written; its audit will pick the change up")
	}
	if res.StandbyMailboxErr != nil {
		h.meter.add(schema.MetricNotifyFailures)
		log.Warn().Err(res.StandbyMailboxErr).Str("connection_id", id).Str("standby", res.Standby).
			Msg("standby's mailbox not written; its check will pick the stop up")
	}
}

// workers serves GET /workers: the worker records, alive first, at most
// sessions.MaxWorkers of them.
func (h *Handler) workers(ctx context.Context, req *http.Request, r reply) reply {
	if req.URL.RawQuery != "" {
		r.err = badRequest(CodeInvalidQuery, "GET /workers takes no query parameters")
		return r
	}
	sctx, cancel := context.WithTimeout(ctx, h.cfg.StoreTimeout)
	l, err := h.store.Workers(sctx, sessions.MaxWorkers)
	cancel()
	if err != nil {
		return h.storeFailed(r, err)
	}
	out := sessionapi.Workers{Workers: make([]sessionapi.Worker, 0, len(l.Workers)), Limit: sessions.MaxWorkers, Truncated: l.Truncated}
	var alive []rebalance.Worker
	for _, w := range l.Workers {
		if w.State == schema.WorkerAlive {
			alive = append(alive, rebalance.Worker{ID: w.ID, Load: w.Load, Capacity: w.Capacity, Draining: w.Draining})
		}
	}
	plan := rebalance.Compute(alive, rebalance.Settings{})
	out.Imbalance = plan.Imbalance
	for _, w := range l.Workers {
		out.Workers = append(out.Workers, sessionapi.Worker{ID: w.ID, State: w.State, List: w.List, Epoch: w.Epoch, Load: w.Load,
			Capacity: w.Capacity, AdminAddr: w.AdminAddr, Draining: w.Draining, FairShare: plan.Share[w.ID], MovesPerMin: w.MovesPerMin,
			HeartbeatAtMs: w.HeartbeatAtMs, StartedAtMs: w.StartedAtMs, EndedAtMs: w.EndedAtMs, DeclaredDeadBy: w.DeclaredDeadBy,
			Host: w.Host, PID: w.Pid})
	}
	r.status = http.StatusOK
	r.body = out
	return r
}

func (h *Handler) status(ctx context.Context, r reply) reply {
	sctx, cancel := context.WithTimeout(ctx, h.cfg.StoreTimeout)
	s, err := h.store.Get(sctx, r.connID)
	cancel()
	if err != nil {
		return h.storeFailed(r, err)
	}
	r.generation = s.Generation
	r.status = http.StatusOK
	r.body = toJSON(s)
	return r
}

func (h *Handler) list(ctx context.Context, req *http.Request, r reply) reply {
	state, limit, next, e := listParams(req)
	if e != nil {
		r.err = e
		return r
	}
	sctx, cancel := context.WithTimeout(ctx, h.cfg.StoreTimeout)
	page, err := h.store.List(sctx, state, limit, next)
	cancel()
	if err != nil {
		return h.storeFailed(r, err)
	}
	out := sessionapi.Page{Sessions: make([]sessionapi.Session, 0, len(page.Sessions)), Next: page.Next}
	for _, s := range page.Sessions {
		out.Sessions = append(out.Sessions, toJSON(s))
	}
	r.status = http.StatusOK
	r.body = out
	return r
}

// publish sends the notification after a successful write. A failure is
// logged and counted, never returned: the write is durable and the workers'
// reconciliation finds it.
func (h *Handler) publish(ctx context.Context, log *zerolog.Logger, typ, id string, generation int64) *bool {
	nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.NotifyTimeout)
	defer cancel()
	err := h.notifier.Publish(nctx, notify.Notification{Type: typ, ConnectionID: id, Generation: generation, SentAtMs: h.clock.Now().UnixMilli()})
	ok := err == nil
	if !ok {
		h.meter.add(schema.MetricNotifyFailures)
		log.Warn().Err(err).Str("connection_id", id).Str("type", typ).Int64("generation", generation).
			Msg("notification not sent; reconciliation will pick the change up")
	}
	return &ok
}

func (h *Handler) storeFailed(r reply, err error) reply {
	switch {
	case errors.Is(err, sessions.ErrNotFound):
		r.err = &apiError{status: http.StatusNotFound, code: CodeNotFound, message: "no session with this connection_id"}
	case errors.Is(err, sessions.ErrInvalidCursor):
		r.err = badRequest(CodeInvalidQuery, "next is not a cursor returned by this list")
	case errors.Is(err, sessions.ErrRejected):
		r.err = &apiError{status: http.StatusInternalServerError, code: CodeRejected,
			message: "the session table refused this request as it is (a DynamoDB client error); nothing was written, and sending it again will not succeed"}
		r.cause = err
	case errors.Is(err, sessions.ErrOutcomeUnknown):
		r.err = &apiError{status: http.StatusServiceUnavailable, code: CodeOutcomeUnknown,
			message: "the session table did not answer in time: the change may or may not have been made; retrying the same request is safe", retryable: true}
		r.cause = err
	case errors.Is(err, sessions.ErrConflict):
		r.err = &apiError{status: http.StatusConflict, code: CodeConflict, message: "the session is being changed concurrently; retry", retryable: true}
		r.cause = err
	default:
		r.err = &apiError{status: http.StatusServiceUnavailable, code: CodeUnavailable, message: "the session table is unavailable; nothing was written, retry", retryable: true}
		r.cause = err
	}
	return r
}

// requireJSON accepts Content-Type application/json, with at most a UTF-8
// charset parameter.
func requireJSON(req *http.Request) *apiError {
	bad := badRequest(CodeInvalidContentType, "Content-Type must be application/json")
	ct := header(req, "Content-Type")
	if ct == "" {
		return bad
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return bad
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return bad
		}
	}
	return nil
}

// listParams reads state (default STARTED), limit (default 25, 1..100) and
// next; any other or repeated parameter is refused.
func listParams(req *http.Request) (state string, limit int, next string, e *apiError) {
	q, err := url.ParseQuery(req.URL.RawQuery)
	if err != nil {
		return "", 0, "", badRequest(CodeInvalidQuery, "query string is not valid")
	}
	state, limit = schema.StateStarted, DefaultListLimit
	for k, vs := range q {
		if len(vs) != 1 {
			return "", 0, "", badRequest(CodeInvalidQuery, "query parameter "+spec.QuoteName(k)+" is repeated")
		}
		v := vs[0]
		switch k {
		case "state":
			state = strings.ToUpper(v)
			if state != schema.StateStarted && state != schema.StateStopped {
				return "", 0, "", badRequest(CodeInvalidQuery, "state must be "+schema.StateStarted+" or "+schema.StateStopped)
			}
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > sessions.MaxListLimit {
				return "", 0, "", badRequest(CodeInvalidQuery, "limit must be 1.."+strconv.Itoa(sessions.MaxListLimit))
			}
			limit = n
		case "next":
			if v == "" || len(v) > sessions.MaxCursorLen {
				return "", 0, "", badRequest(CodeInvalidQuery, "next is not a cursor returned by this list")
			}
			next = v
		default:
			return "", 0, "", badRequest(CodeInvalidQuery, "unknown query parameter "+spec.QuoteName(k)+" (use state, limit, next)")
		}
	}
	return state, limit, next, nil
}

func toJSON(s sessions.Session) sessionapi.Session {
	out := sessionapi.Session{
		ConnectionID: s.ConnectionID,
		DesiredState: s.DesiredState,
		View:         s.Spec.View(),
		Generation:   s.Generation,
		LeaseOwner:   s.LeaseOwner,
		LeaseEpoch:   s.LeaseEpoch,
		LastSeq:      s.LastSeq,
		CreatedAtMs:  s.CreatedAtMs,
		UpdatedAtMs:  s.UpdatedAtMs,
		Failed:       s.Failed,
		LastError:    s.LastError,
		LastErrorAt:  rfc3339Ms(s.LastErrorAtMs),

		LastErrorGeneration: s.LastErrorGen,
		LastErrorEpoch:      s.LastErrorEpoch,
	}
	if s.Standby != "" {
		out.StandbyHolder = &sessionapi.StandbyHolder{WorkerID: s.Standby, Epoch: s.StandbyEpoch}
	}
	// A refusal holds for the generation it was seen at; an older one is a
	// past error like any other.
	if s.StandbyRefusedGen != 0 && s.StandbyRefusedGen == s.Generation {
		out.StandbyRefused = &sessionapi.StandbyRefused{Generation: s.StandbyRefusedGen, Error: s.StandbyError}
	} else {
		out.StandbyError = s.StandbyError
	}
	return out
}

// rfc3339Ms is ms (Unix milliseconds) in RFC 3339 UTC; "" for 0.
func rfc3339Ms(ms int64) string {
	if ms == 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}
