package ddbrules

import "github.com/wsfleet/wsfleet/shared/lease/dynamostore"

// Billing, as DynamoDB bills an on-demand table ("Capacity unit consumption"
// in the Developer Guide). The unit arithmetic is the store's
// (shared/lease/dynamostore: ItemSize, WriteUnits, ConsistentReadUnits),
// which this package cannot redefine: shared does not import testkit.
//
//   - a write (PutItem, UpdateItem, DeleteItem, each item of a
//     BatchWriteItem) costs WriteUnits(max(size before, size after)): ceil
//     of the larger image / 1 KB, at least 1; a write whose condition failed
//     costs the size of the item as it is, at least 1;
//   - every index entry the write puts or deletes costs WriteUnits(its
//     projected size); a change of the entry's key is a delete and a put; a
//     change of projected attributes only is one write of the larger entry;
//     a write that changes nothing the index projects costs it nothing
//     (EntryWrites);
//   - a consistent read costs ceil(size / 4 KB) read units, at least 1, an
//     eventually consistent one half that (ReadUnits); a Query page is one
//     read of the bytes of its items (every index read is eventually
//     consistent); a key of a BatchGetItem that finds nothing costs a read
//     of 0 bytes.

// WriteUnits is the write units of a write whose larger image is size
// bytes: ceil(size / 1 KB), at least 1.
func WriteUnits(size int) float64 { return float64(dynamostore.WriteUnits(size)) }

// ReadUnits is the read units of reading size bytes: ceil(size / 4 KB), at
// least 1, halved when eventually consistent.
func ReadUnits(size int, consistent bool) float64 {
	u := float64(dynamostore.ConsistentReadUnits(size))
	if !consistent {
		u /= 2
	}
	return u
}

// Entry is an item's entry in one index, as much of it as billing needs.
type Entry struct {
	In    bool   // the item is in the index (it has the index's key attributes)
	Value string // the entry's index partition key value (canonical)
	Size  int    // the projected entry's size (ItemSize)
}

// EntryWrite is one write of an index entry: the index key value it lands
// on and its write units.
type EntryWrite struct {
	Value string
	Units float64
}

// EntryWrites is what turning an item's entry before into after costs the
// index: a put of a new entry, a delete of a removed one, a delete and a
// put when the entry's key changed (keyChanged), one write of the larger
// entry when only projected attributes changed (changed), nothing
// otherwise.
func EntryWrites(before, after Entry, keyChanged, changed bool) []EntryWrite {
	switch {
	case !before.In && !after.In:
		return nil
	case !before.In:
		return []EntryWrite{{after.Value, WriteUnits(after.Size)}}
	case !after.In:
		return []EntryWrite{{before.Value, WriteUnits(before.Size)}}
	case keyChanged:
		return []EntryWrite{{before.Value, WriteUnits(before.Size)}, {after.Value, WriteUnits(after.Size)}}
	case changed:
		return []EntryWrite{{after.Value, WriteUnits(max(before.Size, after.Size))}}
	}
	return nil
}
