//go:build fleetsim

// One ECS operation in progress (tasks): launches requested through the
// quota and started when due, tasks stopped (SIGTERM, SIGKILL at the stop
// timeout) and their exits awaited, and the operation's figures.

package fleetsim

import (
	"cmp"
	"context"
	"slices"
	"time"
)

// launch is a task requested and not yet started.
type launch struct {
	az    int
	ready time.Time
}

// tasks is one ECS operation in progress: the launches it requested, the
// tasks it started, the tasks it stopped (SIGTERM, SIGKILL at the stop
// timeout). Driven from the scenario's goroutine only.
type tasks struct {
	fl      *Fleet
	op      ECSOp
	timeout time.Duration
	pending []launch
	started []*Member
	stop    map[*Member]time.Time // SIGKILL due
	termed  map[*Member]time.Time
	// killed: when each SIGKILLed task was killed, its end for ECS (the
	// simulated process's goroutines unwind after it: a queue poll in
	// flight runs to its wait, up to 10 s).
	killed map[*Member]time.Time
	// lastEnd is the latest end of a stopped task.
	lastEnd time.Time
	exits   chan exit
}

type exit struct {
	m   *Member
	err error
}

func (fl *Fleet) newTasks(op string, timeout time.Duration) *tasks {
	return &tasks{fl: fl, op: ECSOp{Op: op, At: time.Since(fl.t0).Seconds()}, timeout: timeout,
		stop: map[*Member]time.Time{}, termed: map[*Member]time.Time{}, killed: map[*Member]time.Time{}, exits: make(chan exit)}
}

// request asks ECS for n tasks: each placed in an AZ now, through the
// launch quota, started a launch time later.
func (ts *tasks) request(n int) {
	fl := ts.fl
	now := time.Now()
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for range n {
		az := fl.placeLocked()
		fl.ecs.pending[az]++
		c := fl.ecs.cfg
		d := c.LaunchMin + time.Duration(fl.ecs.rnd.Int64N(int64(c.LaunchMax-c.LaunchMin)/int64(time.Millisecond)+1))*time.Millisecond
		ts.pending = append(ts.pending, launch{az: az, ready: now.Add(fl.ecs.reserve(now) + d)})
	}
}

// startDue starts the launches whose time has come (the real worker's New
// and Run, in their AZ).
func (ts *tasks) startDue(now time.Time) error {
	var rest []launch
	for _, l := range ts.pending {
		if l.ready.After(now) {
			rest = append(rest, l)
			continue
		}
		ts.fl.mu.Lock()
		ts.fl.ecs.pending[l.az]--
		ts.fl.mu.Unlock()
		m, err := ts.fl.addWorkerAZ(nil, l.az)
		if err != nil {
			return err
		}
		ts.started = append(ts.started, m)
	}
	ts.pending = rest
	return nil
}

// healthy is how many of the tasks started have registered (their worker
// record ALIVE: the simulator's look at the table, unmetered).
func (ts *tasks) healthy() int {
	n := 0
	for _, m := range ts.started {
		if ts.fl.registered(m) {
			n++
		}
	}
	return n
}

func (fl *Fleet) registered(m *Member) bool {
	rec, err := fl.Table.Mem().GetWorker(context.Background(), m.ID)
	return err == nil && rec.Alive()
}

// term SIGTERMs ms at once (one "term" fault: the sessions they own must
// deliver again) and schedules their SIGKILL at the stop timeout.
func (ts *tasks) term(ms []*Member) {
	if len(ms) == 0 {
		return
	}
	now := time.Now()
	ts.fl.Record.fault(Fault{Kind: "term", Workers: ids(ms), At: now, Sessions: ts.fl.ownedBy(ms)})
	for _, m := range ms {
		ts.stop[m] = now.Add(ts.timeout)
		ts.termed[m] = now
		m.cancel()
		// The scenario's goroutine receives every exit before it returns
		// (it waits for ts.stop to empty).
		go func() { ts.exits <- exit{m: m, err: <-m.done} }()
	}
}

// killDue SIGKILLs the stopped tasks still running at their stop timeout,
// at once (one "kill" fault).
func (ts *tasks) killDue(now time.Time) {
	var due []*Member
	for m, at := range ts.stop {
		if _, gone := ts.killed[m]; !at.After(now) && !gone {
			due = append(due, m)
		}
	}
	if len(due) == 0 {
		return
	}
	slices.SortFunc(due, func(a, b *Member) int { return cmp.Compare(a.ID, b.ID) })
	ts.fl.Record.fault(Fault{Kind: "kill", Workers: ids(due), At: now, Sessions: ts.fl.ownedBy(due)})
	for _, m := range due {
		ts.killed[m] = now
		m.cutOff()
	}
	ts.op.Killed += len(due)
}

// wait blocks until the next of: a stopped task exits, a launch is due, a
// SIGKILL is due, or a second (ECS's scheduler looks again).
func (ts *tasks) wait() {
	next := time.Now().Add(time.Second)
	for _, l := range ts.pending {
		if l.ready.Before(next) {
			next = l.ready
		}
	}
	for m, at := range ts.stop {
		if _, gone := ts.killed[m]; at.Before(next) && !gone {
			next = at
		}
	}
	t := time.NewTimer(time.Until(next))
	defer t.Stop()
	select {
	case e := <-ts.exits:
		ts.exited(e)
	case <-t.C:
	}
	for { // every exit already sent
		select {
		case e := <-ts.exits:
			ts.exited(e)
		default:
			return
		}
	}
}

func (ts *tasks) exited(e exit) {
	end := time.Now()
	if at, ok := ts.killed[e.m]; ok {
		end = at
	}
	e.m.Err, e.m.Ended = e.err, end
	ts.op.LongestStop = max(ts.op.LongestStop, end.Sub(ts.termed[e.m]).Seconds())
	if end.After(ts.lastEnd) {
		ts.lastEnd = end
	}
	delete(ts.stop, e.m)
}

// abandon kills every stopped task still running and awaits their exits
// (an operation that gives up leaves no goroutine behind).
func (ts *tasks) abandon() {
	ts.killDue(time.Now().Add(ts.timeout))
	for len(ts.stop) > 0 {
		ts.exited(<-ts.exits)
	}
}

// done records the operation's figures, its length ending at end.
func (ts *tasks) done(end time.Time) {
	ts.op.Length = end.Sub(ts.fl.t0).Seconds() - ts.op.At
	ts.fl.mu.Lock()
	ts.fl.ecs.ops = append(ts.fl.ecs.ops, ts.op)
	ts.fl.mu.Unlock()
}
