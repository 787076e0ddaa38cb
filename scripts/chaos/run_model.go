// The DynamoDB model's faults (a stack on testkit/dynamodel): an index-lag
// episode with a kill -9 in it, a throttling storm with a hot key, and an
// ambiguous-error storm, each through the model's controls.

package chaos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
	"github.com/wsfleet/wsfleet/testkit/dynamodel"
)

func (r *runner) modelStep(ctx context.Context, s Step) error {
	m := r.st.Model
	if m == nil {
		return fmt.Errorf("%s: the stack does not run on the DynamoDB model", s.Kind)
	}
	crash := time.Duration(r.set.Bounds.CrashMs) * time.Millisecond
	storm := time.Duration(r.set.Bounds.StormMs) * time.Millisecond
	table := r.cfg.Stack.Table
	switch s.Kind {
	case KindIndexLag:
		// The indexes lag from now on; the worker killed at once has
		// acquired sessions within the lag (the takeovers of earlier faults,
		// rebalancing): its by_owner query misses them until the lag passes.
		at := time.Now()
		if err := m.LagEpisode(ctx, modelLag, s.Hold); err != nil {
			return err
		}
		w := r.victim(s)
		id, pid := w.ID(), w.Proc.Pid()
		mine := r.ownedBy(id)
		if err := w.Kill(ctx); err != nil {
			return err
		}
		r.died(id, "kill-9", nil)
		f := r.fault(Fault{Kind: s.Kind, Start: at, End: at.Add(s.Hold), Worker: id,
			Note: fmt.Sprintf("indexes and eventually consistent reads %v behind for %v; kill -9 at its start", modelLag, s.Hold.Round(time.Millisecond))})
		n := f.N
		r.say("#%d indexes %v behind for %v; kill -9 %s (pid %d), delivering %d session(s)", n, modelLag, s.Hold.Round(time.Millisecond), id, pid, len(mine))
		ok, err := r.waitMoved(ctx, mine, at, id, crash+modelLag+3*time.Second)
		if err != nil {
			return err
		}
		r.say("    its sessions delivered by others again: %s after %v", okText(ok), time.Since(at).Round(time.Millisecond))
		nid, err := r.restart(ctx, w)
		r.faults[n-1].NewWorker = nid
		if err != nil {
			return err
		}
		return r.sleep(ctx, max(s.Hold-time.Since(at), 0))
	case KindThrottle, KindAmbiguous:
		at := time.Now()
		var note string
		if s.Kind == KindThrottle {
			hot := pick(s, r.startedIDs(), 1)
			if err := m.HoldTable(ctx, table, throttleFraction, s.Hold); err != nil {
				return err
			}
			for _, id := range hot {
				if err := m.HotKey(ctx, table, id, hotKeyFraction, s.Hold); err != nil {
					return err
				}
			}
			note = fmt.Sprintf("the table held at %.1f %% of its warm throughput, %v's session key (its checkpoints and ownership writes) at %.2f %% of a partition's", 100*throttleFraction, hot, 100*hotKeyFraction)
		} else {
			if err := errors.Join(m.Storm(ctx, dynamodel.FaultBefore, stormBefore, s.Hold), m.Storm(ctx, dynamodel.FaultAfter, stormAfter, s.Hold),
				m.Storm(ctx, dynamodel.FaultDrop, stormDropShare, s.Hold)); err != nil {
				return err
			}
			note = fmt.Sprintf("writes answered 500 before applying (%.0f %%), 500 after (%.0f %%), reply dropped after (%.0f %%)", 100*stormBefore, 100*stormAfter, 100*stormDropShare)
		}
		r.say("%s for %v: %s", s.Kind, s.Hold.Round(time.Millisecond), note)
		if err := r.sleep(ctx, s.Hold); err != nil {
			return err
		}
		back := time.Now()
		f := r.fault(Fault{Kind: s.Kind, Start: at, End: back, Note: note})
		n := f.N
		ok, err := r.waitMoved(ctx, r.startedIDs(), back, "", storm+3*time.Second)
		if err != nil {
			return err
		}
		// A worker whose heartbeats the storm refused for a TTL was
		// declared dead: it learns it at its next heartbeat and exits
		// (non-zero: judged); its slot starts again.
		var dead []string
		for _, w := range r.st.Running() {
			id := w.ID()
			state, err := r.workerState(ctx, id)
			if err != nil {
				return err
			}
			if state != schema.WorkerDead {
				continue
			}
			dead = append(dead, id)
			if _, err := r.afterDeath(ctx, w, id); err != nil {
				return err
			}
		}
		if len(dead) > 0 {
			r.faults[n-1].Note += "; declared dead and exited: " + strings.Join(dead, ", ")
		}
		mt, err := m.Meter(ctx)
		if err != nil {
			return err
		}
		u := mt.Tables[table].Total()
		r.say("#%d %s lifted after %v; every session delivering: %s after %v (so far: %d requests throttled, %d answered ambiguously)",
			f.N, s.Kind, back.Sub(at).Round(time.Millisecond), okText(ok), time.Since(back).Round(time.Millisecond), u.Throttled, u.Faults)
		if s.Kind == KindThrottle {
			return r.checkpointsResume(ctx, back)
		}
	}
	return nil
}

// checkpointsResume waits, after a throttling fault, until the periodic
// checkpoints that yielded to it have run again: a worker holds them for
// up to lease.CheckpointHoldMax intervals after its last throttled one
// (lease.CheckpointHold), then they catch up within an interval (× 1.1,
// its jitter) + 500 ms. The next fault's replay bound (a crash, a
// partition) assumes a checkpoint at most an interval old; a partition
// 3.4 s after a throttle lifted saw 60 repeats against a bound of 32
// (seed 4801).
func (r *runner) checkpointsResume(ctx context.Context, lifted time.Time) error {
	held := lifted.Add(time.Duration(lease.CheckpointHoldMax) * r.cfg.Stack.Worker.CheckpointEvery)
	if err := r.sleep(ctx, max(time.Until(held), 0)); err != nil {
		return err
	}
	return r.checkpointsCatchUp(ctx)
}

// workerState is worker id's record state (a consistent read; "" when it
// has none).
func (r *runner) workerState(ctx context.Context, id string) (string, error) {
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := r.ddb.GetItem(c, &dynamodb.GetItemInput{TableName: aws.String(r.cfg.Stack.Table),
		Key: sessionitem.Key(schema.WorkerKey(id)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return "", fmt.Errorf("read worker %s: %w", id, err)
	}
	return attrS(out.Item, schema.AttrWorkerState), nil
}
