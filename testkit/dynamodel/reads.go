// Reads: GetItem, BatchGetItem, Query and Scan, each admitted on the
// throttle (a Query on its partition key value, from its key condition),
// answered by the primary when consistent and by the mirror (lagging)
// otherwise, and billed on the items returned.

package dynamodel

import (
	"context"
	"encoding/json"
	"maps"
	"regexp"
	"strings"
)

func (m *Model) getItem(ctx context.Context, body []byte) *reply {
	const op = "GetItem"
	var in struct {
		TableName      string
		Key            item
		ConsistentRead bool
	}
	if json.Unmarshal(body, &in) != nil || !m.imaging {
		return m.forward(ctx, m.primary, op, body)
	}
	t, err := m.table(ctx, in.TableName)
	if err != nil {
		return m.forward(ctx, m.primary, op, body)
	}
	k, ok := t.keyOf(in.Key)
	if !ok {
		return m.forward(ctx, m.primary, op, body)
	}
	d := demand{table: t, partition: k.partition, units: readUnits(0, in.ConsistentRead)}
	if why := m.thr.admit(d); why != nil {
		return m.throttled(t, op, why)
	}
	var rep *reply
	if in.ConsistentRead || m.mirror == nil {
		unlock := m.locks.lock(k.id)
		rep = m.forward(ctx, m.primary, op, body)
		unlock()
	} else {
		rep = m.forward(ctx, m.mirror.endpoint, op, body)
	}
	if rep.status != 200 {
		return rep
	}
	var out struct{ Item item }
	_ = json.Unmarshal(rep.body, &out)
	units := readUnits(itemSize(out.Item), in.ConsistentRead)
	if extra := units - d.units; extra > 0 {
		d.units = extra
		m.thr.charge(d)
	}
	m.meter.add(t.name, op, Usage{Requests: 1, Items: 1, ReadUnits: units}, nil, nil)
	return rep
}

func (m *Model) batchGet(ctx context.Context, body []byte) *reply {
	const op = "BatchGetItem"
	var req map[string]json.RawMessage
	var in struct {
		RequestItems map[string]map[string]json.RawMessage
	}
	if !m.imaging || json.Unmarshal(body, &req) != nil || json.Unmarshal(body, &in) != nil {
		return m.forward(ctx, m.primary, op, body)
	}
	type group struct {
		table      *tableInfo
		consistent bool
		n          int // keys sent
	}
	sends := [2]map[string]map[string]json.RawMessage{{}, {}} // [primary, mirror]
	unprocessed := map[string]map[string]json.RawMessage{}
	groups := map[string]*group{}
	var why []reason
	var whyTable *tableInfo
	for name, entry := range in.RequestItems {
		t, err := m.table(ctx, name)
		if err != nil {
			return m.forward(ctx, m.primary, op, body)
		}
		var keys []item
		var consistent bool
		_ = json.Unmarshal(entry["Keys"], &keys)
		_ = json.Unmarshal(entry["ConsistentRead"], &consistent)
		g := &group{table: t, consistent: consistent}
		groups[name] = g
		var ok, throttled []item
		for _, it := range keys {
			k, valid := t.keyOf(it)
			if !valid {
				return m.forward(ctx, m.primary, op, body)
			}
			if w := m.thr.admit(demand{table: t, partition: k.partition, units: readUnits(0, consistent)}); w != nil {
				why, whyTable = w, t
				throttled = append(throttled, it)
				continue
			}
			ok = append(ok, it)
		}
		if len(throttled) > 0 {
			e := maps.Clone(entry)
			e["Keys"], _ = json.Marshal(throttled)
			unprocessed[name] = e
			m.meter.add(name, op, Usage{Throttled: int64(len(throttled))}, nil, nil)
		}
		if len(ok) > 0 {
			e := maps.Clone(entry)
			e["Keys"], _ = json.Marshal(ok)
			side := 0
			if !consistent && m.mirror != nil {
				side = 1
			}
			sends[side][name] = e
			g.n = len(ok)
		}
	}
	if len(sends[0])+len(sends[1]) == 0 && whyTable != nil {
		return throttleReply(whyTable, why)
	}
	responses := map[string][]item{}
	for side, send := range sends {
		if len(send) == 0 {
			continue
		}
		endpoint := m.primary
		if side == 1 {
			endpoint = m.mirror.endpoint
		}
		r := maps.Clone(req)
		r["RequestItems"], _ = json.Marshal(send)
		b, _ := json.Marshal(r)
		rep := m.forward(ctx, endpoint, op, b)
		if rep.status != 200 {
			return rep
		}
		var out struct {
			Responses       map[string][]item
			UnprocessedKeys map[string]map[string]json.RawMessage
		}
		_ = json.Unmarshal(rep.body, &out)
		for name, items := range out.Responses {
			responses[name] = append(responses[name], items...)
		}
		for name, e := range out.UnprocessedKeys {
			unprocessed[name] = e // dynalite leaves none; a table's keys are all on one side
		}
	}
	for name, g := range groups {
		if g.n == 0 {
			continue
		}
		units := 0.0
		for _, it := range responses[name] {
			units += readUnits(itemSize(it), g.consistent)
		}
		units += float64(g.n-len(responses[name])) * readUnits(0, g.consistent) // keys not found
		m.meter.add(name, op, Usage{Requests: 1, Items: int64(g.n), ReadUnits: units}, nil, nil)
	}
	out := map[string]any{"Responses": responses, "UnprocessedKeys": unprocessed}
	b, _ := json.Marshal(out)
	return &reply{status: 200, body: b}
}

var andRE = regexp.MustCompile(`(?i)\s+and\s+`)

var eqRE = regexp.MustCompile(`^\(*\s*([#\w.]+|:\w+)\s*=\s*([#\w.]+|:\w+)\s*\)*$`)

// partitionValue is the canonical value a KeyConditionExpression gives the
// partition key attribute attr ("" when it cannot tell).
func partitionValue(expr string, names map[string]string, values item, attr string) string {
	for _, clause := range andRE.Split(strings.TrimSpace(expr), -1) {
		mt := eqRE.FindStringSubmatch(strings.TrimSpace(clause))
		if mt == nil {
			continue
		}
		name, val := mt[1], mt[2]
		if strings.HasPrefix(name, ":") {
			name, val = val, name
		}
		if n, ok := names[name]; ok {
			name = n
		}
		if name == attr {
			if c, ok := canon(values[val]); ok {
				return c
			}
		}
	}
	return ""
}

func (m *Model) query(ctx context.Context, op string, body []byte) *reply {
	var in struct {
		TableName                 string
		IndexName                 string
		ConsistentRead            bool
		KeyConditionExpression    string
		ExpressionAttributeNames  map[string]string
		ExpressionAttributeValues item
	}
	if json.Unmarshal(body, &in) != nil || !m.imaging {
		return m.forward(ctx, m.primary, op, body)
	}
	t, err := m.table(ctx, in.TableName)
	if err != nil {
		return m.forward(ctx, m.primary, op, body)
	}
	ix := t.index(in.IndexName)
	consistent := in.ConsistentRead && (ix == nil || !ix.global)
	d := demand{table: t, units: readUnits(0, consistent)}
	if op == "Query" {
		attr := t.hash
		if ix != nil {
			attr = ix.hash
			if ix.global {
				d.readIndex = ix
			}
		}
		d.partition = partitionValue(in.KeyConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues, attr)
	}
	if why := m.thr.admit(d); why != nil {
		return m.throttled(t, op, why)
	}
	endpoint := m.primary
	if !consistent && m.mirror != nil {
		endpoint = m.mirror.endpoint
	}
	rep := m.forward(ctx, endpoint, op, body)
	if rep.status != 200 {
		return rep
	}
	var out struct{ Items []item }
	_ = json.Unmarshal(rep.body, &out)
	size := 0
	for _, it := range out.Items {
		size += itemSize(it)
	}
	units := readUnits(size, consistent)
	if extra := units - d.units; extra > 0 {
		d.units = extra
		m.thr.charge(d)
	}
	var byIndex map[string]float64
	if ix != nil {
		byIndex = map[string]float64{ix.name: units}
	}
	m.meter.add(t.name, op, Usage{Requests: 1, Items: int64(len(out.Items)), ReadUnits: units}, nil, byIndex)
	return rep
}
