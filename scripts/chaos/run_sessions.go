// Sessions through the API (start, re-start, stop), the harness's view of
// which are started and who delivers them, and the waits on that view.

package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/testkit/feed"
)

func (r *runner) startedIDs() []string {
	var out []string
	for id, on := range r.started {
		if on {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func (r *runner) stoppedIDs() []string {
	var out []string
	for id, on := range r.started {
		if !on {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// pick draws n of ids with the step's own seed.
func pick(s Step, ids []string, n int) []string {
	c := append([]string(nil), ids...)
	sort.Strings(c)
	rng := rand.New(rand.NewPCG(s.Pick, uint64(s.N)))
	rng.Shuffle(len(c), func(i, j int) { c[i], c[j] = c[j], c[i] })
	return c[:min(n, len(c))]
}

// ownedBy lists the STARTED sessions whose latest delivery (within the
// live window) came from worker id: for progress lines and waits only.
func (r *runner) ownedBy(id string) []string {
	var out []string
	for s, w := range r.rec.owners(r.startedIDs(), liveWindow) {
		if w == id {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// waitMoved waits until every session in ids delivered after since from a
// worker other than not ("" = any worker).
func (r *runner) waitMoved(ctx context.Context, ids []string, since time.Time, not string, timeout time.Duration) (bool, error) {
	return r.waitUntil(ctx, timeout, func() bool {
		last := r.rec.lastOf(ids)
		for _, id := range ids {
			if !r.started[id] {
				continue
			}
			d, ok := last[id]
			if !ok || d.AtNs <= since.UnixNano() || (not != "" && d.Worker == not) {
				return false
			}
		}
		return true
	})
}

// waitProgress waits until every session in ids delivered a seq above
// seqs[id].
func (r *runner) waitProgress(ctx context.Context, ids []string, seqs map[string]int64, timeout time.Duration) (bool, error) {
	return r.waitUntil(ctx, timeout, func() bool {
		now := r.rec.maxSeqOf(ids)
		for _, id := range ids {
			if r.started[id] && now[id] <= seqs[id] {
				return false
			}
		}
		return true
	})
}

func (r *runner) apiStart(ctx context.Context, id, op string, fault int) {
	a := Action{Op: op, Session: id, Fault: fault, At: time.Now(), Planned: r.plannedSession(id)}
	err := r.startSession(ctx, id)
	sp := r.sourceOf(id)
	a.Source, a.Standby = sp.Source, sp.Standby && r.standbyOn
	if err != nil {
		a.Err = err.Error()
		r.say("%s %s: %v", op, id, err)
	} else {
		a.Acked = time.Now()
		r.started[id] = true
	}
	r.actions = append(r.actions, a)
}

// plannedSession reports whether session id starts with planned
// reconnects: every Config.PlannedEvery-th session by its first start
// (the seed offsets which), the same at every re-start.
func (r *runner) plannedSession(id string) bool {
	every := r.cfg.PlannedEvery
	if every <= 0 {
		return false
	}
	if p, ok := r.planned[id]; ok {
		return p
	}
	n := len(r.planned)
	e := int64(every)
	p := ((int64(n)+r.cfg.Seed)%e+e)%e == 0
	r.planned[id] = p
	return p
}

// plannedFields are a planned session's spec fields: a planned reconnect
// before max_connection_age, and at once on the feed's shutdown notice
// ({"e":"serverShutdown"}, not delivered).
func (r *runner) plannedFields() map[string]any {
	return map[string]any{
		"max_connection_age": r.cfg.PlannedAge.String(),
		"reconnect_on":       map[string]any{"match": map[string]any{"path": "e", "equals": feed.ShutdownEvent}},
		"switch_timeout":     r.cfg.PlannedSwitch.String(),
	}
}

// startSession starts id through the API, with on_sink_refusal "skip"
// while the API takes it (the first start that the API refuses for that
// field turns it off for the run: said, and stated in the settings) and,
// for a planned session, its planned reconnects; for a session whose
// source cannot replay (sourceOf), that source and its standby (the first
// start the API refuses for the standby field turns standbys off for the
// run, likewise).
func (r *runner) startSession(ctx context.Context, id string) error {
	extra := map[string]any{}
	if r.plannedSession(id) {
		extra = r.plannedFields()
	}
	sp := r.sourceOf(id)
	for k, v := range r.sourceFields(sp) {
		extra[k] = v
	}
	if r.skip {
		extra["on_sink_refusal"] = "skip"
	}
	if len(extra) == 0 {
		_, err := r.st.StartSession(ctx, id)
		return err
	}
	err := r.st.StartSessionWith(ctx, id, extra)
	var se *devstack.StartError
	if r.skip && errors.As(err, &se) && se.Status == http.StatusBadRequest && strings.Contains(se.Body, "on_sink_refusal") {
		r.skip = false
		r.set.SinkRefusalSkip = false
		r.say("the API does not take on_sink_refusal (%s): sessions start without it, and no permanent refusal is injected", se.Body)
		return r.startSession(ctx, id)
	}
	if sp.Standby && r.standbyOn && errors.As(err, &se) && se.Status == http.StatusBadRequest && standbyRefused(se.Body) {
		r.standbyOn = false
		r.set.StandbyOff = "the API refused the standby field: " + se.Body
		r.say("the API does not take standby (%s): the standby sessions start without one, on the same sources", se.Body)
		return r.startSession(ctx, id)
	}
	return err
}

// unplannedIDs are the STARTED sessions without planned reconnects.
func (r *runner) unplannedIDs() []string {
	var out []string
	for _, id := range r.startedIDs() {
		if !r.plannedSession(id) {
			out = append(out, id)
		}
	}
	return out
}

func (r *runner) apiStop(ctx context.Context, id string, fault int) {
	a := Action{Op: "stop", Session: id, Fault: fault, At: time.Now(), Epoch: -1}
	if _, err := r.st.API.Stop(ctx, id); err != nil {
		a.Err = err.Error()
		r.say("stop %s: %v", id, err)
	} else {
		a.Acked = time.Now()
		r.started[id] = false
		if s, err := r.st.API.Get(ctx, id); err == nil {
			a.Epoch = s.LeaseEpoch
		}
	}
	r.actions = append(r.actions, a)
}

func (r *runner) newSession() string {
	r.newN++
	return fmt.Sprintf("n-%03d", r.newN)
}
