package ddbrules

import (
	"reflect"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
)

// Item is an item image as the SDK holds it (nil: absent).
type Item = map[string]types.AttributeValue

// Index is a secondary index as billing and throttling need it.
type Index struct {
	Name    string
	ARN     string
	Global  bool
	Hash    string   // partition key attribute
	Range   string   // sort key attribute ("" when none)
	All     bool     // ProjectionType ALL
	Include []string // INCLUDE's NonKeyAttributes
}

// Table is a table's key schema and indexes.
type Table struct {
	Name    string
	ARN     string
	Hash    string
	Range   string
	Indexes []Index
}

// TableOf is the table a CreateTable request defines, its ARN (and its
// indexes') in account 000000000000 of us-east-1.
func TableOf(in *dynamodb.CreateTableInput) Table {
	name := deref(in.TableName)
	t := Table{Name: name, ARN: "arn:aws:dynamodb:us-east-1:000000000000:table/" + name}
	t.Hash, t.Range = keysOf(in.KeySchema)
	for _, g := range in.GlobalSecondaryIndexes {
		ix := Index{Name: deref(g.IndexName), Global: true}
		ix.ARN = t.ARN + "/index/" + ix.Name
		ix.Hash, ix.Range = keysOf(g.KeySchema)
		if g.Projection != nil {
			ix.All = g.Projection.ProjectionType == types.ProjectionTypeAll
			ix.Include = g.Projection.NonKeyAttributes
		}
		t.Indexes = append(t.Indexes, ix)
	}
	for _, l := range in.LocalSecondaryIndexes {
		ix := Index{Name: deref(l.IndexName)}
		ix.ARN = t.ARN + "/index/" + ix.Name
		ix.Hash, ix.Range = keysOf(l.KeySchema)
		if l.Projection != nil {
			ix.All = l.Projection.ProjectionType == types.ProjectionTypeAll
			ix.Include = l.Projection.NonKeyAttributes
		}
		t.Indexes = append(t.Indexes, ix)
	}
	return t
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func keysOf(ks []types.KeySchemaElement) (hash, rng string) {
	for _, k := range ks {
		if k.KeyType == types.KeyTypeHash {
			hash = deref(k.AttributeName)
		} else {
			rng = deref(k.AttributeName)
		}
	}
	return hash, rng
}

// Index is the index named name (nil when none).
func (t Table) Index(name string) *Index {
	for i := range t.Indexes {
		if t.Indexes[i].Name == name {
			return &t.Indexes[i]
		}
	}
	return nil
}

// Canon is a key AttributeValue's canonical text, its type and value
// ("S:abc"), false for a value that is no key (not S, N or B).
func Canon(v types.AttributeValue) (string, bool) {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return "S:" + v.Value, true
	case *types.AttributeValueMemberN:
		return "N:" + v.Value, true
	case *types.AttributeValueMemberB:
		return "B:" + string(v.Value), true
	}
	return "", false
}

// Partition is the canonical partition key value of it ("" when it has none).
func (t Table) Partition(it Item) string {
	c, _ := Canon(it[t.Hash])
	return c
}

// Entry is it's entry in ix (nil when it is not in the index: it lacks an
// index key attribute) and the entry's partition key value.
func (t Table) Entry(ix *Index, it Item) (Item, string) {
	if it == nil {
		return nil, ""
	}
	h, ok := Canon(it[ix.Hash])
	if !ok {
		return nil, ""
	}
	if ix.Range != "" {
		if _, ok := Canon(it[ix.Range]); !ok {
			return nil, ""
		}
	}
	if ix.All {
		return it, h
	}
	e := Item{}
	for _, a := range append([]string{t.Hash, t.Range, ix.Hash, ix.Range}, ix.Include...) {
		if v, ok := it[a]; ok && a != "" {
			e[a] = v
		}
	}
	return e, h
}

// IndexWrites is what turning item before into after (nil: absent) writes
// to the table's indexes, by EntryWrites.
func (t Table) IndexWrites(before, after Item) []IndexWrite {
	var out []IndexWrite
	for i := range t.Indexes {
		ix := &t.Indexes[i]
		eb, hb := t.Entry(ix, before)
		ea, ha := t.Entry(ix, after)
		b := Entry{In: eb != nil, Value: hb, Size: dynamostore.ItemSize(eb)}
		a := Entry{In: ea != nil, Value: ha, Size: dynamostore.ItemSize(ea)}
		keyChanged := b.In && a.In && (!SameValue(before[ix.Hash], after[ix.Hash]) || ix.Range != "" && !SameValue(before[ix.Range], after[ix.Range]))
		changed := b.In && a.In && !SameItem(eb, ea)
		for _, w := range EntryWrites(b, a, keyChanged, changed) {
			out = append(out, IndexWrite{Index: ix.Name, IndexARN: ix.ARN, Global: ix.Global, Value: w.Value, Units: w.Units})
		}
	}
	return out
}

// SameValue reports whether two AttributeValues are equal, sets compared as
// sets.
func SameValue(a, b types.AttributeValue) bool {
	switch x := a.(type) {
	case *types.AttributeValueMemberSS:
		y, ok := b.(*types.AttributeValueMemberSS)
		return ok && sameSet(x.Value, y.Value)
	case *types.AttributeValueMemberNS:
		y, ok := b.(*types.AttributeValueMemberNS)
		return ok && sameSet(x.Value, y.Value)
	case *types.AttributeValueMemberBS:
		y, ok := b.(*types.AttributeValueMemberBS)
		if !ok {
			return false
		}
		xs, ys := make([]string, len(x.Value)), make([]string, len(y.Value))
		for i, v := range x.Value {
			xs[i] = string(v)
		}
		for i, v := range y.Value {
			ys[i] = string(v)
		}
		return sameSet(xs, ys)
	case *types.AttributeValueMemberL:
		y, ok := b.(*types.AttributeValueMemberL)
		if !ok || len(x.Value) != len(y.Value) {
			return false
		}
		for i := range x.Value {
			if !SameValue(x.Value[i], y.Value[i]) {
				return false
			}
		}
		return true
	case *types.AttributeValueMemberM:
		y, ok := b.(*types.AttributeValueMemberM)
		return ok && SameItem(x.Value, y.Value)
	}
	return reflect.DeepEqual(a, b)
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// SameItem reports whether two items hold the same attributes with equal
// values.
func SameItem(a, b Item) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !SameValue(v, w) {
			return false
		}
	}
	return true
}
