package dynamodel

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/testkit/ddbrules"
)

// Billing (the arithmetic is testkit/ddbrules', shared with
// testkit/simddb). The model meters what each request costs as DynamoDB bills an
// on-demand table, from the items on the wire, whatever the client asks
// (ReturnConsumedCapacity) and whatever dynalite counts:
//
//   - a write (PutItem, UpdateItem, DeleteItem, each item of a
//     BatchWriteItem) costs ceil(max(size before, size after) / 1 KB) write
//     units, at least 1; a write whose condition failed costs the size of
//     the item as it is, at least 1;
//   - every index entry the write puts or deletes costs ceil(its projected
//     size / 1 KB) index write units, at least 1; a change of the entry's
//     key is a delete and a put; a change of projected attributes only is
//     one write of the larger entry; a write that changes nothing the index
//     projects costs it nothing;
//   - a consistent GetItem costs ceil(size / 4 KB) read units, at least 1,
//     an eventually consistent one half that (so does each key of a
//     BatchGetItem, found or not); a Query or Scan page costs ceil(the
//     bytes of its items / 4 KB), at least 1, halved when eventually
//     consistent (every index read is).
//
// Reads are metered on the items returned: a ProjectionExpression or a
// FilterExpression makes the meter count less than DynamoDB bills (it bills
// the whole items read).

// av is a DynamoDB AttributeValue as the JSON protocol carries it.
type av struct {
	S    *string       `json:"S,omitempty"`
	N    *string       `json:"N,omitempty"`
	B    *string       `json:"B,omitempty"`
	BOOL *bool         `json:"BOOL,omitempty"`
	NULL *bool         `json:"NULL,omitempty"`
	SS   []string      `json:"SS,omitempty"`
	NS   []string      `json:"NS,omitempty"`
	BS   []string      `json:"BS,omitempty"`
	L    []av          `json:"L,omitempty"`
	M    map[string]av `json:"M,omitempty"`
}

// item is an item image: attribute name → its AttributeValue JSON.
type item = map[string]json.RawMessage

func parseAV(raw json.RawMessage) av {
	var v av
	_ = json.Unmarshal(raw, &v)
	return v
}

// itemSize is an item's size as DynamoDB counts it, by the store's
// definition (dynamostore.ItemSize, which cites the rules): the model and
// the store meter the same item alike.
func itemSize(it item) int {
	sdk := make(map[string]types.AttributeValue, len(it))
	for name, raw := range it {
		sdk[name] = parseAV(raw).sdk()
	}
	return dynamostore.ItemSize(sdk)
}

// sdk is v as the SDK's AttributeValue (nil when v holds no value): a
// binary's base64 decoded to its raw bytes (left as it is when it is not
// base64).
func (v av) sdk() types.AttributeValue {
	switch {
	case v.S != nil:
		return &types.AttributeValueMemberS{Value: *v.S}
	case v.N != nil:
		return &types.AttributeValueMemberN{Value: *v.N}
	case v.B != nil:
		return &types.AttributeValueMemberB{Value: binary(*v.B)}
	case v.BOOL != nil:
		return &types.AttributeValueMemberBOOL{Value: *v.BOOL}
	case v.NULL != nil:
		return &types.AttributeValueMemberNULL{Value: *v.NULL}
	case v.SS != nil:
		return &types.AttributeValueMemberSS{Value: v.SS}
	case v.NS != nil:
		return &types.AttributeValueMemberNS{Value: v.NS}
	case v.BS != nil:
		bs := make([][]byte, len(v.BS))
		for i, b := range v.BS {
			bs[i] = binary(b)
		}
		return &types.AttributeValueMemberBS{Value: bs}
	case v.L != nil:
		l := make([]types.AttributeValue, len(v.L))
		for i, e := range v.L {
			l[i] = e.sdk()
		}
		return &types.AttributeValueMemberL{Value: l}
	case v.M != nil:
		m := make(map[string]types.AttributeValue, len(v.M))
		for k, e := range v.M {
			m[k] = e.sdk()
		}
		return &types.AttributeValueMemberM{Value: m}
	}
	return nil
}

func binary(b64 string) []byte {
	if b, err := base64.StdEncoding.DecodeString(b64); err == nil {
		return b
	}
	return []byte(b64)
}

// writeUnits is the write units of a write whose larger image is size
// bytes: ceil(size / 1 KB), at least 1.
func writeUnits(size int) float64 { return ddbrules.WriteUnits(size) }

// readUnits is the read units of reading size bytes: ceil(size / 4 KB), at
// least 1, halved when eventually consistent.
func readUnits(size int, consistent bool) float64 { return ddbrules.ReadUnits(size, consistent) }

// sameValue reports whether two AttributeValues are equal (sets compared
// as sets).
func sameValue(a, b json.RawMessage) bool {
	if string(a) == string(b) {
		return true
	}
	x, y := parseAV(a), parseAV(b)
	for _, v := range []*av{&x, &y} {
		for _, set := range [][]string{v.SS, v.NS, v.BS} {
			slices.Sort(set)
		}
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return string(xs) == string(ys)
}

func sameItem(a, b item) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !sameValue(v, w) {
			return false
		}
	}
	return true
}

// Usage is what the requests of one operation on one table cost.
type Usage struct {
	Requests        int64   `json:"requests"`          // requests (a batch is one)
	Items           int64   `json:"items"`             // items written or keys read (a batch's count)
	WriteUnits      float64 `json:"write_units"`       // base table write units
	IndexWriteUnits float64 `json:"index_write_units"` // index write units, all indexes
	ReadUnits       float64 `json:"read_units"`        // read units
	ConditionFailed int64   `json:"condition_failed"`  // writes whose condition failed (billed)
	Throttled       int64   `json:"throttled"`         // requests or batch items throttled (not billed)
	Faults          int64   `json:"faults"`            // writes answered 500 or dropped
}

func (u *Usage) add(v Usage) {
	u.Requests += v.Requests
	u.Items += v.Items
	u.WriteUnits += v.WriteUnits
	u.IndexWriteUnits += v.IndexWriteUnits
	u.ReadUnits += v.ReadUnits
	u.ConditionFailed += v.ConditionFailed
	u.Throttled += v.Throttled
	u.Faults += v.Faults
}

// TableMeter is one table's usage.
type TableMeter struct {
	Ops             map[string]Usage   `json:"ops"`               // by operation
	IndexWriteUnits map[string]float64 `json:"index_write_units"` // by index
	IndexReadUnits  map[string]float64 `json:"index_read_units"`  // by index
}

// Total is the table's usage over all operations.
func (t TableMeter) Total() Usage {
	var u Usage
	for _, v := range t.Ops {
		u.add(v)
	}
	return u
}

// Meter is a snapshot of the model's billing counters, by table.
type Meter struct {
	Tables map[string]TableMeter `json:"tables"`
}

// Op is the usage of one operation on one table (zero when none).
func (m Meter) Op(table, op string) Usage { return m.Tables[table].Ops[op] }

type meter struct {
	on     bool // the profile's Meter
	mu     sync.Mutex
	tables map[string]*TableMeter
}

func (m *meter) table(name string) *TableMeter {
	t := m.tables[name]
	if t == nil {
		t = &TableMeter{Ops: map[string]Usage{}, IndexWriteUnits: map[string]float64{}, IndexReadUnits: map[string]float64{}}
		m.tables[name] = t
	}
	return t
}

// add records u for op on table, and the per-index write and read units.
func (m *meter) add(table, op string, u Usage, indexWrites, indexReads map[string]float64) {
	if !m.on {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.table(table)
	v := t.Ops[op]
	v.add(u)
	t.Ops[op] = v
	for ix, n := range indexWrites {
		t.IndexWriteUnits[ix] += n
	}
	for ix, n := range indexReads {
		t.IndexReadUnits[ix] += n
	}
}

func (m *meter) snapshot() Meter {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := Meter{Tables: map[string]TableMeter{}}
	for name, t := range m.tables {
		out.Tables[name] = TableMeter{Ops: maps.Clone(t.Ops), IndexWriteUnits: maps.Clone(t.IndexWriteUnits), IndexReadUnits: maps.Clone(t.IndexReadUnits)}
	}
	return out
}
