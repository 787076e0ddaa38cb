package streamer

// Hot standby, the positions: the owner pushes what the destination
// acknowledged to its standbys' workers (POST /standby/positions), which
// trim their windows to it.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/session"
)

// standbyPositionsPath is the admin endpoint an owner posts its sessions'
// positions to, on the worker holding their standbys (POST, a JSON body
// {"positions":[{"connection_id","standby_epoch","fp"|"seq"}]}): the last
// message the sink acknowledged, up to which the standby's window may
// forget what it kept: its seq, or under seq_mode none its fingerprint. A
// takeover then repeats at most what was acknowledged since the last push
// (about standbyAssignEvery), instead of the whole window after the last
// checkpoint; and a standby session needs no periodic checkpoint (a table
// write) for it.
const standbyPositionsPath = "/standby/positions"

// position is one session's entry of a positions post.
type position struct {
	ConnectionID string `json:"connection_id"`
	Epoch        int64  `json:"standby_epoch"`
	FP           string `json:"fp,omitempty"`  // hexadecimal (seq_mode none)
	Seq          int64  `json:"seq,omitempty"` // the others
	// Owner and LeaseEpoch are the sender's tenure: the dead tenure a
	// promotion names, should it die.
	Owner      string `json:"owner"`
	LeaseEpoch int64  `json:"lease_epoch"`
}

// pushPositions posts, to each worker holding standbys of sessions this
// worker owns, the positions that moved since the last post: one request
// per standby worker per pass, and no table write.
func (w *Worker) pushPositions(ctx context.Context) {
	type pending struct {
		id  string
		fp  uint64
		seq int64
	}
	by := map[string][]position{}
	addrs := map[string]string{}
	var sent []pending
	w.sbMu.Lock()
	ids := make([]string, 0, len(w.ownStandbys))
	for id, st := range w.ownStandbys {
		if st.worker != "" {
			ids = append(ids, id)
		}
	}
	w.sbMu.Unlock()
	w.mu.Lock()
	ss := make([]*session.Session, 0, len(ids))
	for _, id := range ids {
		if s := w.sessions[id]; s != nil {
			ss = append(ss, s)
		}
	}
	w.mu.Unlock()
	for _, s := range ss {
		fp, seq := s.AckedFingerprint(), int64(0)
		if fp == 0 {
			if seq = s.Held().LastSeq(); seq < 1 {
				continue
			}
		}
		w.sbMu.Lock()
		st := w.ownStandbys[s.ID()]
		if st != nil && st.worker != "" && st.epoch > 0 && (st.pushed != fp || st.pushedSeq != seq) {
			p := position{ConnectionID: s.ID(), Epoch: st.epoch, Seq: seq, Owner: w.cfg.WorkerID, LeaseEpoch: s.Held().Epoch()}
			if fp != 0 {
				p.FP = strconv.FormatUint(fp, 16)
			}
			by[st.worker] = append(by[st.worker], p)
			if st.addr != "" {
				addrs[st.worker] = st.addr
			}
			sent = append(sent, pending{s.ID(), fp, seq})
		}
		w.sbMu.Unlock()
	}
	ok := map[string]bool{}
	for to, ps := range by {
		addr := addrs[to]
		if addr == "" {
			addr = w.peerAddr(ctx, to)
		}
		if err := w.postPositions(ctx, to, addr, ps); err != nil {
			w.log.Debug().Err(err).Str("to", to).Int("positions", len(ps)).Msg("standby positions (the next pass sends them again)")
			continue
		}
		for _, p := range ps {
			ok[p.ConnectionID] = true
		}
	}
	w.sbMu.Lock()
	for _, p := range sent {
		if st := w.ownStandbys[p.id]; st != nil && ok[p.id] {
			st.pushed, st.pushedSeq = p.fp, p.seq
		}
	}
	w.sbMu.Unlock()
}

// postPositions sends ps to worker to.
func (w *Worker) postPositions(ctx context.Context, to, addr string, ps []position) error {
	if addr == "" {
		return fmt.Errorf("no admin address for %s", to)
	}
	body, err := json.Marshal(map[string][]position{"positions": ps})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	res, err := w.peerCall(ctx, http.MethodPost, addr, standbyPositionsPath, nil, bytes.NewReader(body))
	if err != nil {
		return err
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusAccepted {
		return fmt.Errorf("standby positions at %s: %s", to, res.Status)
	}
	return nil
}

// maxPositions bounds one positions post (a worker holds at most
// MaxSessions standbys; a post larger than this is refused).
const maxPositions = 1 << 20

// serveStandbyPositions is POST /standby/positions: the owner's positions
// of sessions this worker stands by for; each moves its standby's window
// start (an unknown session or an older standby epoch is ignored).
func (w *Worker) serveStandbyPositions(rw http.ResponseWriter, r *http.Request) {
	var body struct {
		Positions []position `json:"positions"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxPositions)).Decode(&body); err != nil {
		writeJSON(rw, http.StatusBadRequest, map[string]string{"error": "positions: not a JSON positions document: " + err.Error()})
		return
	}
	for i, p := range body.Positions {
		var fp uint64
		var err error
		if p.FP != "" {
			fp, err = strconv.ParseUint(p.FP, 16, 64)
		}
		if err != nil || (fp == 0) == (p.Seq < 1) || !notify.ValidConnectionID(p.ConnectionID) {
			writeJSON(rw, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("positions[%d]: want a valid connection_id and either a hexadecimal fp or a positive seq", i)})
			return
		}
		w.mu.Lock()
		e := w.standbys[p.ConnectionID]
		current := e != nil && e.tok.Epoch == p.Epoch
		superseded := e != nil && e.tok.Epoch < p.Epoch
		if current && p.Owner != "" && p.LeaseEpoch > 0 {
			e.owner, e.ownerEpoch = p.Owner, p.LeaseEpoch
		}
		w.mu.Unlock()
		if superseded {
			// The owner follows a newer assignment: this one was replaced.
			e.sb.Close(errStandbyFenced)
		}
		switch {
		case !current:
		case fp != 0:
			e.sb.AlignAfter(fp)
		default:
			e.sb.Trim(p.Seq)
		}
	}
	writeJSON(rw, http.StatusAccepted, map[string]int{"positions": len(body.Positions)})
}
