//go:build fleetsim

// The ECS operations a scenario plays: a rolling deploy, a scale-out, a
// scale-in (the tasks to stop picked as ECS picks them) and the loss of an
// AZ with its replacements.

package fleetsim

import (
	"fmt"
	"slices"
	"time"
)

// opDeadline bounds a deploy or a scale-out in virtual time: ECS's
// circuit breaker would fail one whose tasks never turn healthy; the
// simulator reports it instead of waiting forever.
const opDeadline = time.Hour

// Deploy plays ECS's rolling update of the whole service with r: every
// running task replaced by a new one. ECS starts replacements while the
// tasks RUNNING or PENDING stay within MaxPercent of the desired count
// (at 100/200 all of them at once, as the launch quota allows), and stops
// old tasks (SIGTERM, SIGKILL after the stop timeout) while the healthy
// ones (old ones not stopped, new ones registered) stay at least
// MinHealthyPercent of it. It returns once the last old task is gone and
// every replacement is healthy; the deploy's length is up to the last old
// task gone.
func (fl *Fleet) Deploy(r Rolling) error {
	old := fl.Running()
	desired := len(old)
	most := desired * r.MaxPercent / 100
	least := (desired*r.MinHealthyPercent + 99) / 100
	if desired == 0 || most <= desired && least >= desired {
		return fmt.Errorf("fleetsim: deploy of %d tasks at %d%%/%d%%: nothing can start or stop", desired, r.MinHealthyPercent, r.MaxPercent)
	}
	ts := fl.newTasks("deploy", r.StopTimeout)
	ts.op.Tasks = desired
	fl.Record.fault(Fault{Kind: "deploy", Workers: ids(old), At: time.Now()})
	left := old // old tasks not yet stopped
	var gone time.Time
	for start := time.Now(); ; {
		now := time.Now()
		if now.Sub(start) > opDeadline {
			ts.abandon()
			return fmt.Errorf("fleetsim: deploy not done after %s: %d old tasks left, %d of %d new healthy", opDeadline, len(left)+len(ts.stop), ts.healthy(), desired)
		}
		if err := ts.startDue(now); err != nil {
			ts.abandon()
			return err
		}
		ts.killDue(now)
		if n := min(desired-len(ts.pending)-len(ts.started), most-len(left)-len(ts.pending)-len(ts.started)); n > 0 {
			ts.request(n)
		}
		if k := min(len(left), len(left)+ts.healthy()-least); k > 0 {
			stop := spread(left, k)
			left = slices.DeleteFunc(left, func(m *Member) bool { return slices.Contains(stop, m) })
			ts.term(stop)
		}
		if len(left) == 0 && len(ts.stop) == 0 {
			if gone.IsZero() {
				gone = ts.lastEnd
			}
			if len(ts.pending) == 0 && ts.healthy() == desired {
				ts.done(gone)
				return nil
			}
		}
		ts.wait()
	}
}

// ScaleOut plays ECS raising the desired count by n: n tasks launched
// through the launch quota, placed over the AZs. It returns once every one
// is healthy.
func (fl *Fleet) ScaleOut(n int) error { return fl.launch("scale-out", n) }

// launch is an ECS operation that starts n tasks (a scale-out, the
// replacement of lost ones) and returns once every one is healthy.
func (fl *Fleet) launch(op string, n int) error {
	ts := fl.newTasks(op, 0)
	ts.op.Tasks = n
	ts.request(n)
	for start := time.Now(); len(ts.pending) > 0 || ts.healthy() < n; {
		if time.Since(start) > opDeadline {
			return fmt.Errorf("fleetsim: %s not done after %s: %d of %d tasks healthy", op, opDeadline, ts.healthy(), n)
		}
		if err := ts.startDue(time.Now()); err != nil {
			return err
		}
		if len(ts.pending) == 0 && ts.healthy() == n {
			break
		}
		ts.wait()
	}
	fl.Record.fault(Fault{Kind: "add", Workers: ids(ts.started), At: fl.t0.Add(time.Duration(ts.op.At * float64(time.Second)))})
	ts.done(time.Now())
	return nil
}

// ScaleIn plays ECS lowering the desired count by n: n running tasks picked
// as ECS does (spread, below) get SIGTERM at once and SIGKILL at stop if
// they have not exited by then. It returns once every one is gone.
func (fl *Fleet) ScaleIn(n int, stop time.Duration) error {
	r := fl.Running()
	if n <= 0 || n >= len(r) {
		return fmt.Errorf("fleetsim: scale in by %d of %d running", n, len(r))
	}
	ts := fl.newTasks("scale-in", stop)
	ts.op.Tasks = n
	ts.term(spread(r, n))
	for len(ts.stop) > 0 {
		ts.killDue(time.Now())
		ts.wait()
	}
	ts.done(ts.lastEnd)
	return nil
}

// spread picks k of ms as ECS's service scheduler picks the tasks to stop:
// keeping the AZs balanced, each from the AZ with the most of them (the
// first on a tie); within an AZ ECS documents no order for Fargate: the
// newest task (the last started) goes first.
func spread(ms []*Member, k int) []*Member {
	by := map[int][]*Member{}
	azs := 0
	for _, m := range ms {
		by[m.AZ] = append(by[m.AZ], m)
		azs = max(azs, m.AZ+1)
	}
	var out []*Member
	for range min(k, len(ms)) {
		best := -1
		for az := range azs {
			if best < 0 || len(by[az]) > len(by[best]) {
				best = az
			}
		}
		l := by[best]
		out = append(out, l[len(l)-1])
		by[best] = l[:len(l)-1]
	}
	return out
}

// KillAZ kills every running task of the first AZ at once (the loss of one
// availability zone of three: a third of the workers), and ECS's service
// scheduler, keeping the desired count, launches as many replacements in
// the other AZs ("replace": through the launch quota, a launch time
// later). The survivors take what they have room for (WSFLEET_MAX_SESSIONS)
// at once; a fleet too full to absorb a third of its sessions waits for
// the replacements. It returns once they are healthy.
func KillAZ(fl *Fleet) error {
	var in []*Member
	for _, m := range fl.Running() {
		if m.AZ == 0 {
			in = append(in, m)
		}
	}
	if len(in) == 0 {
		return fmt.Errorf("fleetsim: kill an AZ: no worker running in it")
	}
	fl.mu.Lock()
	fl.ecs.down[0] = true
	fl.mu.Unlock()
	fl.Kill(in...)
	return fl.launch("replace", len(in))
}

// DeployStep is a scenario step: Fleet.Deploy with r.
func DeployStep(r Rolling) func(*Fleet) error {
	return func(fl *Fleet) error { return fl.Deploy(r) }
}
