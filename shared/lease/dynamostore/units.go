package dynamostore

import (
	"reflect"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/sessionitem"
)

// Billing. The store meters every request it makes with the units DynamoDB
// would bill for it (on-demand), computed from the items it writes and reads
// rather than from ReturnConsumedCapacity, which dynalite ignores:
//
//   - a write (PutItem, UpdateItem) costs ceil(max(size before, size
//     after) / 1 KB) write units, at least 1; a write whose condition failed
//     costs the size of the existing item, at least 1;
//   - each global secondary index entry the write puts or deletes costs 1
//     write unit (every entry here is far below 1 KB), a key change (a
//     move) is a delete and a put (2), an update of only projected
//     attributes 1;
//   - a consistent read costs ceil(size / 4 KB) read units, at least 1 (per
//     item of a BatchGetItem); an eventually consistent Query page costs
//     0.5 × ceil(bytes returned / 4 KB), at least 0.5.
//
// ReturnValues costs no capacity, so the writes ask for the item before
// (ALL_OLD) and compute the item after locally (the update is known), which
// makes both sizes and the index entries exact; the heartbeat, which returns
// the record it wrote (ALL_NEW), bounds the size before (see Heartbeat).

// ItemSize is an item's size as DynamoDB bills it: the sum over attributes
// of the UTF-8 length of the name plus the size of the value. Strings and
// binaries: their bytes; numbers: 1 byte per two significant digits plus 1
// (leading and trailing zeroes trimmed); booleans and nulls: 1; sets: the sum
// of their elements; lists and maps: 3 bytes plus, per element, 1 byte and
// its size (a map element's name counts). See
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html
// ("The size of a number is approximately (number of UTF-8-encoded bytes of
// attribute name) + (1 byte per two significant digits) + (1 byte)";
// "Strings are Unicode with UTF-8 binary encoding"). This is the one
// definition: testkit/dynamodel meters its items with it too.
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 0
}

// numberSize is 1 byte per two significant digits (rounded up) plus 1. A
// DynamoDB number's digits are ASCII, one byte each: its digits are counted
// as bytes (a string that is no number, which DynamoDB refuses, is measured
// by its bytes too, never by its runes).
func numberSize(s string) int {
	s = strings.TrimLeft(s, "+-")
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	digits := strings.TrimLeft(intPart, "0")
	if digits == "" {
		digits = strings.TrimLeft(frac, "0")
	} else {
		digits += frac
	}
	digits = strings.TrimRight(digits, "0")
	return (len(digits)+1)/2 + 1
}

// WriteUnits is the write units of a write of an item whose larger version
// (before or after) is size bytes: ceil(size / 1 KB), at least 1.
func WriteUnits(size int) int64 { return max(1, int64((size+1023)/1024)) }

// ConsistentReadUnits is the read units of a consistent read of an item of
// size bytes: ceil(size / 4 KB), at least 1.
func ConsistentReadUnits(size int) int64 { return max(1, int64((size+4095)/4096)) }

// queryHalfUnits is a Query page's read units ×2 (eventually consistent:
// 0.5 × ceil(bytes / 4 KB), at least 0.5).
func queryHalfUnits(bytes int) int64 { return max(1, int64((bytes+4095)/4096)) }

// index is one global secondary index as the table defines it.
type index struct {
	name    string
	keys    []string // partition (and sort) key attributes
	include []string // projected non-key attributes
	all     bool     // ProjectionType ALL
}

// indexes are the table's GSIs, from its definition.
var indexes = func() []index {
	var out []index
	for _, g := range sessionitem.CreateTableInput("t").GlobalSecondaryIndexes {
		ix := index{name: *g.IndexName}
		for _, k := range g.KeySchema {
			ix.keys = append(ix.keys, *k.AttributeName)
		}
		ix.include = g.Projection.NonKeyAttributes
		ix.all = g.Projection.ProjectionType == types.ProjectionTypeAll
		out = append(out, ix)
	}
	return out
}()

// IndexWrites is how many index write units a write that turns item before
// into item after (nil: absent) costs: per index, 1 for an entry put or
// deleted, 2 for a key change, 1 for a change of projected attributes only.
func IndexWrites(before, after map[string]types.AttributeValue) int64 {
	var n int64
	for _, ix := range indexes {
		inBefore, inAfter := hasAll(before, ix.keys), hasAll(after, ix.keys)
		switch {
		case inBefore && inAfter:
			switch {
			case !sameAttrs(before, after, ix.keys):
				n += 2
			case ix.all && !reflect.DeepEqual(before, after), !sameAttrs(before, after, ix.include):
				n++
			}
		case inBefore || inAfter:
			n++
		}
	}
	return n
}

func hasAll(item map[string]types.AttributeValue, names []string) bool {
	if item == nil {
		return false
	}
	for _, k := range names {
		if _, ok := item[k]; !ok {
			return false
		}
	}
	return true
}

func sameAttrs(a, b map[string]types.AttributeValue, names []string) bool {
	for _, k := range names {
		if !reflect.DeepEqual(a[k], b[k]) {
			return false
		}
	}
	return true
}

// Usage is what the store's requests of one kind cost.
type Usage struct {
	Writes          int64   `json:"writes"`            // write requests
	Reads           int64   `json:"reads"`             // read requests (GetItem, BatchGetItem, Query pages), with the reads that classify a failed condition
	ConditionFailed int64   `json:"condition_failed"`  // writes whose condition failed
	WriteUnits      int64   `json:"write_units"`       // base table write units
	IndexWriteUnits int64   `json:"index_write_units"` // global secondary index write units
	ReadUnits       float64 `json:"read_units"`        // read units
}

// Requests is all requests of the kind.
func (u Usage) Requests() int64 { return u.Writes + u.Reads }

// TotalWriteUnits is table and index write units.
func (u Usage) TotalWriteUnits() int64 { return u.WriteUnits + u.IndexWriteUnits }

type meter struct {
	writes, reads, failed, wu, iwu, readHalves atomic.Int64
}

func (m *meter) usage() Usage {
	return Usage{
		Writes: m.writes.Load(), Reads: m.reads.Load(), ConditionFailed: m.failed.Load(),
		WriteUnits: m.wu.Load(), IndexWriteUnits: m.iwu.Load(), ReadUnits: float64(m.readHalves.Load()) / 2,
	}
}

// wrote meters a write that turned before into after.
func (m *meter) wrote(before, after map[string]types.AttributeValue) {
	m.wu.Add(WriteUnits(max(ItemSize(before), ItemSize(after))))
	m.iwu.Add(IndexWrites(before, after))
}
