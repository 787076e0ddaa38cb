// The hot standbys this worker holds: their assignment, their drop, and
// the promotion an acquire makes of one.

package lease

import (
	"context"
	"errors"
	"fmt"
	"sort"
)

// A standby is not a held session: it delivers nothing, writes nothing but
// its own assignment and drop, counts in no Load, is never checkpointed,
// and the worker's fencing does not end it (a worker seen not alive has its
// standbys replaced, AssignStandby's prev, and bypassed, From.StandbyGone).
// The Keeper remembers the token of each, so that its acquire of the
// session is the standby's promotion (From.Standby).

// AssignStandby makes this worker the standby of session id at generation
// gen (Store.AssignStandby), replacing prev (nil: none) when that is the
// current standby, and remembers the assignment's token. It returns the
// session item as written (without Spec and checkpoint: Get reads them).
// A *StandbyHeldError names another standby (errors.As works through the
// wrapping).
func (k *Keeper) AssignStandby(ctx context.Context, id string, gen int64, prev *StandbyToken) (StandbyToken, Item, error) {
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	it, err := k.store.AssignStandby(ctx, id, k.cfg.Owner, gen, prev)
	if err != nil {
		return StandbyToken{}, Item{}, fmt.Errorf("assign standby %s to %s: %w", id, k.cfg.Owner, err)
	}
	t := StandbyToken{ConnectionID: id, Worker: k.cfg.Owner, Epoch: it.StandbyEpoch}
	k.smu.Lock()
	k.standbys[id] = standbyEntry{tok: t}
	k.smu.Unlock()
	return t, it, nil
}

// standbyEntry is a standby this Keeper holds: its assignment, and the
// stored configuration it dialed with (StandbySpec; "" until known).
type standbyEntry struct {
	tok  StandbyToken
	spec string
}

// StandbySpec records stored, the configuration standby t dialed with, so
// that its promotion need not read it again (From.Spec).
func (k *Keeper) StandbySpec(t StandbyToken, stored string) {
	k.smu.Lock()
	defer k.smu.Unlock()
	if e, ok := k.standbys[t.ConnectionID]; ok && e.tok == t {
		e.spec = stored
		k.standbys[t.ConnectionID] = e
	}
}

// DropStandby ends standby t (Store.DropStandby): refusedGen > 0 records
// that the source refused the second connection at that generation, reason
// why the standby ended. The Keeper forgets t once it is dropped, or
// already was (ErrStandbyLost, returned wrapped: the caller treats it as
// done) or the session is gone; a transient failure keeps it for a retry.
func (k *Keeper) DropStandby(ctx context.Context, t StandbyToken, refusedGen int64, reason string) error {
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	err := k.store.DropStandby(ctx, t, refusedGen, reason, k.clk.Now().UnixMilli())
	if err == nil || errors.Is(err, ErrStandbyLost) || errors.Is(err, ErrNotFound) {
		k.forgetStandby(t)
	}
	if err != nil {
		return fmt.Errorf("drop standby %s: %w", t, err)
	}
	return nil
}

// Standby is the standby this Keeper holds for session id.
func (k *Keeper) Standby(id string) (StandbyToken, bool) {
	k.smu.Lock()
	defer k.smu.Unlock()
	e, ok := k.standbys[id]
	return e.tok, ok
}

// standbyFrom is what an acquire of id by this Keeper names of its standby
// of the session (none: from as it was).
func (k *Keeper) standbyFrom(id string, from *From) {
	k.smu.Lock()
	defer k.smu.Unlock()
	if e, ok := k.standbys[id]; ok {
		from.Standby = &e.tok
		from.Spec = e.spec
	}
}

// Standbys lists the standbys this Keeper holds, by connection id.
func (k *Keeper) Standbys() []StandbyToken {
	k.smu.Lock()
	out := make([]StandbyToken, 0, len(k.standbys))
	for _, e := range k.standbys {
		out = append(out, e.tok)
	}
	k.smu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ConnectionID < out[j].ConnectionID })
	return out
}

// forgetStandby forgets t unless a newer assignment replaced it.
func (k *Keeper) forgetStandby(t StandbyToken) {
	k.smu.Lock()
	if k.standbys[t.ConnectionID].tok == t {
		delete(k.standbys, t.ConnectionID)
	}
	k.smu.Unlock()
}

// Promoted is the standby of this worker that the acquire of h promoted
// (its connection may deliver from its window), false when h was acquired
// without one.
func (h *Held) Promoted() (StandbyToken, bool) {
	if h.promoted == nil {
		return StandbyToken{}, false
	}
	return *h.promoted, true
}
