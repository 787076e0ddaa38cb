// A write of one item (PutItem, UpdateItem, DeleteItem). Handling a write
// (with lag, throttling or billing on) holds the item's key lock while it
// reads the item from the primary (a consistent GetItem: the image before),
// admits the write (throttle.go), forwards it, learns the image after (the
// PutItem's item, nothing for a DeleteItem, the UpdateItem's ALL_NEW: asked
// for when the caller did not ask for return values, and then stripped from
// the reply, otherwise a second consistent read), meters it and schedules
// the image on the mirror. An UpdateItem's new index key is known only once
// applied: when its index key's bucket is empty the item is put back as it
// was (under the same lock, which consistent GetItems also take) and the
// write answers throttled.

package dynamodel

import (
	"context"
	"encoding/json"
	"errors"
)

// errRefused: the primary refused the read of the item before (the key
// does not match the schema): the write is forwarded for dynalite to
// answer.
var errRefused = errors.New("refused")

// image is the item as the primary holds it now (nil: absent).
func (m *Model) image(ctx context.Context, t *tableInfo, k key) (item, error) {
	b, _ := json.Marshal(map[string]any{"TableName": t.name, "Key": k.attrs, "ConsistentRead": true})
	rep, err := m.call(ctx, m.primary, "GetItem", b)
	if err != nil {
		return nil, err
	}
	if rep.status != 200 {
		return nil, errRefused
	}
	var out struct{ Item item }
	if err := json.Unmarshal(rep.body, &out); err != nil {
		return nil, err
	}
	return out.Item, nil
}

// restore puts the item back as it was (an UpdateItem throttled on its
// index after it was applied).
func (m *Model) restore(ctx context.Context, t *tableInfo, k key, old item) {
	op, body := "PutItem", map[string]any{"TableName": t.name, "Item": old}
	if old == nil {
		op, body = "DeleteItem", map[string]any{"TableName": t.name, "Key": k.attrs}
	}
	b, _ := json.Marshal(body)
	if rep, err := m.call(ctx, m.primary, op, b); err != nil || rep.status != 200 {
		m.logf("restoring an item of %s after an index throttle: %v", t.name, errors.Join(err, replyError(op, rep)))
	}
}

func (m *Model) meterWrite(table, op string, u Usage, iw []indexWrite) {
	byIndex := map[string]float64{}
	for _, w := range iw {
		byIndex[w.index.name] += w.units
		u.IndexWriteUnits += w.units
	}
	m.meter.add(table, op, u, byIndex, nil)
}

func stripAttributes(rep *reply) *reply {
	var out map[string]json.RawMessage
	if json.Unmarshal(rep.body, &out) != nil {
		return rep
	}
	delete(out, "Attributes")
	b, _ := json.Marshal(out)
	return &reply{status: rep.status, body: b}
}

func (m *Model) writeItem(ctx context.Context, op string, body []byte) *reply {
	ctx, cancel := writeContext(ctx)
	defer cancel()
	var in struct {
		TableName    string
		Item         item
		Key          item
		ReturnValues string
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return m.forward(ctx, m.primary, op, body)
	}
	fault := m.drawFault()
	if fault == FaultBefore {
		m.meter.add(in.TableName, op, Usage{Requests: 1, Faults: 1}, nil, nil)
		return internalError()
	}
	if !m.imaging {
		return faulted(fault, m.forward(ctx, m.primary, op, body))
	}
	t, err := m.table(ctx, in.TableName)
	if err != nil {
		return m.forward(ctx, m.primary, op, body)
	}
	src := in.Key
	if op == "PutItem" {
		src = in.Item
	}
	k, ok := t.keyOf(src)
	if !ok {
		return m.forward(ctx, m.primary, op, body)
	}
	unlock := m.locks.lock(k.id)
	defer unlock()
	old, err := m.image(ctx, t, k)
	if errors.Is(err, errRefused) {
		return m.forward(ctx, m.primary, op, body)
	}
	if err != nil {
		m.logf("%s: reading the item before: %v", op, err)
		return &reply{drop: true}
	}

	guess := old // the image after, as far as it is known before
	switch op {
	case "PutItem":
		guess = in.Item
	case "DeleteItem":
		guess = nil
	}
	d := demand{table: t, write: true, partition: k.partition, units: writeUnits(max(itemSize(old), itemSize(guess)))}
	if op != "UpdateItem" {
		d.index = t.indexWrites(old, guess)
	}
	if why := m.thr.admit(d); why != nil {
		return m.throttled(t, op, why)
	}

	send, strip := body, false
	if op == "UpdateItem" && (in.ReturnValues == "" || in.ReturnValues == "NONE") {
		var req map[string]json.RawMessage
		_ = json.Unmarshal(body, &req)
		req["ReturnValues"] = json.RawMessage(`"ALL_NEW"`)
		send, _ = json.Marshal(req)
		strip = true
	}
	rep, err := m.call(ctx, m.primary, op, send)
	if err != nil {
		m.logf("%s: %v", op, err)
		return &reply{drop: true}
	}
	switch {
	case rep.status == 200:
	case rep.errType() == "ConditionalCheckFailedException":
		m.meter.add(t.name, op, Usage{Requests: 1, Items: 1, WriteUnits: writeUnits(itemSize(old)), ConditionFailed: 1}, nil, nil)
		return rep
	default:
		return rep
	}

	var after item
	switch op {
	case "PutItem":
		after = in.Item
	case "UpdateItem":
		if strip || in.ReturnValues == "ALL_NEW" {
			var out struct{ Attributes item }
			_ = json.Unmarshal(rep.body, &out)
			after = out.Attributes
		} else if after, err = m.image(ctx, t, k); err != nil {
			m.logf("%s: reading the item after: %v", op, err)
			return &reply{drop: true}
		}
	}
	iw := t.indexWrites(old, after)
	if op == "UpdateItem" {
		if why := m.thr.admit(demand{table: t, write: true, index: iw}); why != nil {
			m.restore(ctx, t, k, old)
			return m.throttled(t, op, why)
		}
	}
	units := writeUnits(max(itemSize(old), itemSize(after)))
	if extra := units - d.units; extra > 0 {
		m.thr.charge(demand{table: t, write: true, partition: k.partition, units: extra})
	}
	u := Usage{Requests: 1, Items: 1, WriteUnits: units}
	if fault != "" {
		u.Faults = 1
	}
	m.meterWrite(t.name, op, u, iw)
	if m.mirror != nil {
		m.mirror.schedule(t.name, k, after)
	}
	if strip {
		rep = stripAttributes(rep)
	}
	return faulted(fault, rep)
}
