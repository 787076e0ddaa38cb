//go:build fleetsim

package fleetsim

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/testkit/simddb"
)

// errKilled is every call of a worker cut off its table (a kill -9).
var errKilled = errors.New("fleetsim: worker killed")

// memberStore is one worker's view of the shared simulated table: it counts
// the worker's coordination reads and writes, can be cut off at once (a
// kill -9: nothing the dead process had in flight reaches the table after
// it), and, for the mutation check only, can break fencing (steal: an
// acquire that ignores the current owner, and a discovery that lists held
// sessions as unowned).
type memberStore struct {
	st     *simddb.Store
	cut    atomic.Bool
	reads  atomic.Int64
	writes atomic.Int64
	// held counts the acquires refused because another worker held the
	// session (lost races; readkinds.go).
	held atomic.Int64
	// down, when set, is the end of an outage of the table (outage.go).
	down atomic.Int64
	// steal breaks the ownership protocol (the mutation check): never set
	// in a scenario that claims safety.
	steal  bool
	stealN int
	ids    func() []string
	// declared, when set, is told of every death declaration this worker
	// wrote: the worker declared dead and the call's start (standby.go).
	declared func(id string, at time.Time)
	// acquired, when set, is told of every acquire this worker made:
	// the session, the call's start and its return (standby.go).
	acquired func(id string, start, end time.Time)
	// claims counts the acquires that are claims (not a given tenure's).
	claims *claimCounter
	// who is the worker; watch, when set, notes its calls on the watched
	// sessions (watch.go).
	who   string
	watch *watcher
}

var _ lease.Store = (*memberStore)(nil)

func (m *memberStore) gate(ctx context.Context, write bool) error {
	if m.cut.Load() {
		return errKilled
	}
	if err := m.unreachable(ctx, write); err != nil {
		return err
	}
	if write {
		m.writes.Add(1)
	} else {
		m.reads.Add(1)
	}
	return nil
}

func (m *memberStore) Register(ctx context.Context, rec lease.WorkerRecord) error {
	if err := m.gate(ctx, true); err != nil {
		return err
	}
	return m.st.Register(ctx, rec)
}

func (m *memberStore) Heartbeat(ctx context.Context, id string, epoch int64, hb lease.Heartbeat) (lease.WorkerRecord, error) {
	if err := m.gate(ctx, true); err != nil {
		return lease.WorkerRecord{}, err
	}
	return m.st.Heartbeat(ctx, id, epoch, hb)
}

func (m *memberStore) DeclareDead(ctx context.Context, id string, epoch, seenSeq int64, by string, atMs int64) error {
	if err := m.gate(ctx, true); err != nil {
		return err
	}
	at := time.Now() // the call's start: when the worker stamped ended_at_ms (atMs)
	err := m.st.DeclareDead(ctx, id, epoch, seenSeq, by, atMs)
	if err == nil && m.declared != nil {
		m.declared(id, at)
	}
	return err
}

func (m *memberStore) Leave(ctx context.Context, id string, epoch int64, list string, atMs int64) error {
	if err := m.gate(ctx, true); err != nil {
		return err
	}
	return m.st.Leave(ctx, id, epoch, list, atMs)
}

func (m *memberStore) GetWorker(ctx context.Context, id string) (lease.WorkerRecord, error) {
	if err := m.gate(ctx, false); err != nil {
		return lease.WorkerRecord{}, err
	}
	return m.st.GetWorker(ctx, id)
}

func (m *memberStore) ListWorkers(ctx context.Context, list string, limit int) ([]string, error) {
	if err := m.gate(ctx, false); err != nil {
		return nil, err
	}
	return m.st.ListWorkers(ctx, list, limit)
}

func (m *memberStore) GetWorkers(ctx context.Context, ids []string) ([]lease.WorkerRecord, error) {
	if err := m.gate(ctx, false); err != nil {
		return nil, err
	}
	return m.st.GetWorkers(ctx, ids)
}

func (m *memberStore) MarkDone(ctx context.Context, id string) error {
	if err := m.gate(ctx, true); err != nil {
		return err
	}
	return m.st.MarkDone(ctx, id)
}

func (m *memberStore) Acquire(ctx context.Context, id, owner string, from lease.From) (lease.Item, error) {
	if err := m.gate(ctx, true); err != nil {
		return lease.Item{}, err
	}
	if m.steal {
		// The mutation: the acquire's condition ignores the owner (as if
		// the conditional write were unconditional).
		m.st.Mem().Update(id, func(it *lease.Item) { it.Owner, it.HandoffTo = "", "" })
		from = lease.From{}
	}
	start := time.Now()
	if m.claims != nil && from.Given == nil {
		m.claims.add(start)
	}
	it, err := m.st.Acquire(ctx, id, owner, from)
	if m.watch != nil {
		prev := "-"
		if from.Prev != nil {
			prev = token(*from.Prev)
		}
		m.watch.note(id, m.who, "acquire", err, "prev %s given %v standby %v: now %s@%d", prev, from.Given != nil, from.Standby != nil, it.Owner, it.Epoch)
	}
	if errors.Is(err, lease.ErrHeld) {
		m.held.Add(1)
	}
	if err == nil && m.acquired != nil {
		m.acquired(id, start, time.Now())
	}
	return it, err
}

func (m *memberStore) Checkpoint(ctx context.Context, t lease.Token, lastSeq int64) error {
	if err := m.gate(ctx, true); err != nil {
		return err
	}
	return m.st.Checkpoint(ctx, t, lastSeq)
}

func (m *memberStore) Release(ctx context.Context, t lease.Token, lastSeq int64) error {
	if err := m.gate(ctx, true); err != nil {
		return err
	}
	return m.noted("release", t, "", m.st.Release(ctx, t, lastSeq))
}

func (m *memberStore) Handoff(ctx context.Context, t lease.Token, lastSeq int64, to string, atMs int64) error {
	if err := m.gate(ctx, true); err != nil {
		return err
	}
	return m.noted("handoff", t, "to "+to, m.st.Handoff(ctx, t, lastSeq, to, atMs))
}

func (m *memberStore) Fail(ctx context.Context, t lease.Token, gen, lastSeq int64, reason string, atMs int64) error {
	if err := m.gate(ctx, true); err != nil {
		return err
	}
	return m.noted("fail", t, reason, m.st.Fail(ctx, t, gen, lastSeq, reason, atMs))
}

func (m *memberStore) Disown(ctx context.Context, t lease.Token) error {
	if err := m.gate(ctx, true); err != nil {
		return err
	}
	return m.noted("disown", t, "", m.st.Disown(ctx, t))
}

func (m *memberStore) NoteError(ctx context.Context, t lease.Token, gen int64, reason string, atMs int64) error {
	if err := m.gate(ctx, true); err != nil {
		return err
	}
	return m.st.NoteError(ctx, t, gen, reason, atMs)
}

func (m *memberStore) AssignStandby(ctx context.Context, id, worker string, gen int64, prev *lease.StandbyToken) (lease.Item, error) {
	if err := m.gate(ctx, true); err != nil {
		return lease.Item{}, err
	}
	return m.st.AssignStandby(ctx, id, worker, gen, prev)
}

func (m *memberStore) DropStandby(ctx context.Context, t lease.StandbyToken, refusedGen int64, reason string, atMs int64) error {
	if err := m.gate(ctx, true); err != nil {
		return err
	}
	return m.st.DropStandby(ctx, t, refusedGen, reason, atMs)
}

func (m *memberStore) Get(ctx context.Context, id string) (lease.Item, error) {
	if err := m.gate(ctx, false); err != nil {
		return lease.Item{}, err
	}
	return m.st.Get(ctx, id)
}

func (m *memberStore) GetHead(ctx context.Context, id string) (lease.Item, error) {
	if err := m.gate(ctx, false); err != nil {
		return lease.Item{}, err
	}
	return m.st.GetHead(ctx, id)
}

// noted is err of call on tenure t, noted when its session is watched.
func (m *memberStore) noted(call string, t lease.Token, extra string, err error) error {
	if m.watch != nil {
		m.watch.note(t.ConnectionID, m.who, call, err, "%s %s", token(t), extra)
	}
	return err
}

func (m *memberStore) Unowned(ctx context.Context, limit int) ([]string, error) {
	if err := m.gate(ctx, false); err != nil {
		return nil, err
	}
	ids, err := m.st.Unowned(ctx, limit)
	m.watch.listed(m.who, "unowned", ids)
	if err != nil || !m.steal || m.ids == nil {
		return ids, err
	}
	// The mutation: the first stealN sessions look unowned whoever holds
	// them.
	all := m.ids()
	return append(ids, all[:min(m.stealN, len(all))]...), nil
}

func (m *memberStore) OwnedBy(ctx context.Context, owner string, limit int) ([]lease.Owned, error) {
	if err := m.gate(ctx, false); err != nil {
		return nil, err
	}
	owned, err := m.st.OwnedBy(ctx, owner, limit)
	if m.watch != nil && (owner != m.who || m.watch.ids != nil) {
		// WatchSlowest keeps no worker's listing of its own sessions:
		// every reconcile pass makes one.
		for _, o := range owned {
			m.watch.note(o.ConnectionID, m.who, "owned_by", err, "%s %s", token(o.Token), o.DesiredState)
		}
	}
	return owned, err
}
