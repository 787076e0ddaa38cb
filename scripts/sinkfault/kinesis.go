// The kinesis sink's PutRecords: records refused one by one (transient:
// Kinesis has no per-record permanent code), or the whole request refused
// permanently.

package sinkfault

import (
	"encoding/json"
	"net/http"
)

type kinesisRecord struct {
	Data []byte `json:"Data"`
}

func (p *Proxy) kinesisPut(w http.ResponseWriter, r *http.Request, body []byte) {
	var req map[string]json.RawMessage
	var recs []json.RawMessage
	if json.Unmarshal(body, &req) != nil || json.Unmarshal(req["Records"], &recs) != nil {
		p.forwardRaw(w, r, p.cfg.Dest, body)
		return
	}
	// A record is one entry of the draw (msgs: its messages, several in a
	// record the sink aggregated), like an SQS pack; keys: its first.
	keys := make([]Key, len(recs))
	msgs := make([][]Key, len(recs))
	total := 0
	for i, raw := range recs {
		var kr kinesisRecord
		_ = json.Unmarshal(raw, &kr) // Data is base64 in JSON: []byte decodes it
		msgs[i] = recordKeys(kr.Data)
		keys[i] = msgs[i][0]
		total += len(msgs[i])
	}
	worker := ""
	if len(keys) > 0 {
		worker = keys[0].Worker
	}
	// A permanent refusal is the whole request's (Kinesis has no
	// per-record permanent code): drawn once per request.
	pl := p.draw(msgs, false)
	permanent := false
	p.mu.Lock()
	if rf := p.refuse; rf.Share > 0 && rf.Permanent > 0 && p.rng.Float64() < rf.Share*rf.Permanent {
		permanent = true
		for _, ks := range msgs {
			for _, k := range ks {
				p.permanent[permanentKey(k)] = true
			}
		}
	}
	for i, ks := range msgs {
		if pl.refused[i].permanent {
			permanent = true // a record refused permanently before
		}
		for _, k := range ks {
			if p.permanent[permanentKey(k)] {
				permanent = true // a message refused permanently before, now in another record
			}
		}
	}
	p.mu.Unlock()
	if !p.hold(r.Context(), worker, pl.holdReq) {
		return
	}
	if permanent {
		p.count(func(s *Stats) { s.PermanentReqs++; s.Permanent += int64(total) })
		jsonError(w, http.StatusBadRequest, kinesisContentType, CodeKinesisDenied, "refused by the chaos sink proxy (permanent)", true)
		return
	}
	var keep []json.RawMessage
	var keepKeys [][]Key
	for i, raw := range recs {
		if _, ok := pl.refused[i]; ok {
			continue
		}
		keep = append(keep, raw)
		keepKeys = append(keepKeys, msgs[i])
	}
	type result struct {
		SequenceNumber string `json:"SequenceNumber,omitempty"`
		ShardID        string `json:"ShardId,omitempty"`
		ErrorCode      string `json:"ErrorCode,omitempty"`
		ErrorMessage   string `json:"ErrorMessage,omitempty"`
	}
	var ans struct {
		FailedRecordCount int      `json:"FailedRecordCount"`
		Records           []result `json:"Records"`
		EncryptionType    string   `json:"EncryptionType,omitempty"`
	}
	status, h := http.StatusOK, http.Header{"Content-Type": {kinesisContentType}}
	if len(keep) > 0 {
		st, hh, b, ok := p.forwardKept(w, r, req, "Records", keep)
		if !ok {
			return
		}
		if st != http.StatusOK || json.Unmarshal(b, &ans) != nil || len(ans.Records) != len(keep) {
			writeAnswer(w, st, hh, b)
			return
		}
		var stored []Key
		for i, res := range ans.Records {
			if res.ErrorCode == "" {
				stored = append(stored, keepKeys[i]...)
			}
		}
		p.stamp(stored)
		status, h = st, hh
	}
	merged := make([]result, 0, len(recs))
	next := 0
	for i := range recs {
		if _, ok := pl.refused[i]; ok {
			merged = append(merged, result{ErrorCode: CodeKinesisThrottle, ErrorMessage: "refused by the chaos sink proxy (transient)"})
			p.count(func(s *Stats) { s.Transient += int64(len(msgs[i])) })
			continue
		}
		merged = append(merged, ans.Records[next])
		next++
	}
	ans.Records = merged
	ans.FailedRecordCount = 0
	for _, res := range merged {
		if res.ErrorCode != "" {
			ans.FailedRecordCount++
		}
	}
	out, _ := json.Marshal(ans)
	waitAnswer(r.Context(), pl.holdAnswer)
	writeAnswer(w, status, h, out)
}
