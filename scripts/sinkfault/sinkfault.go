// Package sinkfault is the chaos harness's sink fault proxy: an HTTP proxy
// between the workers and the destination engine of their batched sink
// (fauxqs for the sqs sink, kinesalite for the kinesis sink; both speak the
// AWS JSON protocol over plain HTTP locally). On the sink's own calls
// (SendMessageBatch / SendMessage naming the output queue, PutRecords) it
// can add latency spikes (a request held before it is forwarded, or its
// answer held after the destination stored it), refuse a share of the
// entries (transient or permanent: refused entries are removed from the
// request before it is forwarded, so they are not stored, and the answer
// names them as failed), and freeze the sink (every sink request held until
// thawed, connections open, as testkit/faultnet does at the TCP level).
//
// Every other request is forwarded untouched: with the sqs sink the worker
// has one SQS endpoint for its work queue and its output queue, so the proxy
// routes by the QueueUrl (or QueueName) of the JSON body: the output queue's
// requests go to the destination engine, everything else to the work
// queue's engine (killed by the sqs-down fault; the destination is a second
// engine and keeps its messages).
//
// It records, for every entry the destination accepted, the time the proxy
// received the destination's successful answer (Stamps): the moment the
// record was known stored, on the harness's clock. A held request is
// forwarded only while its client still waits for it (a request the worker
// cancelled at its timeout or its trust deadline never reaches the
// destination), as a request that never left a host would.
//
// It listens on 127.0.0.1 only; no shipped binary imports it.
package sinkfault

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wsfleet/wsfleet/workers/streamer/sink/consume"
)

// Mode is the destination's protocol.
type Mode string

// Modes.
const (
	ModeSQS     Mode = "sqs"
	ModeKinesis Mode = "kinesis"
)

// Config configures a Proxy.
type Config struct {
	Mode Mode
	// Dest is the destination engine's endpoint (http://127.0.0.1:port).
	Dest string
	// Work is where requests that are not the sink's go (ModeSQS: the work
	// queue's engine); "" forwards them to Dest.
	Work string
	// OutputQueue is the output queue's name (ModeSQS): requests whose
	// QueueUrl ends in /OutputQueue (or whose QueueName is it) are the
	// sink's.
	OutputQueue string
	// Seed seeds the draws of latency and refusals.
	Seed uint64
}

// Key names one record by its envelope.
type Key struct {
	Session string
	Seq     int64
	Sub     int64
	Epoch   int64
	Worker  string
}

// Envelope is the sink's envelope as the harness reads it: consume's (the
// one parser of the envelope, the one users import).
type Envelope = consume.Envelope

// Payload forms (Envelope.Form).
const (
	FormJSON   = consume.FormJSON
	FormString = consume.FormString
	FormB64    = consume.FormB64
	FormNone   = consume.FormNone
)

// ParseEnvelope parses one record body holding one envelope.
func ParseEnvelope(b []byte) (Envelope, error) { return consume.Parse(b) }

// KeyOf is the envelope's record key.
func KeyOf(e Envelope) Key {
	return Key{Session: e.ConnectionID, Seq: e.Seq, Sub: e.Sub, Epoch: e.LeaseEpoch, Worker: e.WorkerID}
}

// keysOf are the record keys of the envelopes an SQS message carries (a
// pack: consume.FromSQS); a body that is none has one zero key.
func keysOf(body, contentType string) []Key { return envelopeKeys(consume.FromSQS(body, contentType)) }

// envelopeKeys are the record keys of the envelopes a record carries; a
// record that carries none (err) has one zero key.
func envelopeKeys(envs []consume.Envelope, err error) []Key {
	if err != nil || len(envs) == 0 {
		return []Key{{}}
	}
	keys := make([]Key, len(envs))
	for i, e := range envs {
		keys[i] = KeyOf(e)
	}
	return keys
}

// Latency is a latency spike: each sink request is delayed with
// probability Share by a duration drawn in [Min, Max]; with probability
// AnswerShare (of the delayed ones) the answer is held instead of the
// request (the destination stores the entries at once, the worker hears
// late: a timeout whose outcome is success).
type Latency struct {
	Share       float64
	Min, Max    time.Duration
	AnswerShare float64
}

// Refuse refuses entries: each entry of a sink request is refused with
// probability Share; a refused entry is permanent with probability
// Permanent (a permanently refused record is refused at every attempt,
// as a real permanent error is), transient otherwise.
type Refuse struct {
	Share     float64
	Permanent float64
}

// Stats count what the proxy did.
type Stats struct {
	Requests      int64 `json:"requests"`       // sink requests seen
	Forwarded     int64 `json:"forwarded"`      // sink requests forwarded
	Entries       int64 `json:"entries"`        // messages stored (successful answers): each of an SQS pack or an aggregated Kinesis record
	Delayed       int64 `json:"delayed"`        // requests held before forwarding (latency)
	AnswerHeld    int64 `json:"answer_held"`    // answers held (latency)
	Frozen        int64 `json:"frozen"`         // requests held by a freeze
	Abandoned     int64 `json:"abandoned"`      // held requests whose client gave up (never forwarded)
	Transient     int64 `json:"transient"`      // entries refused transiently
	Permanent     int64 `json:"permanent"`      // entries refused permanently
	PermanentReqs int64 `json:"permanent_reqs"` // whole requests refused permanently (kinesis)
	Other         int64 `json:"other"`          // requests that are not the sink's
	UpstreamErrs  int64 `json:"upstream_errors"`
}

// Proxy is a running sink fault proxy.
type Proxy struct {
	cfg Config
	ln  net.Listener
	srv *http.Server
	hc  *http.Client

	mu        sync.Mutex
	rng       *rand.Rand
	latency   Latency
	refuse    Refuse
	frozen    bool
	frozenFor map[string]bool // worker ids frozen (empty with frozen: every worker)
	thaw      chan struct{}   // closed at Thaw
	permanent map[Key]bool    // records refused permanently, at every attempt (by session, seq, sub)
	stamps    map[Key][]int64
	stats     Stats
}

// Start listens on 127.0.0.1 and serves.
func Start(cfg Config) (*Proxy, error) {
	if cfg.Mode != ModeSQS && cfg.Mode != ModeKinesis {
		return nil, fmt.Errorf("sinkfault: mode %q: want sqs or kinesis", cfg.Mode)
	}
	if cfg.Dest == "" {
		return nil, errors.New("sinkfault: no destination endpoint")
	}
	if cfg.Mode == ModeSQS && cfg.OutputQueue == "" {
		return nil, errors.New("sinkfault: sqs mode needs the output queue's name")
	}
	if cfg.Work == "" {
		cfg.Work = cfg.Dest
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("sinkfault listen: %w", err)
	}
	p := &Proxy{
		cfg: cfg, ln: ln,
		hc:        &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}},
		rng:       rand.New(rand.NewPCG(cfg.Seed, 0x5eed)),
		frozenFor: map[string]bool{}, thaw: make(chan struct{}),
		permanent: map[Key]bool{}, stamps: map[Key][]int64{},
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the proxy's endpoint (the workers' AWS_ENDPOINT_URL_SQS or
// AWS_ENDPOINT_URL_KINESIS).
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Close stops the proxy (held requests are released unforwarded).
func (p *Proxy) Close() {
	p.Thaw()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
	_ = p.srv.Close()
	p.hc.CloseIdleConnections()
}

// SetLatency sets (zero value: clears) the latency spikes.
func (p *Proxy) SetLatency(l Latency) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = l
}

// SetRefuse sets (zero value: clears) the refusals. Records already
// refused permanently stay refused.
func (p *Proxy) SetRefuse(r Refuse) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = r
}

// Freeze holds every sink request (of the given workers only, when any are
// named) until Thaw.
func (p *Proxy) Freeze(workers ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.frozen {
		p.thaw = make(chan struct{})
	}
	p.frozen = true
	for _, w := range workers {
		p.frozenFor[w] = true
	}
}

// Thaw forwards held requests (those whose client still waits) and ends the
// freeze.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen {
		close(p.thaw)
	}
	p.frozen = false
	clear(p.frozenFor)
}

// Clear lifts every fault.
func (p *Proxy) Clear() {
	p.SetLatency(Latency{})
	p.SetRefuse(Refuse{})
	p.Thaw()
}

// Stats is a copy of the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Stamps is, per record, the times (UnixNano, the harness's clock) the
// proxy received a successful answer of the destination that stored it.
func (p *Proxy) Stamps() map[Key][]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[Key][]int64, len(p.stamps))
	for k, v := range p.stamps {
		out[k] = append([]int64(nil), v...)
	}
	return out
}

// PermanentlyRefused lists the records refused permanently (at every
// attempt). A Kinesis record refused only because it shared a request with
// one is not among them: the request's 400 does not say which record it
// refused, so the worker must send the entries again alone before it gives
// one up.
func (p *Proxy) PermanentlyRefused() []Key {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Key, 0, len(p.permanent))
	for k := range p.permanent {
		out = append(out, k)
	}
	return out
}

func (p *Proxy) count(f func(s *Stats)) {
	p.mu.Lock()
	f(&p.stats)
	p.mu.Unlock()
}

// ServeHTTP routes one request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, "read request: "+err.Error(), http.StatusBadRequest)
		return
	}
	target := r.Header.Get("X-Amz-Target")
	op := target[strings.LastIndexByte(target, '.')+1:]
	switch p.cfg.Mode {
	case ModeSQS:
		var q struct{ QueueUrl, QueueName string }
		_ = json.Unmarshal(body, &q)
		name := q.QueueName
		if q.QueueUrl != "" {
			name = q.QueueUrl[strings.LastIndexByte(q.QueueUrl, '/')+1:]
		}
		if name != p.cfg.OutputQueue {
			p.count(func(s *Stats) { s.Other++ })
			p.forwardRaw(w, r, p.cfg.Work, body)
			return
		}
		switch op {
		case "SendMessageBatch":
			p.sqsBatch(w, r, body)
		case "SendMessage":
			p.sqsSingle(w, r, body)
		default:
			p.count(func(s *Stats) { s.Other++ })
			p.forwardRaw(w, r, p.cfg.Dest, body)
		}
	case ModeKinesis:
		if op == "PutRecords" {
			p.kinesisPut(w, r, body)
			return
		}
		p.count(func(s *Stats) { s.Other++ })
		p.forwardRaw(w, r, p.cfg.Dest, body)
	}
}

// plan is what the faults do to one sink request.
type plan struct {
	holdReq, holdAnswer time.Duration
	refused             map[int]refusal // entry index → refusal
}

type refusal struct{ permanent bool }

// draw decides a request's latency and each entry's refusal; an entry
// (an SQS pack) holds the keys of every record in it: it is refused
// permanently at every attempt once one of them was, and a permanent
// refusal marks all of them.
func (p *Proxy) draw(entries [][]Key, perRecordPermanent bool) plan {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Requests++
	var pl plan
	l := p.latency
	if l.Share > 0 && p.rng.Float64() < l.Share {
		d := l.Min
		if l.Max > l.Min {
			d += time.Duration(p.rng.Int64N(int64(l.Max - l.Min)))
		}
		if p.rng.Float64() < l.AnswerShare {
			pl.holdAnswer = d
			p.stats.AnswerHeld++
		} else {
			pl.holdReq = d
			p.stats.Delayed++
		}
	}
	pl.refused = map[int]refusal{}
	rf := p.refuse
	for i, keys := range entries {
		if slices.ContainsFunc(keys, func(k Key) bool { return p.permanent[permanentKey(k)] }) {
			pl.refused[i] = refusal{permanent: true}
			continue
		}
		if rf.Share <= 0 || p.rng.Float64() >= rf.Share {
			continue
		}
		perm := perRecordPermanent && rf.Permanent > 0 && p.rng.Float64() < rf.Permanent
		if perm {
			for _, k := range keys {
				p.permanent[permanentKey(k)] = true
			}
		}
		pl.refused[i] = refusal{permanent: perm}
	}
	return pl
}

// frozenFor reports whether a request of worker is held by a freeze, and
// the channel closed at the thaw.
func (p *Proxy) frozenNow(worker string) (bool, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.frozen {
		return false, nil
	}
	return len(p.frozenFor) == 0 || p.frozenFor[worker], p.thaw
}

// hold holds a request before it is forwarded: by a freeze (until thawed)
// and by its planned latency. It returns false when the client gave up
// meanwhile (the request is then never forwarded).
func (p *Proxy) hold(ctx context.Context, worker string, d time.Duration) bool {
	for {
		frozen, thaw := p.frozenNow(worker)
		if !frozen {
			break
		}
		p.count(func(s *Stats) { s.Frozen++ })
		select {
		case <-thaw:
		case <-ctx.Done():
			p.count(func(s *Stats) { s.Abandoned++ })
			return false
		}
	}
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		p.count(func(s *Stats) { s.Abandoned++ })
		return false
	}
}

// waitAnswer holds an answer for d (the client may be gone: nothing to do
// then).
func waitAnswer(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// upstream sends body to base with r's method, path and headers; it
// returns the answer read whole.
// forwardKept sends the batch request req to the destination with only the
// kept entries in its list field (the refused ones are answered by the
// proxy); ok false: the destination could not be reached and w has a 503.
func (p *Proxy) forwardKept(w http.ResponseWriter, r *http.Request, req map[string]json.RawMessage, field string, keep []json.RawMessage) (int, http.Header, []byte, bool) {
	kb, _ := json.Marshal(keep)
	req[field] = kb
	fb, _ := json.Marshal(req)
	p.count(func(s *Stats) { s.Forwarded++ })
	st, h, b, err := p.upstream(r.Context(), r, p.cfg.Dest, fb)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return 0, nil, nil, false
	}
	return st, h, b, true
}

func (p *Proxy) upstream(ctx context.Context, r *http.Request, base string, body []byte) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, r.Method, base+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("sinkfault upstream request: %w", err)
	}
	for k, vs := range r.Header {
		if k == "Content-Length" || k == "Connection" {
			continue
		}
		req.Header[k] = vs
	}
	req.ContentLength = int64(len(body))
	resp, err := p.hc.Do(req)
	if err != nil {
		p.count(func(s *Stats) { s.UpstreamErrs++ })
		return 0, nil, nil, fmt.Errorf("sinkfault upstream %s: %w", base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		p.count(func(s *Stats) { s.UpstreamErrs++ })
		return 0, nil, nil, fmt.Errorf("sinkfault upstream %s answer: %w", base, err)
	}
	return resp.StatusCode, resp.Header, b, nil
}

func writeAnswer(w http.ResponseWriter, status int, h http.Header, body []byte) {
	for k, vs := range h {
		if k == "Content-Length" || k == "Connection" || k == "Transfer-Encoding" {
			continue
		}
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// forwardRaw forwards a request that is not the sink's, untouched. An
// unreachable engine (sqs-down) answers 503, which the SDK retries.
func (p *Proxy) forwardRaw(w http.ResponseWriter, r *http.Request, base string, body []byte) {
	status, h, b, err := p.upstream(r.Context(), r, base, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	writeAnswer(w, status, h, b)
}

func (p *Proxy) stamp(keys []Key) {
	now := time.Now().UnixNano()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range keys {
		p.stamps[k] = append(p.stamps[k], now)
	}
	p.stats.Entries += int64(len(keys))
}

func jsonError(w http.ResponseWriter, status int, contentType, typ, msg string, sender bool) {
	b, _ := json.Marshal(map[string]string{"__type": typ, "message": msg})
	w.Header().Set("Content-Type", contentType)
	if contentType == sqsContentType {
		fault := "Receiver"
		if sender {
			fault = "Sender"
		}
		w.Header().Set("x-amzn-query-error", typ[strings.LastIndexByte(typ, '#')+1:]+";"+fault)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

const (
	sqsContentType     = "application/x-amz-json-1.0"
	kinesisContentType = "application/x-amz-json-1.1"
)

// Refusal codes. SQS: a transient entry failure is not the sender's fault
// (throttled, internal error); a permanent one is (the entry itself is
// refused). Kinesis has per-record transient codes only; a permanent
// refusal is the whole request's 400.
const (
	CodeThrottled       = "RequestThrottled"
	CodeInternal        = "InternalError"
	CodeInvalid         = "InvalidParameterValue"
	CodeKinesisThrottle = "ProvisionedThroughputExceededException"
	CodeKinesisDenied   = "AccessDeniedException"
)

type sqsEntry struct {
	ID                string                                  `json:"Id"`
	Body              string                                  `json:"MessageBody"`
	MessageAttributes map[string]struct{ StringValue string } `json:"MessageAttributes"`
}

// keys are the record keys of the entry's envelopes.
func (e sqsEntry) keys() []Key {
	return keysOf(e.Body, e.MessageAttributes[consume.ContentTypeAttribute].StringValue)
}

// permanentKey is the key a permanent refusal is remembered by: whatever
// the tenure and worker.
func permanentKey(k Key) Key { return Key{Session: k.Session, Seq: k.Seq, Sub: k.Sub} }

func (p *Proxy) sqsBatch(w http.ResponseWriter, r *http.Request, body []byte) {
	var req map[string]json.RawMessage
	var raws []json.RawMessage // the entries as sent (FIFO group and deduplication ids kept)
	if json.Unmarshal(body, &req) != nil || json.Unmarshal(req["Entries"], &raws) != nil {
		p.forwardRaw(w, r, p.cfg.Dest, body)
		return
	}
	entries := make([]sqsEntry, len(raws))
	keys := make([][]Key, len(entries))
	byID := map[string][]Key{}
	for i := range raws {
		_ = json.Unmarshal(raws[i], &entries[i])
		keys[i] = entries[i].keys()
		byID[entries[i].ID] = keys[i]
	}
	worker := ""
	if len(keys) > 0 {
		worker = keys[0][0].Worker
	}
	pl := p.draw(keys, true)
	if !p.hold(r.Context(), worker, pl.holdReq) {
		return
	}
	type failed struct {
		ID          string `json:"Id"`
		Code        string `json:"Code"`
		Message     string `json:"Message"`
		SenderFault bool   `json:"SenderFault"`
	}
	var refusedList []failed
	var keep []json.RawMessage
	for i, e := range entries {
		rf, ok := pl.refused[i]
		if !ok {
			keep = append(keep, raws[i])
			continue
		}
		f := failed{ID: e.ID, Code: CodeThrottled, Message: "refused by the chaos sink proxy (transient)"}
		switch {
		case rf.permanent:
			f.Code, f.Message, f.SenderFault = CodeInvalid, "refused by the chaos sink proxy (permanent)", true
			p.count(func(s *Stats) { s.Permanent++ })
		default:
			if i%2 == 1 {
				f.Code = CodeInternal
			}
			p.count(func(s *Stats) { s.Transient++ })
		}
		refusedList = append(refusedList, f)
	}
	var ans struct {
		Successful []json.RawMessage `json:"Successful"`
		Failed     []json.RawMessage `json:"Failed"`
	}
	status, h := http.StatusOK, http.Header{"Content-Type": {sqsContentType}}
	if len(keep) > 0 {
		st, hh, b, ok := p.forwardKept(w, r, req, "Entries", keep)
		if !ok {
			return
		}
		if st != http.StatusOK || json.Unmarshal(b, &ans) != nil {
			writeAnswer(w, st, hh, b)
			return
		}
		var stored []Key
		for _, s := range ans.Successful {
			var x struct{ Id string }
			if json.Unmarshal(s, &x) == nil {
				stored = append(stored, byID[x.Id]...)
			}
		}
		p.stamp(stored)
		status, h = st, hh
	}
	for _, f := range refusedList {
		b, _ := json.Marshal(f)
		ans.Failed = append(ans.Failed, b)
	}
	if ans.Successful == nil {
		ans.Successful = []json.RawMessage{}
	}
	if ans.Failed == nil {
		ans.Failed = []json.RawMessage{}
	}
	out, _ := json.Marshal(ans)
	waitAnswer(r.Context(), pl.holdAnswer)
	writeAnswer(w, status, h, out)
}

func (p *Proxy) sqsSingle(w http.ResponseWriter, r *http.Request, body []byte) {
	var req sqsEntry
	_ = json.Unmarshal(body, &req)
	keys := req.keys()
	pl := p.draw([][]Key{keys}, true)
	if !p.hold(r.Context(), keys[0].Worker, pl.holdReq) {
		return
	}
	if rf, ok := pl.refused[0]; ok {
		if rf.permanent {
			p.count(func(s *Stats) { s.Permanent++ })
			jsonError(w, http.StatusBadRequest, sqsContentType, "com.amazonaws.sqs#"+CodeInvalid, "refused by the chaos sink proxy (permanent)", true)
		} else {
			p.count(func(s *Stats) { s.Transient++ })
			jsonError(w, http.StatusInternalServerError, sqsContentType, "com.amazonaws.sqs#"+CodeInternal, "refused by the chaos sink proxy (transient)", false)
		}
		return
	}
	p.count(func(s *Stats) { s.Forwarded++ })
	st, h, b, err := p.upstream(r.Context(), r, p.cfg.Dest, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if st == http.StatusOK {
		p.stamp(keys)
	}
	waitAnswer(r.Context(), pl.holdAnswer)
	writeAnswer(w, st, h, b)
}

type kinesisRecord struct {
	Data []byte `json:"Data"`
}

// recordKeys are the keys of a Kinesis record's messages: one for a plain
// record, one per user record of a KPL aggregated one (kinesissink).
func recordKeys(data []byte) []Key { return envelopeKeys(consume.FromKinesis(data)) }

func (p *Proxy) kinesisPut(w http.ResponseWriter, r *http.Request, body []byte) {
	var req map[string]json.RawMessage
	var recs []json.RawMessage
	if json.Unmarshal(body, &req) != nil || json.Unmarshal(req["Records"], &recs) != nil {
		p.forwardRaw(w, r, p.cfg.Dest, body)
		return
	}
	// A record is one entry of the draw (msgs: its messages, several in a
	// record the sink aggregated), like an SQS pack; keys: its first.
	keys := make([]Key, len(recs))
	msgs := make([][]Key, len(recs))
	total := 0
	for i, raw := range recs {
		var kr kinesisRecord
		_ = json.Unmarshal(raw, &kr) // Data is base64 in JSON: []byte decodes it
		msgs[i] = recordKeys(kr.Data)
		keys[i] = msgs[i][0]
		total += len(msgs[i])
	}
	worker := ""
	if len(keys) > 0 {
		worker = keys[0].Worker
	}
	// A permanent refusal is the whole request's (Kinesis has no
	// per-record permanent code): drawn once per request.
	pl := p.draw(msgs, false)
	permanent := false
	p.mu.Lock()
	if rf := p.refuse; rf.Share > 0 && rf.Permanent > 0 && p.rng.Float64() < rf.Share*rf.Permanent {
		permanent = true
		for _, ks := range msgs {
			for _, k := range ks {
				p.permanent[permanentKey(k)] = true
			}
		}
	}
	for i, ks := range msgs {
		if pl.refused[i].permanent {
			permanent = true // a record refused permanently before
		}
		for _, k := range ks {
			if p.permanent[permanentKey(k)] {
				permanent = true // a message refused permanently before, now in another record
			}
		}
	}
	p.mu.Unlock()
	if !p.hold(r.Context(), worker, pl.holdReq) {
		return
	}
	if permanent {
		p.count(func(s *Stats) { s.PermanentReqs++; s.Permanent += int64(total) })
		jsonError(w, http.StatusBadRequest, kinesisContentType, CodeKinesisDenied, "refused by the chaos sink proxy (permanent)", true)
		return
	}
	var keep []json.RawMessage
	var keepKeys [][]Key
	for i, raw := range recs {
		if _, ok := pl.refused[i]; ok {
			continue
		}
		keep = append(keep, raw)
		keepKeys = append(keepKeys, msgs[i])
	}
	type result struct {
		SequenceNumber string `json:"SequenceNumber,omitempty"`
		ShardID        string `json:"ShardId,omitempty"`
		ErrorCode      string `json:"ErrorCode,omitempty"`
		ErrorMessage   string `json:"ErrorMessage,omitempty"`
	}
	var ans struct {
		FailedRecordCount int      `json:"FailedRecordCount"`
		Records           []result `json:"Records"`
		EncryptionType    string   `json:"EncryptionType,omitempty"`
	}
	status, h := http.StatusOK, http.Header{"Content-Type": {kinesisContentType}}
	if len(keep) > 0 {
		st, hh, b, ok := p.forwardKept(w, r, req, "Records", keep)
		if !ok {
			return
		}
		if st != http.StatusOK || json.Unmarshal(b, &ans) != nil || len(ans.Records) != len(keep) {
			writeAnswer(w, st, hh, b)
			return
		}
		var stored []Key
		for i, res := range ans.Records {
			if res.ErrorCode == "" {
				stored = append(stored, keepKeys[i]...)
			}
		}
		p.stamp(stored)
		status, h = st, hh
	}
	merged := make([]result, 0, len(recs))
	next := 0
	for i := range recs {
		if _, ok := pl.refused[i]; ok {
			merged = append(merged, result{ErrorCode: CodeKinesisThrottle, ErrorMessage: "refused by the chaos sink proxy (transient)"})
			p.count(func(s *Stats) { s.Transient += int64(len(msgs[i])) })
			continue
		}
		merged = append(merged, ans.Records[next])
		next++
	}
	ans.Records = merged
	ans.FailedRecordCount = 0
	for _, res := range merged {
		if res.ErrorCode != "" {
			ans.FailedRecordCount++
		}
	}
	out, _ := json.Marshal(ans)
	waitAnswer(r.Context(), pl.holdAnswer)
	writeAnswer(w, status, h, out)
}
