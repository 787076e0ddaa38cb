package dynamodel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The request path. A request is delayed by half its drawn latency, handled,
// and answered after the other half. Handling a write (with lag, throttling
// or billing on) holds the item's key lock while it reads the item from the
// primary (a consistent GetItem: the image before), admits the write
// (throttle.go), forwards it, learns the image after (the PutItem's item,
// nothing for a DeleteItem, the UpdateItem's ALL_NEW: asked for when the
// caller did not ask for return values, and then stripped from the reply,
// otherwise a second consistent read), meters it and schedules the image
// on the mirror. An UpdateItem's new index key is known only once applied:
// when its index key's bucket is empty the item is put back as it was
// (under the same lock, which consistent GetItems also take) and the write
// answers throttled. Latency is slept outside the lock.

const (
	targetPrefix    = "DynamoDB_20120810."
	upstreamTimeout = 30 * time.Second
)

var requestSeq atomic.Int64

// ServeHTTP serves DynamoDB's JSON protocol (and the control endpoints,
// under /dynamodel/).
func (m *Model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, controlPrefix) {
		m.control(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), targetPrefix)
	if r.Method != http.MethodPost || !ok {
		m.passThrough(w, r, body)
		return
	}
	ctx := r.Context()
	lat := m.draw(m.prof.Latency[op])
	if !sleep(ctx, lat/2) {
		return
	}
	rep := m.handle(ctx, op, body)
	if !sleep(ctx, lat-lat/2) {
		return
	}
	respond(w, rep)
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func respond(w http.ResponseWriter, rep *reply) {
	if rep.drop {
		panic(http.ErrAbortHandler) // the server closes the connection without a reply
	}
	h := w.Header()
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(rep.body)), 10))
	h.Set("X-Amzn-Requestid", fmt.Sprintf("DYNAMODEL%043d", requestSeq.Add(1)))
	h.Set("Content-Length", strconv.Itoa(len(rep.body)))
	w.WriteHeader(rep.status)
	_, _ = w.Write(rep.body)
}

// passThrough forwards what is not a DynamoDB operation (dynalite's health
// check, an unknown target) to the primary as it is.
func (m *Model) passThrough(w http.ResponseWriter, r *http.Request, body []byte) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, m.primary+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := m.client.Do(req)
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func (m *Model) handle(ctx context.Context, op string, body []byte) *reply {
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem":
		return m.writeItem(ctx, op, body)
	case "BatchWriteItem":
		return m.batchWrite(ctx, body)
	case "GetItem":
		return m.getItem(ctx, body)
	case "BatchGetItem":
		return m.batchGet(ctx, body)
	case "Query", "Scan":
		return m.query(ctx, op, body)
	case "CreateTable", "UpdateTable", "DeleteTable":
		return m.ddl(ctx, op, body)
	}
	return m.forward(ctx, m.primary, op, body)
}

// forward sends the request to a dynalite and returns its answer (a dropped
// connection when it does not answer).
func (m *Model) forward(ctx context.Context, endpoint, op string, body []byte) *reply {
	ctx, cancel := context.WithTimeout(ctx, upstreamTimeout)
	defer cancel()
	rep, err := m.call(ctx, endpoint, op, body)
	if err != nil {
		m.logf("%s: %v", op, err)
		return &reply{drop: true}
	}
	return rep
}

// writeContext is a write's context: it goes on when the client gives up
// (DynamoDB applies a write it has received).
func writeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), upstreamTimeout)
}

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
		m.meter.add(t.name, op, Usage{Requests: 1, Throttled: 1}, nil, nil)
		return throttleReply(t, why)
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
			m.meter.add(t.name, op, Usage{Requests: 1, Throttled: 1}, nil, nil)
			return throttleReply(t, why)
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
		m.meter.add(t.name, op, Usage{Requests: 1, Throttled: 1}, nil, nil)
		return throttleReply(t, why)
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
		m.meter.add(t.name, op, Usage{Requests: 1, Throttled: 1}, nil, nil)
		return throttleReply(t, why)
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

// ddl forwards a table's creation, change or deletion to the primary and,
// when it succeeds, to the mirror (before answering: the mirror has the
// table before any write to it).
func (m *Model) ddl(ctx context.Context, op string, body []byte) *reply {
	ctx, cancel := writeContext(ctx)
	defer cancel()
	rep := m.forward(ctx, m.primary, op, body)
	if rep.status != 200 {
		return rep
	}
	var in struct{ TableName string }
	_ = json.Unmarshal(body, &in)
	m.tables.forget(in.TableName)
	if m.mirror != nil {
		if op != "UpdateTable" {
			m.mirror.bump(in.TableName)
		}
		if mrep, err := m.call(ctx, m.mirror.endpoint, op, body); err != nil || mrep.status != 200 {
			m.logf("mirror %s %s: %v", op, in.TableName, errors.Join(err, replyError(op, mrep)))
		} else if op != "DeleteTable" {
			m.mirror.waitActive(ctx, in.TableName)
		}
	}
	return rep
}
