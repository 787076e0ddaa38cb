// A BatchWriteItem: every item's image before read under the items' key
// locks, each Put or Delete admitted on its own (the throttled ones
// answered as UnprocessedItems, as DynamoDB does), the admitted ones
// forwarded in one request, metered and scheduled on the mirror.

package dynamodel

import (
	"context"
	"encoding/json"
	"errors"
)

// batchRequest is one Put or Delete of a BatchWriteItem.
type batchRequest struct {
	table *tableInfo
	raw   json.RawMessage
	put   item // nil: a delete
	k     key
	old   item
	d     demand
}

func (m *Model) batchWrite(ctx context.Context, body []byte) *reply {
	const op = "BatchWriteItem"
	ctx, cancel := writeContext(ctx)
	defer cancel()
	var req map[string]json.RawMessage
	var in struct{ RequestItems map[string][]json.RawMessage }
	if json.Unmarshal(body, &req) != nil || json.Unmarshal(body, &in) != nil {
		return m.forward(ctx, m.primary, op, body)
	}
	fault := m.drawFault()
	if fault == FaultBefore {
		for name := range in.RequestItems {
			m.meter.add(name, op, Usage{Requests: 1, Faults: 1}, nil, nil)
		}
		return internalError()
	}
	if !m.imaging {
		return faulted(fault, m.forward(ctx, m.primary, op, body))
	}
	var reqs []*batchRequest
	var ids []string
	for name, list := range in.RequestItems {
		t, err := m.table(ctx, name)
		if err != nil {
			return m.forward(ctx, m.primary, op, body)
		}
		for _, raw := range list {
			var r struct {
				PutRequest    *struct{ Item item }
				DeleteRequest *struct{ Key item }
			}
			if json.Unmarshal(raw, &r) != nil || (r.PutRequest == nil) == (r.DeleteRequest == nil) {
				return m.forward(ctx, m.primary, op, body)
			}
			br := &batchRequest{table: t, raw: raw}
			src := item(nil)
			if r.PutRequest != nil {
				br.put, src = r.PutRequest.Item, r.PutRequest.Item
			} else {
				src = r.DeleteRequest.Key
			}
			k, ok := t.keyOf(src)
			if !ok {
				return m.forward(ctx, m.primary, op, body)
			}
			br.k = k
			reqs = append(reqs, br)
			ids = append(ids, k.id)
		}
	}
	unlock := m.locks.lock(ids...)
	defer unlock()
	for _, br := range reqs {
		old, err := m.image(ctx, br.table, br.k)
		if errors.Is(err, errRefused) {
			return m.forward(ctx, m.primary, op, body)
		}
		if err != nil {
			m.logf("%s: reading an item before: %v", op, err)
			return &reply{drop: true}
		}
		br.old = old
	}
	send := map[string][]json.RawMessage{}
	unprocessed := map[string][]json.RawMessage{}
	var admitted []*batchRequest
	var why []reason
	var whyTable *tableInfo
	for _, br := range reqs {
		br.d = demand{table: br.table, write: true, partition: br.k.partition,
			units: writeUnits(max(itemSize(br.old), itemSize(br.put))), index: br.table.indexWrites(br.old, br.put)}
		if w := m.thr.admit(br.d); w != nil {
			why, whyTable = w, br.table
			unprocessed[br.table.name] = append(unprocessed[br.table.name], br.raw)
			m.meter.add(br.table.name, op, Usage{Throttled: 1}, nil, nil)
			continue
		}
		send[br.table.name] = append(send[br.table.name], br.raw)
		admitted = append(admitted, br)
	}
	if len(admitted) == 0 && whyTable != nil {
		return throttleReply(whyTable, why)
	}
	req["RequestItems"], _ = json.Marshal(send)
	b, _ := json.Marshal(req)
	rep, err := m.call(ctx, m.primary, op, b)
	if err != nil {
		m.logf("%s: %v", op, err)
		return &reply{drop: true}
	}
	if rep.status != 200 {
		return rep
	}
	var out map[string]json.RawMessage
	_ = json.Unmarshal(rep.body, &out)
	var theirs map[string][]json.RawMessage
	_ = json.Unmarshal(out["UnprocessedItems"], &theirs)
	for name, list := range theirs {
		unprocessed[name] = append(unprocessed[name], list...)
	}
	counted := map[string]bool{}
	for _, br := range admitted {
		u := Usage{Items: 1, WriteUnits: br.d.units}
		if !counted[br.table.name] {
			counted[br.table.name] = true
			u.Requests = 1
			if fault != "" {
				u.Faults = 1
			}
		}
		m.meterWrite(br.table.name, op, u, br.d.index)
		if m.mirror != nil {
			m.mirror.schedule(br.table.name, br.k, br.put)
		}
	}
	out["UnprocessedItems"], _ = json.Marshal(unprocessed)
	body, _ = json.Marshal(out)
	return faulted(fault, &reply{status: 200, body: body})
}
