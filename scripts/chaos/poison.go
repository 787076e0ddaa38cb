// The poisoned source (source-poison): some sessions' sources send text
// messages a sink may fail to carry as they are (invalid UTF-8, characters
// SQS refuses) for a while, and what reached the destination of them.

package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/testkit/feed"
)

// poisonEvery: a poisoned session's source sends every poisonEvery-th seq
// poisoned, the others ordinary (a sink's batch mixes them).
const poisonEvery = 2

// poisonKinds are the poisons a source-poison episode gives its sessions,
// in turn (Step.Count is at least their number).
var poisonKinds = []feed.Poison{feed.PoisonUTF8, feed.PoisonForbidden}

// PoisonArrival is one destination record of a poisoned message: the
// poison its payload names (feed.PoisonIn), whether the payload is byte
// for byte what the source sent, and the envelope's form of it
// (sinkfault.FormJSON, FormString, FormB64).
type PoisonArrival struct {
	Session string      `json:"s"`
	Seq     int64       `json:"q"`
	Epoch   int64       `json:"e"`
	Worker  string      `json:"w"`
	Kind    feed.Poison `json:"kind"`
	Intact  bool        `json:"intact"`
	Form    string      `json:"form"`
	AtNs    int64       `json:"t"`
}

// onPoison keeps d when its payload is a poisoned message (r.mu held).
func (r *recorder) onPoison(d devstack.DestRecord) {
	if d.Sub != 0 || len(d.Payload) == 0 {
		return
	}
	kind, intact := feed.PoisonIn(d.Payload, d.Seq)
	if kind == feed.PoisonOff {
		return
	}
	r.poisoned = append(r.poisoned, PoisonArrival{Session: d.ConnectionID, Seq: d.Seq, Epoch: d.LeaseEpoch, Worker: d.WorkerID,
		Kind: kind, Intact: intact, Form: d.Form, AtNs: d.AtNs})
}

func (r *recorder) poisonArrivals() []PoisonArrival {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]PoisonArrival(nil), r.poisoned...)
}

// poisonStep is a source-poison episode: s.Count sessions' sources send
// every poisonEvery-th seq poisoned (each session one of poisonKinds, in
// turn) for s.Hold, then ordinary messages again; every session must
// deliver new seqs within the sink recovery bound after it.
func (r *runner) poisonStep(ctx context.Context, s Step) error {
	fc := r.st.FeedClient
	ids := r.startedIDs()
	sess := pick(s, r.replayableIDs(), s.Count)
	recoverB := time.Duration(r.set.Bounds.SinkRecoverMs) * time.Millisecond
	at := time.Now()
	for i, id := range sess {
		if _, err := fc.SetPoison(ctx, id, poisonKinds[i%len(poisonKinds)], poisonEvery); err != nil {
			return fmt.Errorf("feed poison: %w", err)
		}
	}
	r.say("%s for %v: every %d seq(s) of %d session(s) sent as invalid UTF-8 or characters SQS refuses", s.Kind, s.Hold.Round(time.Millisecond), poisonEvery, len(sess))
	err := r.sleep(ctx, s.Hold)
	var spans []string
	for _, id := range sess {
		sp, perr := fc.SetPoison(context.WithoutCancel(ctx), id, feed.PoisonOff, 1)
		if perr != nil {
			return fmt.Errorf("feed poison off: %w", perr)
		}
		spans = append(spans, fmt.Sprintf("%s %s seqs %d..%d every %d", id, sp.Kind, sp.From, sp.To, sp.Every))
	}
	if err != nil {
		return err
	}
	end := time.Now()
	seqs := r.rec.maxSeqOf(ids)
	f := r.fault(Fault{Kind: s.Kind, Start: at, End: end, Sessions: sess, Note: "poisoned: " + strings.Join(spans, "; ")})
	n := f.N
	ok, err := r.waitProgress(ctx, ids, seqs, recoverB+2*time.Second)
	if err != nil {
		return err
	}
	r.say("#%d the sources poisoned %s for %v; every session delivering new seqs: %s after %v", n, strings.Join(spans, "; "), end.Sub(at).Round(time.Millisecond), okText(ok), time.Since(end).Round(time.Millisecond))
	return r.checkpointsCatchUp(ctx)
}
