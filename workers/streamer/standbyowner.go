// Hot standby, the owner's side: for every session it owns whose spec asks
// for a standby, this worker keeps one placed on another worker (another
// zone when one is known), replaces it when that worker is gone, asks it
// again at a new generation, and drops it when the session stops. It
// writes nothing to the table: the standby's worker writes its own
// assignment and its drop.

package streamer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/session"
)

// standbyAssignEvery is how often the owner looks for sessions without a
// standby (a standby lost is replaced within it, plus the time it takes to
// see its worker gone: the rebalancing round's view).
const standbyAssignEvery = time.Second

// standbyRetryMax bounds the back-off of a session's placement after
// passes that placed nothing: a session without a standby loses what a
// crash meanwhile costs, so it is tried again within seconds.
const standbyRetryMax = 5 * time.Second

// standbyPlaceInFlight bounds the placements one owner's pass has in
// flight at once.
const standbyPlaceInFlight = 8

// standbyTries is how many workers one placement asks in each pass (first
// in other zones, then in any).
const standbyTries = 3

// ownerStandby is what this worker, owning a session, knows of its standby.
type ownerStandby struct {
	gen     int64 // the generation the spec was decoded at
	wanted  bool  // the spec asks for a standby
	worker  string
	addr    string // its worker's admin address (as asked, or as it told)
	epoch   int64
	at      int64 // the generation it was placed for
	refused int64 // the generation the source refused one at
	// pushed and pushedSeq are the position last told to the standby: an
	// acknowledged message's fingerprint (seq_mode none) or seq.
	pushed    uint64
	pushedSeq int64
	nextTry   time.Time
	fails     int
}

// standbyOwnerLoop keeps a standby for every owned session that asks for
// one.
func (w *Worker) standbyOwnerLoop(ctx context.Context) {
	t := newTick(w.deps.Clock, standbyAssignEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			t.next()
		case <-w.placeNow:
			// Not while claims are in flight here (a takeover's burst, the
			// promotions among it): the next pass places them, within a
			// second, and the claims keep the table and the cores.
			if w.running() && !w.claimsInFlight() {
				w.placeStandbys(ctx)
			}
			continue
		}
		if !w.running() {
			continue
		}
		w.placeStandbys(ctx)
		w.pushPositions(ctx)
		w.standbyPasses.Add(1)
	}
}

// claimsInFlight reports whether a claim of this worker is in flight.
func (w *Worker) claimsInFlight() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.claiming) > 0
}

// wantStandby records whether the session s owns at generation it asks
// for a standby (its start and every new generation: the spec is decoded
// there, not on every pass); the placement passes look at those only. It
// reports whether the session has none to keep (acquired without one: a
// promotion removed it, or none was ever placed): its caller wakes the
// placement (wakePlacement) once the session runs, since a crash before
// one stands loses what the source sends meanwhile.
func (w *Worker) wantStandby(id string, it lease.Item, wanted bool) (placeNow bool) {
	w.sbMu.Lock()
	defer w.sbMu.Unlock()
	st := w.ownStandbys[id]
	switch {
	case !wanted:
		delete(w.ownStandbys, id)
	case st == nil:
		w.ownStandbys[id] = &ownerStandby{gen: it.Generation, wanted: true, worker: it.Standby, epoch: it.StandbyEpoch, at: it.Generation}
		return it.Standby == ""
	default:
		st.gen, st.wanted = it.Generation, true
	}
	return false
}

// wakePlacement has standbyOwnerLoop run a placement pass now rather than
// at its next tick (coalesced: one wake-up pending at most).
func (w *Worker) wakePlacement() {
	select {
	case w.placeNow <- struct{}{}:
	default:
	}
}

// standbyWanted decodes whether it asks for a standby.
func standbyWanted(it lease.Item) bool {
	sp, err := spec.Decode(it.Spec)
	return err == nil && sp.StandbyEnabled()
}

// placeStandbys is one pass of standbyOwnerLoop: the sessions this worker
// owns that ask for a standby and have none alive get one placed.
func (w *Worker) placeStandbys(ctx context.Context) {
	now := w.deps.Clock.Now()
	w.sbMu.Lock()
	ids := make([]string, 0, len(w.ownStandbys))
	for id, st := range w.ownStandbys {
		if st.wanted && st.refused != st.gen && !now.Before(st.nextTry) &&
			(st.worker == "" || st.at != st.gen || !w.peerAlive(st.worker)) {
			ids = append(ids, id)
		}
	}
	w.sbMu.Unlock()
	if len(ids) == 0 {
		return
	}
	w.mu.Lock()
	need := make([]*session.Session, 0, len(ids))
	for _, id := range ids {
		if s := w.sessions[id]; s != nil {
			need = append(need, s)
		}
	}
	w.mu.Unlock()
	// A few placements in flight: each is a request to a worker that
	// writes its assignment and reads the session (two round trips), so
	// one at a time re-places a fleet's standbys (an AZ lost) at tens a
	// second per owner.
	var g errgroup.Group
	g.SetLimit(standbyPlaceInFlight)
	for _, s := range need {
		if ctx.Err() != nil {
			break
		}
		if it := s.Held().Item(); it.StandbyRefusedGen == it.Generation {
			w.sbMu.Lock()
			if st := w.ownStandbys[s.ID()]; st != nil {
				st.refused = it.Generation
			}
			w.sbMu.Unlock()
			continue
		}
		g.Go(func() error { w.placeStandby(ctx, s); return nil })
	}
	_ = g.Wait()
}

// peerAlive reports whether worker is alive as far as this worker knows:
// not known gone (its record seen DEAD or LEFT: the reconciler's listing
// of gone workers, a watch, a takeover). The fleet summary names only some
// workers, so absence from it says nothing.
func (w *Worker) peerAlive(worker string) bool {
	return !w.keeper.KnownGone(worker)
}

// placeStandby asks workers, in the session's rendezvous order, to stand by
// for s: first those of other zones (a worker in the owner's zone answers
// same_zone), then any.
func (w *Worker) placeStandby(ctx context.Context, s *session.Session) {
	id := s.ID()
	it := s.Held().Item()
	w.sbMu.Lock()
	st := w.ownStandbys[id]
	if st == nil {
		w.sbMu.Unlock()
		return
	}
	var prev *lease.StandbyToken
	if st.worker != "" && st.epoch > 0 && !w.peerAlive(st.worker) {
		prev = &lease.StandbyToken{ConnectionID: id, Worker: st.worker, Epoch: st.epoch}
	}
	cur := st.worker
	w.sbMu.Unlock()
	cands := w.standbyCandidates(id, cur)
	if len(cands) == 0 {
		return // no other worker known yet (a new worker's first round): the next pass
	}
	for _, anyZone := range []bool{false, true} {
		for i, to := range cands {
			if i >= standbyTries {
				break
			}
			res, err := w.askStandby(ctx, to, id, it.Generation, prev, anyZone)
			if err != nil || res.code != "" {
				w.log.Debug().Err(err).Str("connection_id", id).Str("to", to).Str("code", res.code).Str("reason", res.reason).Msg("standby: not placed there")
			}
			if err != nil {
				continue
			}
			w.sbMu.Lock()
			switch res.code {
			case "":
				st.worker, st.addr, st.epoch, st.at, st.fails = to, res.addr, res.epoch, it.Generation, 0
				w.sbMu.Unlock()
				return
			case "standby_held":
				st.worker, st.addr, st.epoch, st.at = res.worker, "", res.epoch, it.Generation
				w.sbMu.Unlock()
				if w.peerAlive(res.worker) {
					return
				}
				w.sbMu.Lock()
				prev = &lease.StandbyToken{ConnectionID: id, Worker: res.worker, Epoch: res.epoch}
			case "standby_refused":
				st.refused = it.Generation
				w.sbMu.Unlock()
				return
			case "not_standing_by":
				w.sbMu.Unlock()
				w.standbyRetryLater(id)
				return
			}
			w.sbMu.Unlock()
		}
	}
	w.standbyRetryLater(id)
}

// standbyRetryLater backs off the next placement of id.
func (w *Worker) standbyRetryLater(id string) {
	w.sbMu.Lock()
	defer w.sbMu.Unlock()
	if st := w.ownStandbys[id]; st != nil {
		st.fails++
		st.nextTry = w.deps.Clock.Now().Add(min(standbyAssignEvery<<min(st.fails, 3), standbyRetryMax))
	}
}

// standbyCandidates are the alive workers other than this one, in id's
// rendezvous order (highest hash of id and worker first), the current
// standby's worker first when it is alive (a new generation asks it again).
func (w *Worker) standbyCandidates(id, cur string) []string {
	w.rebal.mu.Lock()
	ws := make([]string, 0, len(w.rebal.addrs))
	for wid := range w.rebal.addrs {
		if wid != w.cfg.WorkerID && !w.keeper.KnownGone(wid) {
			ws = append(ws, wid)
		}
	}
	w.rebal.mu.Unlock()
	score := func(wid string) uint64 {
		h := fnv.New64a()
		_, _ = h.Write([]byte(id))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(wid))
		return h.Sum64()
	}
	slices.SortFunc(ws, func(a, b string) int {
		switch {
		case a == cur:
			return -1
		case b == cur:
			return 1
		}
		return cmp.Compare(score(b), score(a))
	})
	return ws
}

// standbyAnswer is a worker's answer to POST /standby.
type standbyAnswer struct {
	code   string // "": it stands by (epoch); else why not
	addr   string // the address it was asked at
	reason string // the worker's error text
	worker string // standby_held: who does
	epoch  int64
}

// askStandby asks worker to to stand by for id at generation gen.
func (w *Worker) askStandby(ctx context.Context, to, id string, gen int64, prev *lease.StandbyToken, anyZone bool) (standbyAnswer, error) {
	addr := w.rebal.addr(to)
	if addr == "" {
		return standbyAnswer{}, fmt.Errorf("no admin address for %s", to)
	}
	q := url.Values{"connection_id": {id}, "generation": {strconv.FormatInt(gen, 10)}}
	if w.cfg.Zone != "" {
		q.Set("owner_zone", w.cfg.Zone)
	}
	if p := w.advertiseAddr.Load(); p != nil && *p != "" {
		q.Set("owner_addr", *p) // where the standby's worker tells the owner it dropped it
	}
	if anyZone {
		q.Set("any_zone", "1")
	}
	if prev != nil {
		q.Set("prev_worker", prev.Worker)
		q.Set("prev_epoch", strconv.FormatInt(prev.Epoch, 10))
	}
	// The holder writes its assignment before it answers: a store call.
	ctx, cancel := context.WithTimeout(ctx, w.cfg.StoreTimeout+time.Second)
	defer cancel()
	res, err := w.peerCall(ctx, http.MethodPost, addr, standbyPath, q, nil)
	if err != nil {
		return standbyAnswer{}, err
	}
	defer res.Body.Close()
	var body struct {
		Code          string `json:"code"`
		Error         string `json:"error"`
		Epoch         int64  `json:"standby_epoch"`
		StandbyWorker string `json:"standby_worker"`
	}
	_ = json.NewDecoder(io.LimitReader(res.Body, 4096)).Decode(&body)
	switch res.StatusCode {
	case http.StatusOK:
		return standbyAnswer{epoch: body.Epoch, addr: addr}, nil
	case http.StatusConflict:
		return standbyAnswer{code: body.Code, reason: body.Error, worker: body.StandbyWorker, epoch: body.Epoch}, nil
	}
	return standbyAnswer{}, fmt.Errorf("standby %s: %s", to, res.Status)
}

// standbyOf is the standby this worker knows for its session id ("": none).
func (w *Worker) standbyOf(id string) (worker string, epoch int64) {
	w.sbMu.Lock()
	defer w.sbMu.Unlock()
	if st := w.ownStandbys[id]; st != nil {
		return st.worker, st.epoch
	}
	return "", 0
}

// dropOwnStandby tells the standby of id, if any, that the session ended
// (a stop, a failure): it drops its connection and writes its drop.
func (w *Worker) dropOwnStandby(ctx context.Context, id string) {
	w.sbMu.Lock()
	st := w.ownStandbys[id]
	delete(w.ownStandbys, id)
	w.sbMu.Unlock()
	if st == nil || st.worker == "" || st.epoch < 1 {
		return
	}
	addr := st.addr
	if addr == "" {
		addr = w.peerAddr(ctx, st.worker)
	}
	if addr == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	q := url.Values{"connection_id": {id}, "standby_epoch": {strconv.FormatInt(st.epoch, 10)}}
	if err := w.peerNotify(ctx, http.MethodDelete, addr, standbyPath, q); err != nil && !errors.Is(err, context.Canceled) {
		w.log.Debug().Err(err).Str("connection_id", id).Msg("standby: tell its worker to drop it (it re-reads the item)")
	}
}

// standbyFirst moves the sessions of ss whose standby's worker is alive to
// the front, in place, and returns how many there are: a shutdown hands
// each of them to its standby.
func (w *Worker) standbyFirst(ss []*session.Session) int {
	n := 0
	for i, s := range ss {
		if to, _ := w.standbyOf(s.ID()); to != "" && w.peerAlive(to) {
			ss[n], ss[i] = ss[i], ss[n]
			n++
		}
	}
	return n
}

// tellStandbyToClaim tells worker to, the standby of id, to claim it now
// (a takeover found the session's standby alive: its worker is the
// receiver), in the background; prev is the dead tenure when known.
func (w *Worker) tellStandbyToClaim(to, id string, prev *lease.Token) {
	w.ph.tasks.Go(func() {
		if err := w.tellReceiver(w.hardCtx, to, id, prev, 0); err != nil {
			w.log.Warn().Err(err).Str("connection_id", id).Str("to", to).
				Msg("takeover: tell the standby's worker to claim (it claims when it sees the owner gone, or the standby is bypassed once its worker is)")
		}
	})
}
