// The sessions table at the end: after the last fault (end-ownership) and
// after every worker's graceful shutdown (release, and no checkpoint ahead
// of the sink: no-loss).

package chaos

import (
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// checkTable reads the two snapshots of the sessions table: sessions with
// their checkpoints, and worker records.
func (j *judge) checkTable() {
	running := func(id string, at time.Time) (known, up bool) {
		inc := j.inc[id]
		if inc == nil {
			return false, false
		}
		return true, inc.Ended.IsZero() || inc.Ended.After(at)
	}
	s := j.ev.Settled
	for _, r := range s.Rows {
		v := j.view(r.Session)
		want := v.startedAt(s.At)
		if (r.State == schema.StateStarted) != want {
			j.violate(CheckEndOwners, r.Session, s.At.UnixNano(), "the table says %s, the harness's last acknowledged request says otherwise", r.State)
		}
		if r.Owner != "" {
			rec, ok := s.worker(r.Owner)
			known, up := running(r.Owner, s.At)
			switch {
			case !ok || !known:
				j.violate(CheckEndOwners, r.Session, s.At.UnixNano(), "owned by %q (epoch %d): no such worker record or process", r.Owner, r.Epoch)
				continue
			case rec.State != schema.WorkerAlive:
				j.violate(CheckEndOwners, r.Session, s.At.UnixNano(), "owned by the %s worker %q (epoch %d) after the last fault: nobody took it over", rec.State, r.Owner, r.Epoch)
				continue
			case !up:
				j.violate(CheckEndOwners, r.Session, s.At.UnixNano(), "owned by %q (epoch %d), whose process ended, yet its record says ALIVE", r.Owner, r.Epoch)
				continue
			}
		}
		if r.orphan() {
			j.violate(CheckEndOwners, r.Session, s.At.UnixNano(), "STARTED but owned by no worker after the last fault")
		}
	}
	for _, w := range s.Workers {
		known, up := running(w.ID, s.At)
		switch {
		case !known:
			j.violate(CheckEndOwners, "", s.At.UnixNano(), "a worker record %q (%s) no process of the run had", w.ID, w.State)
		case up && w.State != schema.WorkerAlive:
			j.violate(CheckEndOwners, "", s.At.UnixNano(), "%s is running but its record says %s (declared by %q)", w.ID, w.State, w.DeclaredBy)
		case !up && w.State == schema.WorkerAlive:
			j.violate(CheckEndOwners, "", s.At.UnixNano(), "%s ended (%s) but its record still says ALIVE after the last fault: nobody declared it dead", w.ID, j.inc[w.ID].End)
		}
	}
	f := j.ev.Final
	for _, r := range f.Rows {
		v := j.view(r.Session)
		if r.Owner != "" {
			j.violate(CheckRelease, r.Session, f.At.UnixNano(), "still owned by %q (epoch %d) after every worker stopped gracefully (want lease_owner absent)", r.Owner, r.Epoch)
		}
		if len(v.seen) == 0 {
			continue
		}
		switch {
		case r.LastSeq == nil:
			if r.State == schema.StateStarted {
				j.violate(CheckRelease, r.Session, f.At.UnixNano(), "no checkpoint, %d delivered", v.maxD)
			}
		case *r.LastSeq > v.maxHandled():
			j.violate(CheckNoLoss, r.Session, f.At.UnixNano(), "checkpoint %d ahead of the highest seq delivered %d: seqs in between would never be delivered", *r.LastSeq, v.maxHandled())
		case r.State == schema.StateStarted && *r.LastSeq < v.maxHandled():
			j.violate(CheckRelease, r.Session, f.At.UnixNano(), "final checkpoint %d behind the highest seq delivered %d after a graceful shutdown", *r.LastSeq, v.maxHandled())
		}
	}
	for _, inc := range j.ev.Incarnations {
		rec, ok := f.worker(inc.ID)
		want := schema.WorkerLeft
		if inc.End == "kill-9" || inc.End == "dead" || inc.End == "alive" || inc.End == "exited" {
			want = schema.WorkerDead
		}
		if !ok || rec.State != want {
			got := "no record"
			if ok {
				got = rec.State
			}
			j.violate(CheckRelease, "", f.At.UnixNano(), "%s (%s) ended with its record %s, want %s", inc.ID, inc.End, got, want)
		}
		switch inc.End {
		case "sigterm", "shutdown":
			if inc.Exit != "0" {
				j.violate(CheckRelease, "", inc.Ended.UnixNano(), "%s exited %q after SIGTERM (want 0 within the shutdown deadline)", inc.ID, inc.Exit)
			}
		case "exited":
			j.violate(CheckRelease, "", inc.Ended.UnixNano(), "%s exited without being asked to (%s)", inc.ID, inc.Exit)
		}
	}
}
