// The sqs sink's calls to the output queue: SendMessageBatch (entries
// refused one by one, the kept ones forwarded) and SendMessage.

package sinkfault

import (
	"encoding/json"
	"net/http"

	"github.com/wsfleet/wsfleet/workers/streamer/sink/consume"
)

type sqsEntry struct {
	ID                string                                  `json:"Id"`
	Body              string                                  `json:"MessageBody"`
	MessageAttributes map[string]struct{ StringValue string } `json:"MessageAttributes"`
}

// keys are the record keys of the entry's envelopes.
func (e sqsEntry) keys() []Key {
	return keysOf(e.Body, e.MessageAttributes[consume.ContentTypeAttribute].StringValue)
}

func (p *Proxy) sqsBatch(w http.ResponseWriter, r *http.Request, body []byte) {
	var req map[string]json.RawMessage
	var raws []json.RawMessage // the entries as sent (FIFO group and deduplication ids kept)
	if json.Unmarshal(body, &req) != nil || json.Unmarshal(req["Entries"], &raws) != nil {
		p.forwardRaw(w, r, p.cfg.Dest, body)
		return
	}
	entries := make([]sqsEntry, len(raws))
	keys := make([][]Key, len(entries))
	byID := map[string][]Key{}
	for i := range raws {
		_ = json.Unmarshal(raws[i], &entries[i])
		keys[i] = entries[i].keys()
		byID[entries[i].ID] = keys[i]
	}
	worker := ""
	if len(keys) > 0 {
		worker = keys[0][0].Worker
	}
	pl := p.draw(keys, true)
	if !p.hold(r.Context(), worker, pl.holdReq) {
		return
	}
	type failed struct {
		ID          string `json:"Id"`
		Code        string `json:"Code"`
		Message     string `json:"Message"`
		SenderFault bool   `json:"SenderFault"`
	}
	var refusedList []failed
	var keep []json.RawMessage
	for i, e := range entries {
		rf, ok := pl.refused[i]
		if !ok {
			keep = append(keep, raws[i])
			continue
		}
		f := failed{ID: e.ID, Code: CodeThrottled, Message: "refused by the chaos sink proxy (transient)"}
		switch {
		case rf.permanent:
			f.Code, f.Message, f.SenderFault = CodeInvalid, "refused by the chaos sink proxy (permanent)", true
			p.count(func(s *Stats) { s.Permanent++ })
		default:
			if i%2 == 1 {
				f.Code = CodeInternal
			}
			p.count(func(s *Stats) { s.Transient++ })
		}
		refusedList = append(refusedList, f)
	}
	var ans struct {
		Successful []json.RawMessage `json:"Successful"`
		Failed     []json.RawMessage `json:"Failed"`
	}
	status, h := http.StatusOK, http.Header{"Content-Type": {sqsContentType}}
	if len(keep) > 0 {
		st, hh, b, ok := p.forwardKept(w, r, req, "Entries", keep)
		if !ok {
			return
		}
		if st != http.StatusOK || json.Unmarshal(b, &ans) != nil {
			writeAnswer(w, st, hh, b)
			return
		}
		var stored []Key
		for _, s := range ans.Successful {
			var x struct{ Id string }
			if json.Unmarshal(s, &x) == nil {
				stored = append(stored, byID[x.Id]...)
			}
		}
		p.stamp(stored)
		status, h = st, hh
	}
	for _, f := range refusedList {
		b, _ := json.Marshal(f)
		ans.Failed = append(ans.Failed, b)
	}
	if ans.Successful == nil {
		ans.Successful = []json.RawMessage{}
	}
	if ans.Failed == nil {
		ans.Failed = []json.RawMessage{}
	}
	out, _ := json.Marshal(ans)
	waitAnswer(r.Context(), pl.holdAnswer)
	writeAnswer(w, status, h, out)
}

func (p *Proxy) sqsSingle(w http.ResponseWriter, r *http.Request, body []byte) {
	var req sqsEntry
	_ = json.Unmarshal(body, &req)
	keys := req.keys()
	pl := p.draw([][]Key{keys}, true)
	if !p.hold(r.Context(), keys[0].Worker, pl.holdReq) {
		return
	}
	if rf, ok := pl.refused[0]; ok {
		if rf.permanent {
			p.count(func(s *Stats) { s.Permanent++ })
			jsonError(w, http.StatusBadRequest, sqsContentType, "com.amazonaws.sqs#"+CodeInvalid, "refused by the chaos sink proxy (permanent)", true)
		} else {
			p.count(func(s *Stats) { s.Transient++ })
			jsonError(w, http.StatusInternalServerError, sqsContentType, "com.amazonaws.sqs#"+CodeInternal, "refused by the chaos sink proxy (transient)", false)
		}
		return
	}
	p.count(func(s *Stats) { s.Forwarded++ })
	st, h, b, err := p.upstream(r.Context(), r, p.cfg.Dest, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if st == http.StatusOK {
		p.stamp(keys)
	}
	waitAnswer(r.Context(), pl.holdAnswer)
	writeAnswer(w, st, h, b)
}
