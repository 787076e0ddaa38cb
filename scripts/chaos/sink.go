// What an AWS sink adds: the destination's records and the workers' logged
// skips and releases as evidence, and the sink faults injected (sinkStep).

package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/scripts/sinkfault"
)

// Skip is one message the worker skipped after the sink refused it
// permanently (on_sink_refusal "skip"), as its log says.
type Skip struct {
	Session string `json:"session"`
	Seq     int64  `json:"seq"`
	Sub     int64  `json:"sub,omitempty"`
	Epoch   int64  `json:"epoch"`
	Worker  string `json:"worker"`
	AtNs    int64  `json:"t"`
}

// Release is one "lease released" or "session handed off to rebalance"
// line of a worker's log: the last_seq it released (or handed off) at.
type Release struct {
	Session string `json:"session"`
	Worker  string `json:"worker"`
	Epoch   int64  `json:"epoch,omitempty"`
	LastSeq int64  `json:"last_seq"`
	Message string `json:"message"`
	AtNs    int64  `json:"t"`
}

// SinkEvidence is what the destination and the sink fault proxy say.
type SinkEvidence struct {
	Sink string `json:"sink"`
	// Messages is how many records the destination held (read by the
	// harness, each message once by its message id / sequence number, each
	// envelope of an SQS pack a record); Broken the messages that were not
	// sink envelopes.
	Messages int64 `json:"messages"`
	Broken   int64 `json:"broken"`
	// Stamped deliveries carry the proxy's stamp (the destination's
	// successful answer reaching the proxy); the others the engine's own
	// (SentTimestamp / ApproximateArrivalTimestamp).
	Stamped   int             `json:"stamped"`
	Unstamped int             `json:"unstamped"`
	Proxy     sinkfault.Stats `json:"proxy"`
	// PermanentlyRefused is how many records the proxy refused
	// permanently (each at every attempt); Refused names them.
	PermanentlyRefused int         `json:"permanently_refused"`
	Refused            []RecordRef `json:"refused,omitempty"`
	// Unknown are records naming a worker no process of the run was.
	Unknown int `json:"unknown_workers"`
	// ReaderErr is the destination reader's error, if any.
	ReaderErr string `json:"reader_error,omitempty"`
}

// RecordRef names a message of a session (its seq and sub).
type RecordRef struct {
	Session string `json:"s"`
	Seq     int64  `json:"q"`
	Sub     int64  `json:"u,omitempty"`
}

// Log messages of the worker the harness reads (workers/streamer).
const (
	skipLogMessage     = "sink refused the message permanently: skipped"
	releaseLogMessage  = "lease released"
	rebalanceLogPrefix = moveLogMessage
)

// readWorkerLog reads a worker log's skipped messages and releases.
func readWorkerLog(path string) (skips []Skip, rels []Release, err error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("worker log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		b := sc.Bytes()
		isSkip := bytes.Contains(b, []byte(skipLogMessage))
		if !isSkip && !bytes.Contains(b, []byte(releaseLogMessage)) && !bytes.Contains(b, []byte(rebalanceLogPrefix)) {
			continue
		}
		var l struct {
			Message string    `json:"message"`
			Session string    `json:"connection_id"`
			Worker  string    `json:"worker_id"`
			Seq     int64     `json:"seq"`
			Sub     int64     `json:"sub"`
			Epoch   int64     `json:"lease_epoch"`
			LastSeq *int64    `json:"last_seq"`
			Time    time.Time `json:"time"`
		}
		if json.Unmarshal(b, &l) != nil || l.Session == "" {
			continue
		}
		switch {
		case l.Message == skipLogMessage:
			skips = append(skips, Skip{Session: l.Session, Seq: l.Seq, Sub: l.Sub, Epoch: l.Epoch, Worker: l.Worker, AtNs: l.Time.UnixNano()})
		case (l.Message == releaseLogMessage || l.Message == moveLogMessage) && l.LastSeq != nil:
			rels = append(rels, Release{Session: l.Session, Worker: l.Worker, Epoch: l.Epoch, LastSeq: *l.LastSeq, Message: l.Message, AtNs: l.Time.UnixNano()})
		}
	}
	if err := sc.Err(); err != nil {
		return skips, rels, fmt.Errorf("worker log %s: %w", path, err)
	}
	return skips, rels, nil
}

// onDest is devstack's OnDest: a record read from the destination, stamped
// with the engine's own arrival time (restamped with the proxy's at the
// end).
func (r *recorder) onDest(d devstack.DestRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d.Broken {
		r.broken++
		return
	}
	del := Delivery{Session: d.ConnectionID, Seq: d.Seq, Sub: d.Sub, Epoch: d.LeaseEpoch, Worker: d.WorkerID, ReceivedAtMs: d.ReceivedAtMs, AtNs: d.AtNs,
		Pos: int64(len(r.all)) + 1, FeedSeq: int64(d.DataSeq)}
	r.all = append(r.all, del)
	if last, ok := r.last[del.Session]; !ok || del.AtNs >= last.AtNs {
		r.last[del.Session] = del
	}
	r.maxSq[del.Session] = max(r.maxSq[del.Session], del.Seq)
	r.onPoison(d)
}

// restamp gives each delivery the proxy's stamp of its record: the copies
// of one record (one key), in the engine's order, take the proxy's stamps
// of that key in order. A copy without a stamp keeps the engine's.
func restamp(dels []Delivery, stamps map[sinkfault.Key][]int64) (out []Delivery, stamped, unstamped int) {
	out = append([]Delivery(nil), dels...)
	idx := map[sinkfault.Key][]int{}
	for i, d := range out {
		k := sinkfault.Key{Session: d.Session, Seq: d.Seq, Sub: d.Sub, Epoch: d.Epoch, Worker: d.Worker}
		idx[k] = append(idx[k], i)
	}
	for k, is := range idx {
		sort.SliceStable(is, func(a, b int) bool { return out[is[a]].AtNs < out[is[b]].AtNs })
		ss := append([]int64(nil), stamps[k]...)
		sort.Slice(ss, func(a, b int) bool { return ss[a] < ss[b] })
		for n, i := range is {
			if n < len(ss) {
				out[i].AtNs = ss[n]
				out[i].Proxy = true
				stamped++
			} else {
				unstamped++
			}
		}
	}
	return out, stamped, unstamped
}

// checkpointsCatchUp waits a checkpoint interval (× 1.1, its jitter) +
// 500 ms after a sink fault's sessions deliver again: a checkpoint follows
// the acknowledgments, which a sink fault held back, and the next fault's
// replay bound (a crash, a partition) assumes a checkpoint at most an
// interval old. Faults run one at a time, each on a settled fleet.
func (r *runner) checkpointsCatchUp(ctx context.Context) error {
	return r.sleep(ctx, time.Duration(float64(r.cfg.Stack.Worker.CheckpointEvery)*1.1)+500*time.Millisecond)
}

// sinkStep runs one sink fault.
func (r *runner) sinkStep(ctx context.Context, s Step) error {
	p := r.st.SinkProxy()
	if p == nil {
		return fmt.Errorf("%s needs an AWS sink (the sink fault proxy)", s.Kind)
	}
	recoverB := time.Duration(r.set.Bounds.SinkRecoverMs) * time.Millisecond
	perm := 0.0
	if r.skip {
		perm = 0.2
	}
	refuse := sinkfault.Refuse{Share: 0.3, Permanent: perm}
	refuseNote := fmt.Sprintf("%.0f %% of the sink's entries refused, %.0f %% of those permanently", refuse.Share*100, refuse.Permanent*100)
	before := p.Stats()
	statsNote := func() string {
		a := p.Stats()
		return fmt.Sprintf("proxy: %d sink request(s), %d held by latency, %d answers held, %d held by a freeze (%d abandoned by their client), %d entries refused transiently, %d permanently",
			a.Requests-before.Requests, a.Delayed-before.Delayed, a.AnswerHeld-before.AnswerHeld, a.Frozen-before.Frozen, a.Abandoned-before.Abandoned,
			a.Transient-before.Transient, a.Permanent-before.Permanent)
	}
	switch s.Kind {
	case KindSinkLatency, KindSinkRefuse, KindSinkFreeze:
		ids := r.startedIDs()
		at := time.Now()
		var note string
		switch s.Kind {
		case KindSinkLatency:
			p.SetLatency(sinkfault.Latency{Share: 0.5, Min: 100 * time.Millisecond, Max: 900 * time.Millisecond, AnswerShare: 0.5})
			note = "half the sink requests held 100–900 ms (half of those after the destination stored them: the answer held)"
		case KindSinkRefuse:
			p.SetRefuse(refuse)
			note = refuseNote
		case KindSinkFreeze:
			p.Freeze()
			note = "every sink request held (connections open)"
		}
		r.say("%s for %v: %s", s.Kind, s.Hold.Round(time.Millisecond), note)
		if err := r.sleep(ctx, s.Hold); err != nil {
			p.Clear()
			return err
		}
		p.Clear()
		end := time.Now()
		seqs := r.rec.maxSeqOf(ids)
		f := r.fault(Fault{Kind: s.Kind, Start: at, End: end, Note: note + "; " + statsNote()})
		n := f.N
		ok, err := r.waitProgress(ctx, ids, seqs, recoverB+2*time.Second)
		if err != nil {
			return err
		}
		r.say("#%d %s lifted after %v (%s); every session delivering new seqs: %s after %v", n, s.Kind, end.Sub(at).Round(time.Millisecond), statsNote(), okText(ok), time.Since(end).Round(time.Millisecond))
		return r.checkpointsCatchUp(ctx)
	case KindSinkFreezeDynamo:
		return r.cutOff(ctx, s, p, cutOffText{
			frozen: "%s: its sink requests and its DynamoDB path frozen, delivering %d session(s); thawed in %v",
			thawed: "thawed",
		}, func() string {
			return "the worker's sink requests and DynamoDB proxy frozen, then thawed; " + statsNote()
		})
	case KindSinkRefuseDynamo:
		ids := r.startedIDs()
		at := time.Now()
		p.SetRefuse(refuse)
		frozen := map[string]*devstack.Worker{}
		for _, w := range r.st.Running() {
			if w.DynamoProxy != nil {
				w.DynamoProxy.Freeze()
				frozen[w.ID()] = w
			}
		}
		r.say("%s: %s; every worker's DynamoDB path frozen for %v (trust lapses, then heartbeats succeed again)", s.Kind, refuseNote, s.Hold.Round(time.Millisecond))
		err := r.sleep(ctx, max(s.Hold-time.Since(at), 0))
		for _, w := range frozen {
			w.DynamoProxy.Thaw()
		}
		if err != nil {
			p.Clear()
			return err
		}
		thawed := time.Now()
		err = r.sleep(ctx, 2*time.Second) // the refusals go on while the sessions come back
		p.Clear()
		if err != nil {
			return err
		}
		seqs := r.rec.maxSeqOf(ids)
		f := r.fault(Fault{Kind: s.Kind, Start: at, End: thawed, Note: fmt.Sprintf("%s (until 2 s after the thaw); %d DynamoDB proxies frozen; %s", refuseNote, len(frozen), statsNote())})
		n := f.N
		// A worker whose counter a watcher read unchanged for a TTL is
		// declared dead: it learns it at its next heartbeat and exits.
		// Wait that long, then start the slots that exited again.
		hb := r.cfg.Stack.Worker.HeartbeatEvery
		if err := r.sleep(ctx, max(time.Until(thawed.Add(r.cfg.Stack.Worker.LeaseTTL+2*hb+time.Second)), 0)); err != nil {
			return err
		}
		var dead []string
		for id, w := range frozen {
			if w.Proc.Running() || w.ID() != id {
				continue
			}
			r.died(id, "dead", w.Proc.ExitErr())
			dead = append(dead, id)
			if _, err := r.restart(ctx, w); err != nil {
				return err
			}
		}
		sort.Strings(dead)
		if len(dead) > 0 {
			r.faults[n-1].Note += "; declared dead and exited: " + strings.Join(dead, ", ")
		}
		ok, err := r.waitProgress(ctx, ids, seqs, recoverB+2*time.Second)
		if err != nil {
			return err
		}
		r.say("#%d DynamoDB paths thawed after %v; workers declared dead: %v; every session delivering new seqs: %s", n, thawed.Sub(at).Round(time.Millisecond), dead, okText(ok))
		return r.checkpointsCatchUp(ctx)
	}
	return fmt.Errorf("unknown sink fault %q", s.Kind)
}
