// Sessions on a source that cannot replay, with a hot standby and without
// (the control group): which sessions, the fields they start with, and the
// fallback when the API does not take the standby field.

package chaos

import "strings"

// Source kinds of a session whose source cannot replay (Action.Source).
const (
	// SourceNoSeq: seq_mode none on the feed's flat shape; the worker
	// numbers the messages, the feed's "seq" rides in the data.
	SourceNoSeq = "noseq"
	// SourceLive: the seq field, resume switched off (no resume query
	// parameter): a reconnect starts live.
	SourceLive = "live"
)

// sourcePlan is how one session's source starts: Source "" is the feed
// with resume.
type sourcePlan struct {
	Source  string
	Standby bool
}

// sourceOf is session id's source plan, drawn at its first start and the
// same at every re-start: by the order of first starts n, offset by the
// seed (k = n + seed, as plannedSession), a session that is not planned is
// a standby one when (k+1) is a multiple of Config.StandbyEvery, a control
// one when (k+1) mod 2 × StandbyEvery is StandbyEvery / 2; each group takes
// SourceNoSeq and SourceLive by turns.
func (r *runner) sourceOf(id string) sourcePlan {
	if p, ok := r.sources[id]; ok {
		return p
	}
	n := int64(len(r.sources))
	planned := r.plannedSession(id)
	var p sourcePlan
	if every := int64(r.cfg.StandbyEvery); every > 0 && !planned {
		k := n + r.cfg.Seed + 1
		turn := func(count *int) string {
			*count++
			if *count%2 == 1 {
				return SourceNoSeq
			}
			return SourceLive
		}
		switch {
		case mod(k, every) == 0:
			p = sourcePlan{Source: turn(&r.nStandby), Standby: true}
		case mod(k, 2*every) == every/2:
			p = sourcePlan{Source: turn(&r.nControl)}
		}
	}
	r.sources[id] = p
	return p
}

// replayableIDs are the STARTED sessions whose source replays (the
// source-poison picks: its check follows a poisoned seq by the envelope's).
func (r *runner) replayableIDs() []string {
	var out []string
	for _, id := range r.startedIDs() {
		if r.sourceOf(id).Source == "" {
			out = append(out, id)
		}
	}
	return out
}

func mod(a, b int64) int64 { return (a%b + b) % b }

// sourceFields are the start fields of p: the source's (a nil value drops
// the stack's default field: devstack.StartSessionWith) and, for a standby
// session while the API takes them, the standby and a checkpoint interval
// (a source that cannot replay writes no periodic checkpoint by default;
// the standby's window starts after the owner's checkpoint).
func (r *runner) sourceFields(p sourcePlan) map[string]any {
	f := map[string]any{}
	switch p.Source {
	case SourceNoSeq:
		f["seq_mode"], f["seq_field"], f["resume_query_param"] = "none", nil, nil
	case SourceLive:
		f["resume_query_param"] = nil
	}
	if p.Standby && r.standbyOn {
		f["standby"] = map[string]any{"enabled": true}
		f["checkpoint_every"] = r.cfg.Stack.Worker.CheckpointEvery.String()
	}
	return f
}

// standbyRefused reports whether an API refusal's body is about the
// standby field: then the run goes on without standbys (said, and stated
// in the settings), its sessions on the same sources.
func standbyRefused(body string) bool { return strings.Contains(body, "standby") }
