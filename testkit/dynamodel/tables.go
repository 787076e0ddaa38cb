package dynamodel

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/wsfleet/wsfleet/testkit/ddbrules"
)

// tableInfo is what the model needs of a table's definition (from the
// primary's DescribeTable).
type tableInfo struct {
	name     string
	arn      string
	hash     string // partition key attribute
	rng      string // sort key attribute ("" when none)
	onDemand bool
	indexes  []indexInfo
	// create is a CreateTable request for the same definition (the
	// mirror's copy of a table that existed before the model started).
	create json.RawMessage
}

type indexInfo struct {
	name    string
	arn     string
	global  bool
	hash    string
	rng     string
	all     bool     // ProjectionType ALL
	include []string // INCLUDE's NonKeyAttributes
}

func (t *tableInfo) index(name string) *indexInfo {
	for i := range t.indexes {
		if t.indexes[i].name == name {
			return &t.indexes[i]
		}
	}
	return nil
}

type keySchemaElement struct {
	AttributeName string
	KeyType       string
}

type indexDescription struct {
	IndexName  string
	IndexArn   string
	KeySchema  []keySchemaElement
	Projection struct {
		ProjectionType   string
		NonKeyAttributes []string `json:",omitempty"`
	}
}

type tableDescription struct {
	TableName              string
	TableArn               string
	KeySchema              []keySchemaElement
	AttributeDefinitions   json.RawMessage
	BillingModeSummary     *struct{ BillingMode string }
	GlobalSecondaryIndexes []indexDescription
	LocalSecondaryIndexes  []indexDescription
}

func keysOf(ks []keySchemaElement) (hash, rng string) {
	for _, k := range ks {
		if k.KeyType == "HASH" {
			hash = k.AttributeName
		} else {
			rng = k.AttributeName
		}
	}
	return hash, rng
}

func parseTable(d tableDescription) *tableInfo {
	t := &tableInfo{name: d.TableName, arn: d.TableArn, onDemand: d.BillingModeSummary != nil && d.BillingModeSummary.BillingMode == "PAY_PER_REQUEST"}
	t.hash, t.rng = keysOf(d.KeySchema)
	type indexCreate struct {
		IndexName  string
		KeySchema  []keySchemaElement
		Projection any
	}
	create := map[string]any{
		"TableName": d.TableName, "AttributeDefinitions": d.AttributeDefinitions,
		"KeySchema": d.KeySchema, "BillingMode": "PAY_PER_REQUEST",
	}
	for _, list := range []struct {
		global bool
		field  string
		ixs    []indexDescription
	}{{true, "GlobalSecondaryIndexes", d.GlobalSecondaryIndexes}, {false, "LocalSecondaryIndexes", d.LocalSecondaryIndexes}} {
		var cs []indexCreate
		for _, ix := range list.ixs {
			ii := indexInfo{name: ix.IndexName, arn: ix.IndexArn, global: list.global,
				all: ix.Projection.ProjectionType == "ALL", include: ix.Projection.NonKeyAttributes}
			if ii.arn == "" {
				ii.arn = t.arn + "/index/" + ix.IndexName
			}
			ii.hash, ii.rng = keysOf(ix.KeySchema)
			t.indexes = append(t.indexes, ii)
			cs = append(cs, indexCreate{ix.IndexName, ix.KeySchema, ix.Projection})
		}
		if len(cs) > 0 {
			create[list.field] = cs
		}
	}
	t.create, _ = json.Marshal(create)
	return t
}

// errNoTable: the primary does not know the table (the request is forwarded
// as it is, for dynalite to answer).
var errNoTable = errors.New("no such table")

type tableCache struct {
	mu sync.Mutex
	m  map[string]*tableInfo
}

func (c *tableCache) forget(name string) {
	c.mu.Lock()
	delete(c.m, name)
	c.mu.Unlock()
}

// table is the table's definition, from the cache or the primary.
func (m *Model) table(ctx context.Context, name string) (*tableInfo, error) {
	m.tables.mu.Lock()
	t := m.tables.m[name]
	m.tables.mu.Unlock()
	if t != nil {
		return t, nil
	}
	t, err := m.describe(ctx, m.primary, name)
	if err != nil {
		return nil, err
	}
	m.tables.mu.Lock()
	m.tables.m[name] = t
	m.tables.mu.Unlock()
	return t, nil
}

func (m *Model) describe(ctx context.Context, endpoint, name string) (*tableInfo, error) {
	body, _ := json.Marshal(map[string]string{"TableName": name})
	rep, err := m.call(ctx, endpoint, "DescribeTable", body)
	if err != nil {
		return nil, err
	}
	if rep.status != 200 {
		return nil, errNoTable
	}
	var out struct{ Table tableDescription }
	if err := json.Unmarshal(rep.body, &out); err != nil {
		return nil, err
	}
	return parseTable(out.Table), nil
}

// key is an item's primary key: its canonical text (unique per table and
// key), its partition key value's canonical text, and the key attributes.
type key struct {
	id        string
	partition string
	attrs     item
}

// canon is an AttributeValue's canonical text: its type and value.
func canon(raw json.RawMessage) (string, bool) {
	v := parseAV(raw)
	switch {
	case v.S != nil:
		return "S:" + *v.S, true
	case v.N != nil:
		return "N:" + *v.N, true
	case v.B != nil:
		return "B:" + *v.B, true
	}
	return "", false
}

// keyOf is the primary key of it (an item or a Key), false when it lacks a
// key attribute.
func (t *tableInfo) keyOf(it item) (key, bool) {
	h, ok := canon(it[t.hash])
	if !ok {
		return key{}, false
	}
	k := key{partition: h, attrs: item{t.hash: it[t.hash]}}
	k.id = t.name + "\x00" + h
	if t.rng != "" {
		r, ok := canon(it[t.rng])
		if !ok {
			return key{}, false
		}
		k.attrs[t.rng] = it[t.rng]
		k.id += "\x00" + r
	}
	return k, true
}

// entry is an item's entry in index ix (nil when the item is not in it: it
// lacks an index key attribute) and the entry's partition key value.
func (t *tableInfo) entry(ix *indexInfo, it item) (item, string) {
	if it == nil {
		return nil, ""
	}
	h, ok := canon(it[ix.hash])
	if !ok {
		return nil, ""
	}
	if ix.rng != "" {
		if _, ok := canon(it[ix.rng]); !ok {
			return nil, ""
		}
	}
	if ix.all {
		return it, h
	}
	e := item{}
	for _, a := range append([]string{t.hash, t.rng, ix.hash, ix.rng}, ix.include...) {
		if v, ok := it[a]; ok && a != "" {
			e[a] = v
		}
	}
	return e, h
}

// indexWrite is one write to an index key value: the units it costs.
type indexWrite struct {
	index *indexInfo
	value string // the index partition key value (canonical)
	units float64
}

// indexWrites is what turning before into after (nil: absent) writes to
// the table's indexes.
func (t *tableInfo) indexWrites(before, after item) []indexWrite {
	var out []indexWrite
	for i := range t.indexes {
		ix := &t.indexes[i]
		eb, hb := t.entry(ix, before)
		ea, ha := t.entry(ix, after)
		b := ddbrules.Entry{In: eb != nil, Value: hb}
		a := ddbrules.Entry{In: ea != nil, Value: ha}
		if b.In {
			b.Size = itemSize(eb)
		}
		if a.In {
			a.Size = itemSize(ea)
		}
		keyChanged := b.In && a.In && (!sameValue(before[ix.hash], after[ix.hash]) || ix.rng != "" && !sameValue(before[ix.rng], after[ix.rng]))
		changed := b.In && a.In && !sameItem(eb, ea)
		for _, w := range ddbrules.EntryWrites(b, a, keyChanged, changed) {
			out = append(out, indexWrite{ix, w.Value, w.Units})
		}
	}
	return out
}
