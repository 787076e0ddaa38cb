// The faults on one worker: kill -9, SIGSTOP, a partition from DynamoDB,
// SIGTERM (rolling restart, clock offset, scale-in) and a worker joining
// (scale-out): recovery-crash, -handoff, rebalance, and the trust deadline
// of a worker that could not heartbeat (fencing).

package chaos

import (
	"maps"
	"slices"
	"time"
)

// workerFault measures a fault on one worker: the sessions it was
// delivering must be delivered again by a newer tenure of another worker.
// After a crash that is judged from the fault (the worker stops delivering
// then). After a SIGTERM (graceful) it is judged per session from its
// previous tenure's last delivery: the drain hands sessions off a few at a
// time and the others keep streaming until their turn (docs/worker.md,
// "Graceful shutdown"), so a session is dark only for its own hand-off;
// and every session is delivered again within the shutdown deadline of the
// SIGTERM, by when the drain has handed everything off.
func (j *judge) workerFault(fr *FaultResult, check string) {
	ref := fr.Start.UnixNano()
	graceful := gracefulKind(fr.Kind)
	deadline := ref + fr.BoundMs*int64(time.Millisecond)
	if graceful {
		deadline = ref + j.set.ShutdownMs*int64(time.Millisecond)
	}
	label := fr.Kind + " of " + fr.Worker
	for _, id := range j.ids {
		v := j.sess[id]
		last := v.lastBefore(ref)
		if last == nil || last.Worker != fr.Worker || last.AtNs < ref-int64(liveWindow) || !v.startedAt(fr.Start) {
			continue
		}
		fr.Affected++
		var rec *Delivery
		prev := last // the previous tenure's last delivery before rec (graceful: it streams until its turn)
		for i := range v.dels {
			d := &v.dels[i]
			if d.AtNs > ref && d.Worker != fr.Worker && d.Epoch > last.Epoch {
				rec = d
				break
			}
			if graceful && d.AtNs > ref && d.Worker == last.Worker && d.Epoch == last.Epoch {
				prev = d
			}
		}
		if !j.recovered(fr, v, id, rec, deadline, check, ref, "%s: never delivered again by a newer tenure", label) {
			continue
		}
		if !graceful {
			j.timed(fr, id, rec, ref, prev.AtNs, deadline, check, "%s: delivered again by %s@%d only after %.0f ms (bound %d ms)", label, rec.Worker, rec.Epoch, float64(rec.AtNs-ref)/1e6, fr.BoundMs)
			continue
		}
		gap := float64(rec.AtNs-prev.AtNs) / 1e6
		fr.dark = append(fr.dark, gap)
		fr.samples = append(fr.samples, gap)
		switch {
		case gap > float64(fr.BoundMs):
			fr.OverBound++
			j.violate(check, id, prev.AtNs, "%s: delivered again by %s@%d %.0f ms after %s@%d's last delivery (bound %d ms)", label, rec.Worker, rec.Epoch, gap, prev.Worker, prev.Epoch, fr.BoundMs)
		case rec.AtNs > deadline:
			fr.OverBound++
			j.violate(check, id, ref, "%s: delivered again by %s@%d only %.0f ms after the SIGTERM (the shutdown deadline: %d ms)", label, rec.Worker, rec.Epoch, float64(rec.AtNs-ref)/1e6, j.set.ShutdownMs)
		}
	}
	if fr.Kind != KindZombie && fr.Kind != KindPartition && fr.Kind != KindSinkFreezeDynamo {
		return
	}
	// A zombie or a partitioned worker cannot heartbeat from the fault on:
	// its trust deadline is at most FenceMs after it, and past that it must
	// deliver nothing under any tenure (it cannot acquire a new one either).
	fence := ref + (j.set.Bounds.FenceMs+j.set.Bounds.FenceSlackMs)*int64(time.Millisecond)
	var latest int64
	for _, id := range j.ids {
		v := j.sess[id]
		n := 0
		var first int64
		epochs := map[int64]bool{}
		for _, d := range v.dels {
			if d.Worker != fr.Worker || d.AtNs <= ref {
				continue
			}
			latest = max(latest, d.AtNs-ref)
			if d.AtNs > fence {
				if n == 0 {
					first = d.AtNs
				}
				n++
				epochs[d.Epoch] = true
			}
		}
		if n > 0 {
			j.violate(CheckFencing, id, first, "%s %s delivered %d message(s) (epochs %v) after its trust deadline: more than %d ms after it could last heartbeat (TTL − margin + %d ms slack)",
				fr.Kind, fr.Worker, n, slices.Sorted(maps.Keys(epochs)), j.set.Bounds.FenceMs+j.set.Bounds.FenceSlackMs, j.set.Bounds.FenceSlackMs)
		}
	}
	if fr.Kind == KindPartition || fr.Kind == KindSinkFreezeDynamo {
		j.res.SelfFenceMs = append(j.res.SelfFenceMs, float64(latest)/1e6)
	}
	// Once it can reach DynamoDB again (SIGCONT, the proxy thawed), its
	// next heartbeat finds it DEAD: it must exit, non-zero.
	switch inc := j.inc[fr.Worker]; {
	case inc == nil:
	case inc.End == "alive":
		j.violate(CheckCrash, "", inc.Ended.UnixNano(), "%s: %s kept running after its watchers declared it dead (%s)", fr.Kind, fr.Worker, inc.Exit)
	case inc.End == "dead" && inc.Exit == "0":
		j.violate(CheckCrash, "", inc.Ended.UnixNano(), "%s: %s exited 0 after it was declared dead (want non-zero: the supervisor must see a failure)", fr.Kind, fr.Worker)
	}
}

// scaleOutFault measures a worker joining: the sessions moved to it (its
// first delivery of each, after an earlier tenure elsewhere) are the
// affected ones, each recovered at that delivery (from the join); the
// fleet must be balanced within the bound (the runner's observation, the
// fault's End).
func (j *judge) scaleOutFault(fr *FaultResult, f Fault) {
	ref := fr.Start.UnixNano()
	until := ref + fr.BoundMs*int64(time.Millisecond) // the moves of this join, not later takeovers
	if f.End.After(f.Start) {
		until = f.End.UnixNano()
	}
	for _, id := range j.ids {
		v := j.sess[id]
		for i, t := range v.tenures {
			if t.worker != fr.Worker || i == 0 || t.firstAt < ref || t.firstAt > until {
				continue
			}
			fr.Affected++
			fr.Recovered++
			fr.samples = append(fr.samples, float64(t.firstAt-ref)/1e6)
			fr.dark = append(fr.dark, float64(t.firstAt-v.tenures[i-1].lastAt)/1e6)
			break
		}
	}
	if !f.End.After(f.Start) {
		fr.OverBound++
		j.violate(CheckRebalance, "", ref, "scale-out: %s joined; the fleet was not within ±10 %% of its fair shares %d ms later", fr.Worker, fr.BoundMs)
	} else if took := f.End.Sub(f.Start).Milliseconds(); took > fr.BoundMs {
		fr.OverBound++
		j.violate(CheckRebalance, "", ref, "scale-out: %s joined; the fleet was balanced only after %d ms (bound %d ms)", fr.Worker, took, fr.BoundMs)
	}
}
