// Fault injection: one planned step at a time (kill -9, zombie, partition,
// rolling restart, clock offset, DynamoDB down, SQS down, source drop and
// refusal, churn, scale-out and scale-in; the sink faults: sink.go; the
// poisoned source: poison.go), the
// victim drawn for it, and the fault recorded.

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/scripts/sinkfault"
	"github.com/wsfleet/wsfleet/shared/notify/sqsnotify"
	"github.com/wsfleet/wsfleet/shared/rebalance"
)

func (r *runner) fault(f Fault) *Fault {
	f.N = len(r.faults) + 1
	if f.End.IsZero() {
		f.End = f.Start
	}
	r.faults = append(r.faults, f)
	return &r.faults[len(r.faults)-1]
}

// victim draws, with the step's seed, one of the busiest half of the
// running workers (by the sessions they were delivering a moment ago),
// never one delivering nothing while another delivers: a crash of a worker
// that owns nothing would test nothing.
func (r *runner) victim(s Step) *devstack.Worker {
	ws := r.st.Running()
	n := map[string]int{}
	for _, w := range r.rec.owners(r.startedIDs(), liveWindow) {
		n[w]++
	}
	sort.SliceStable(ws, func(i, j int) bool {
		if a, b := n[ws[i].ID()], n[ws[j].ID()]; a != b {
			return a > b
		}
		return ws[i].Index < ws[j].Index
	})
	top := ws[:max(1, (len(ws)+1)/2)]
	for len(top) > 1 && n[top[len(top)-1].ID()] == 0 {
		top = top[:len(top)-1] // a worker delivering nothing is no victim
	}
	rng := rand.New(rand.NewPCG(s.Pick, 7))
	return top[rng.IntN(len(top))]
}

func (r *runner) bounds() (crash, handoff, claim, outage, reconnect, stop time.Duration) {
	b := r.set.Bounds
	d := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	return d(b.CrashMs), d(b.HandoffMs), d(b.ClaimMs), d(b.OutageMs), d(b.ReconnectMs), d(b.StopMs)
}

func (r *runner) step(ctx context.Context, s Step) error {
	crash, handoff, claim, outage, reconnect, stopB := r.bounds()
	switch s.Kind {
	case KindKill:
		w := r.victim(s)
		id, pid := w.ID(), w.Proc.Pid()
		mine := r.ownedBy(id)
		at := time.Now()
		if err := w.Kill(ctx); err != nil {
			return err
		}
		r.died(id, "kill-9", nil)
		f := r.fault(Fault{Kind: s.Kind, Start: at, Worker: id})
		r.say("#%d kill -9 %s (pid %d), delivering %d session(s)", f.N, id, pid, len(mine))
		ok, err := r.waitMoved(ctx, mine, at, id, crash+3*time.Second)
		if err != nil {
			return err
		}
		r.say("    its sessions delivered by others again: %s after %v", okText(ok), time.Since(at).Round(time.Millisecond))
		nid, err := r.restart(ctx, w)
		f.NewWorker = nid
		return err
	case KindZombie:
		w := r.victim(s)
		id := w.ID()
		mine := r.ownedBy(id)
		at := time.Now()
		if err := w.Pause(); err != nil {
			return err
		}
		r.say("SIGSTOP %s, delivering %d session(s); SIGCONT in %v", id, len(mine), s.Hold.Round(time.Millisecond))
		if err := r.sleep(ctx, s.Hold); err != nil {
			_ = w.Resume()
			return err
		}
		if err := w.Resume(); err != nil {
			return err
		}
		woke := time.Now()
		r.mu.Lock()
		if inc := r.incByID[id]; inc != nil {
			inc.Paused = append(inc.Paused, [2]time.Time{at, woke})
		}
		r.mu.Unlock()
		f := r.fault(Fault{Kind: s.Kind, Start: at, End: woke, Worker: id})
		n := f.N
		ok, err := r.waitMoved(ctx, mine, at, id, max(crash+3*time.Second-time.Since(at), time.Second))
		if err != nil {
			return err
		}
		r.say("#%d SIGCONT %s after %v: its sessions delivered by others: %s", n, id, woke.Sub(at).Round(time.Millisecond), okText(ok))
		nid, err := r.afterDeath(ctx, w, id)
		r.faults[n-1].NewWorker = nid
		return err
	case KindPartition:
		return r.cutOff(ctx, s, nil, cutOffText{
			frozen: "%s cut off from DynamoDB (its proxy frozen; its sources still reachable), delivering %d session(s); thawed in %v",
			thawed: "reaches DynamoDB again",
		}, func() string { return "the worker's DynamoDB proxy frozen, then thawed (held bytes forwarded late)" })
	case KindRolling:
		ws := r.st.Workers()
		for i, w := range ws {
			f, err := r.graceful(ctx, w, s.Kind, handoff)
			if err != nil {
				return err
			}
			f.Note = fmt.Sprintf("%d/%d", i+1, len(ws))
			if err := r.sleep(ctx, 500*time.Millisecond); err != nil {
				return err
			}
		}
	case KindClockOffset:
		w := r.slot(s.Slot)
		w.SetEnv(envClockOffset + "=" + s.Offset.String())
		r.offsets[w.Index] = s.Offset
		f, err := r.graceful(ctx, w, s.Kind, handoff)
		if err != nil {
			return err
		}
		f.OffsetMs = ms(s.Offset)
		r.say("    %s's clock is now %+v off the others' (nothing in the protocol reads it to decide)", f.NewWorker, s.Offset)
	case KindDynamoDown:
		// Frozen, not killed: dynalite maintains its index with separate
		// writes, and a kill between them can leave an item out of the index
		// for good (DynamoDB never does). Frozen, it answers nothing; what
		// the kernel buffered meanwhile is applied when it resumes, late,
		// like a write whose reply was lost.
		at := time.Now()
		if err := r.st.Dynamo.Pause(); err != nil {
			return fmt.Errorf("dynamodb pause: %w", err)
		}
		r.say("DynamoDB frozen (SIGSTOP) for %v", s.Hold)
		if err := r.sleep(ctx, max(s.Hold-time.Since(at), 0)); err != nil {
			_ = r.st.Dynamo.Resume()
			return err
		}
		if err := r.st.Dynamo.Resume(); err != nil {
			return fmt.Errorf("dynamodb resume: %w", err)
		}
		ok, err := r.waitUntil(ctx, 20*time.Second, func() bool {
			c, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err := r.ddb.DescribeTable(c, &dynamodb.DescribeTableInput{TableName: aws.String(r.cfg.Stack.Table)})
			return err == nil
		})
		if err != nil || !ok {
			return fmt.Errorf("dynamodb not answering after its restart (%v)", err)
		}
		back := time.Now()
		f := r.fault(Fault{Kind: s.Kind, Start: at, End: back, Note: "dynalite frozen (SIGSTOP), then SIGCONT"})
		ok, err = r.waitMoved(ctx, r.startedIDs(), back, "", outage+3*time.Second)
		if err != nil {
			return err
		}
		r.say("#%d DynamoDB back after %v; every session delivering again: %s after %v", f.N, back.Sub(at).Round(time.Millisecond), okText(ok), time.Since(back).Round(time.Millisecond))
		// Every session's new tenure resumed from a checkpoint written
		// before the outage, and the next fault's replay bound assumes one
		// at most an interval old (seed 4901: a DynamoDB path freeze 2.2 s
		// after this outage ended took 60 repeats against a bound of 32).
		if err := r.checkpointsCatchUp(ctx); err != nil {
			return err
		}
	case KindSQSDown:
		at := time.Now()
		r.st.SQS.Kill()
		n := len(r.faults) + 1
		r.say("SQS down for %v; churn during it: %d start(s), %d stop(s)", s.Hold.Round(time.Millisecond), s.Count, s.Count)
		if err := r.sleep(ctx, s.Hold/3); err != nil {
			return err
		}
		var touched, fresh []string
		for i := 0; i < s.Count; i++ {
			id := r.newSession()
			r.apiStart(ctx, id, "start", n)
			fresh = append(fresh, id)
		}
		if err := r.sleep(ctx, s.Hold/3); err != nil {
			return err
		}
		for _, id := range pick(s, r.startedIDs(), s.Count) {
			r.apiStop(ctx, id, n)
			touched = append(touched, id)
		}
		if err := r.sleep(ctx, max(s.Hold-time.Since(at), 0)); err != nil {
			return err
		}
		if err := r.st.SQS.Start(); err != nil {
			return fmt.Errorf("sqs restart: %w", err)
		}
		qctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		qs, err := sqsnotify.CreateQueues(qctx, r.sqs, r.cfg.Stack.Queue, 30, 5)
		cancel()
		if err != nil {
			return fmt.Errorf("recreate queues: %w", err)
		}
		if qs.WorkURL != r.st.QueueURL {
			return fmt.Errorf("recreated work queue %s, the stack uses %s", qs.WorkURL, r.st.QueueURL)
		}
		back := time.Now()
		f := r.fault(Fault{Kind: s.Kind, Start: at, End: back, Sessions: append(fresh, touched...), Note: "fauxqs restarted empty; queues recreated"})
		ok, err := r.waitProgress(ctx, fresh, map[string]int64{}, claim+2*time.Second)
		if err != nil {
			return err
		}
		r.say("#%d SQS back after %v; sessions started during the outage delivering: %s", f.N, back.Sub(at).Round(time.Millisecond), okText(ok))
	case KindSourceDrop:
		sess := pick(s, r.startedIDs(), s.Count)
		seqs := r.rec.maxSeqOf(sess)
		at := time.Now()
		for _, id := range sess {
			if _, err := r.st.FeedClient.Drop(ctx, id, s.Abort); err != nil {
				return err
			}
		}
		how := "with a close frame"
		if s.Abort {
			how = "aborting TCP"
		}
		f := r.fault(Fault{Kind: s.Kind, Start: at, Sessions: sess, Note: how})
		ok, err := r.waitProgress(ctx, sess, seqs, reconnect+2*time.Second)
		if err != nil {
			return err
		}
		r.say("#%d the source dropped %d session(s) %s; delivering again: %s after %v", f.N, len(sess), how, okText(ok), time.Since(at).Round(time.Millisecond))
	case KindRefuse:
		sess := pick(s, r.startedIDs(), s.Count)
		at := time.Now()
		for _, id := range sess {
			if err := r.st.FeedClient.SetRefuse(ctx, id, true); err != nil {
				return err
			}
			if _, err := r.st.FeedClient.Drop(ctx, id, false); err != nil {
				return err
			}
		}
		if err := r.sleep(ctx, s.Hold); err != nil {
			return err
		}
		for _, id := range sess {
			if err := r.st.FeedClient.SetRefuse(ctx, id, false); err != nil {
				return err
			}
		}
		end := time.Now()
		seqs := r.rec.maxSeqOf(sess)
		f := r.fault(Fault{Kind: s.Kind, Start: at, End: end, Sessions: sess})
		ok, err := r.waitProgress(ctx, sess, seqs, reconnect+2*time.Second)
		if err != nil {
			return err
		}
		r.say("#%d the source refused %d session(s) for %v; delivering again: %s after %v", f.N, len(sess), end.Sub(at).Round(time.Millisecond), okText(ok), time.Since(end).Round(time.Millisecond))
	case KindSchedule:
		return r.scheduleStep(ctx, s, reconnect)
	case KindChurn:
		n := len(r.faults) + 1
		at := time.Now()
		stops := pick(s, r.startedIDs(), s.Count)
		for _, id := range stops {
			r.apiStop(ctx, id, n)
		}
		var fresh []string
		for i := 0; i < s.Count; i++ {
			id := r.newSession()
			r.apiStart(ctx, id, "start", n)
			fresh = append(fresh, id)
		}
		if err := r.sleep(ctx, stopB+time.Second); err != nil {
			return err
		}
		restarts := pick(s, r.stoppedIDs(), s.Count)
		seqs := r.rec.maxSeqOf(restarts)
		for _, id := range restarts {
			r.apiStart(ctx, id, "restart", n)
		}
		f := r.fault(Fault{Kind: s.Kind, Start: at, End: time.Now(), Sessions: append(append(append([]string(nil), stops...), fresh...), restarts...)})
		for _, id := range fresh {
			seqs[id] = 0
		}
		ok, err := r.waitProgress(ctx, append(fresh, restarts...), seqs, claim+2*time.Second)
		if err != nil {
			return err
		}
		r.say("#%d churn: stopped %v, started %v, re-started %v; delivering: %s", f.N, stops, fresh, restarts, okText(ok))
	case KindScaleOut:
		return r.scaleOut(ctx, s)
	case KindSinkLatency, KindSinkRefuse, KindSinkFreeze, KindSinkFreezeDynamo, KindSinkRefuseDynamo:
		return r.sinkStep(ctx, s)
	case KindSourcePoison:
		return r.poisonStep(ctx, s)
	case KindIndexLag, KindThrottle, KindAmbiguous:
		return r.modelStep(ctx, s)
	case KindScaleIn:
		ws := r.st.Workers()
		if len(ws) < 3 {
			r.say("scale-in skipped: %d worker(s) running (a fault needs survivors)", len(ws))
			return nil
		}
		// One of the busiest workers leaves (as a victim is drawn): a
		// scale-in of a worker holding nothing would test nothing.
		w := r.victim(s)
		f, err := r.terminate(ctx, w, s.Kind, handoff)
		if err != nil {
			return err
		}
		f.Note = fmt.Sprintf("%d → %d workers", len(ws), len(ws)-1)
		if err := r.st.RemoveWorker(w); err != nil {
			return err
		}
		r.removed = append(r.removed, w)
	default:
		return fmt.Errorf("unknown fault kind %q", s.Kind)
	}
	return nil
}

// scaleOut starts one more worker and waits until every running worker is
// within its tolerance of its fair share (by the sessions each delivered
// last), recording when (Fault.End; the start when never).
func (r *runner) scaleOut(ctx context.Context, s Step) error {
	before := len(r.st.Running())
	at := time.Now()
	w, err := r.st.AddWorker(ctx)
	if err != nil {
		return fmt.Errorf("scale-out: %w", err)
	}
	id := r.born(w)
	if err := w.Ready(ctx, 20*time.Second); err != nil {
		return fmt.Errorf("scale-out %s: %w", id, err)
	}
	f := r.fault(Fault{Kind: s.Kind, Start: at, Worker: id, Note: fmt.Sprintf("%d → %d workers", before, before+1)})
	n := f.N
	bound := time.Duration(r.set.Bounds.BalanceMs) * time.Millisecond
	ok, err := r.waitUntil(ctx, bound+5*time.Second, r.balanced)
	if err != nil {
		return err
	}
	f = &r.faults[n-1]
	if ok {
		f.End = time.Now()
	}
	r.say("#%d scale-out: %s joined; every worker within ±10 %% of its share: %s after %v (%d session(s) now on %s)",
		n, id, okText(ok), time.Since(at).Round(time.Millisecond), len(r.ownedBy(id)), id)
	return nil
}

// balanced reports whether every running worker delivers, within its
// tolerance, its fair share of the started sessions (equal capacities),
// and every started session is delivering.
func (r *runner) balanced() bool {
	ids := r.startedIDs()
	owners := r.rec.owners(ids, liveWindow)
	if len(owners) < len(ids) {
		return false
	}
	load := map[string]int{}
	for _, w := range owners {
		load[w]++
	}
	running := map[string]int{}
	for _, w := range r.st.Running() {
		running[w.ID()] = load[w.ID()]
		delete(load, w.ID())
	}
	return len(load) == 0 && rebalance.Balanced(rebalance.Even(running), rebalance.Settings{})
}

// cutOffText is what a cut-off fault says when it freezes and thaws.
type cutOffText struct {
	frozen string // format: worker id, its sessions, the hold
	thawed string // "#n <worker> <thawed> after …"
}

// cutOff freezes the victim's DynamoDB proxy (and, with sink, its sink
// requests) for s.Hold while its sessions move to other workers, thaws,
// records the fault (note, read after the thaw) and follows the worker's
// death: the partition and sink+DynamoDB faults.
func (r *runner) cutOff(ctx context.Context, s Step, sink *sinkfault.Proxy, txt cutOffText, note func() string) error {
	w := r.victim(s)
	id := w.ID()
	if w.DynamoProxy == nil {
		return fmt.Errorf("%s has no DynamoDB proxy (Stack.DynamoProxies)", id)
	}
	mine := r.ownedBy(id)
	at := time.Now()
	if sink != nil {
		sink.Freeze(id)
	}
	w.DynamoProxy.Freeze()
	r.say(txt.frozen, id, len(mine), s.Hold.Round(time.Millisecond))
	ok, err := r.waitMoved(ctx, mine, at, id, s.Hold)
	if err == nil {
		err = r.sleep(ctx, max(s.Hold-time.Since(at), 0))
	}
	w.DynamoProxy.Thaw()
	if sink != nil {
		sink.Thaw()
	}
	if err != nil {
		return err
	}
	thawed := time.Now()
	f := r.fault(Fault{Kind: s.Kind, Start: at, End: thawed, Worker: id, Note: note()})
	n := f.N
	r.say("#%d %s %s after %v; its sessions delivered by others meanwhile: %s", n, id, txt.thawed, thawed.Sub(at).Round(time.Millisecond), okText(ok))
	nid, err := r.afterDeath(ctx, w, id)
	r.faults[n-1].NewWorker = nid
	return err
}

// scheduleNotice is how long before a connection's max age the source
// sends its shutdown notice in a source-schedule episode.
const scheduleNotice = time.Second

// scheduleStep is a source-schedule episode: for s.Hold the feed ends every
// connection opened meanwhile at s.MaxAge (1001), sending
// {"e":"serverShutdown"} scheduleNotice before, then stops scheduling.
// The sessions with planned reconnects switch make-before-break on the
// notice (or their own max age), the others are closed at the age and
// reconnect; s.Count of those are dropped (close frame) at the start,
// since the schedule applies to the connections opened after it is set.
// The fault ends when the schedule is switched off; connections opened
// just before live up to s.MaxAge longer, and the step waits for them and
// for every session to deliver a new seq after them.
func (r *runner) scheduleStep(ctx context.Context, s Step, reconnect time.Duration) error {
	fc := r.st.FeedClient
	at := time.Now()
	if err := fc.SetSchedule(ctx, s.MaxAge, scheduleNotice); err != nil {
		return fmt.Errorf("feed schedule: %w", err)
	}
	sess := pick(s, r.unplannedIDs(), s.Count)
	for _, id := range sess {
		if _, err := fc.Drop(ctx, id, false); err != nil {
			return err
		}
	}
	r.say("the source ends every new connection at %v (a shutdown notice %v before) for %v; %d unplanned session(s) dropped onto the schedule",
		s.MaxAge, scheduleNotice, s.Hold.Round(time.Millisecond), len(sess))
	err := r.sleep(ctx, max(s.Hold-time.Since(at), 0))
	off := time.Now()
	if serr := fc.SetSchedule(context.WithoutCancel(ctx), 0, 0); serr != nil {
		return fmt.Errorf("feed schedule off: %w", serr)
	}
	if err != nil {
		return err
	}
	f := r.fault(Fault{Kind: s.Kind, Start: at, End: off, Sessions: sess,
		Note: fmt.Sprintf("max age %v, notice %v before; %d unplanned session(s) dropped onto it", s.MaxAge, scheduleNotice, len(sess))})
	n := f.N
	if err := r.sleep(ctx, s.MaxAge); err != nil { // the last scheduled connections end
		return err
	}
	ids := r.startedIDs()
	ok, err := r.waitProgress(ctx, ids, r.rec.maxSeqOf(ids), reconnect+2*time.Second)
	if err != nil {
		return err
	}
	r.say("#%d the source's schedule off after %v; every session delivering after its last scheduled connection: %s", n, off.Sub(at).Round(time.Millisecond), okText(ok))
	return nil
}
