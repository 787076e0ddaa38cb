// Package kpl owns the Kinesis Producer Library's aggregated record format:
// many user records in one Kinesis record, which the Kinesis Client
// Library, the aws-kinesis-agg deaggregation modules and Firehose take
// apart. The format is amazon-kinesis-producer's aggregation-format.md
// (awslabs/amazon-kinesis-producer, "KPL Aggregated Record Format"):
//
//	magic 0xF3 0x89 0x9A 0xC2 | protobuf AggregatedRecord | MD5 of the protobuf bytes (16)
//
//	message AggregatedRecord {            // proto2
//	  repeated string partition_key_table     = 1;
//	  repeated string explicit_hash_key_table = 2;
//	  repeated Record records                 = 3;
//	}
//	message Record {
//	  required uint64 partition_key_index     = 1;
//	  optional uint64 explicit_hash_key_index = 2;
//	  required bytes  data                    = 3;
//	  repeated Tag    tags                    = 4;
//	}
//	message Tag { required string key = 1; optional string value = 2; }
//
// Aggregate writes records of one partition key (a table of one key, every
// record at index 0, no explicit hash keys, no tags); AggregateUsers writes
// records of several partition keys under one explicit hash key (every
// record carries explicit_hash_key_index 0). Both encode with
// google.golang.org/protobuf's protowire. Deaggregate and Users read any
// record of the format (every table, tags skipped).
package kpl

import (
	"bytes"
	"crypto/md5"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Magic starts every aggregated record.
var Magic = []byte{0xF3, 0x89, 0x9A, 0xC2}

// Field numbers of the format's messages.
const (
	fieldPartitionKeyTable    protowire.Number = 1 // AggregatedRecord
	fieldExplicitHashKeyTable protowire.Number = 2
	fieldRecords              protowire.Number = 3
	fieldPartitionKeyIndex    protowire.Number = 1 // Record
	fieldExplicitHashKeyIndex protowire.Number = 2
	fieldData                 protowire.Number = 3
	fieldTags                 protowire.Number = 4
)

// EmptySize is the size of an aggregated record of no user records under
// partitionKey (magic, the key table, MD5): a record of records d1..dn is
// EmptySize + RecordSize(len(d1)) + ... + RecordSize(len(dn)) bytes.
func EmptySize(partitionKey string) int {
	return len(Magic) + protowire.SizeTag(fieldPartitionKeyTable) + protowire.SizeBytes(len(partitionKey)) + md5.Size
}

// RecordSize is what a user record of n bytes of data adds to an
// aggregated record.
func RecordSize(n int) int {
	return protowire.SizeTag(fieldRecords) + protowire.SizeBytes(recordLen(n))
}

// recordLen is the size of a Record message of n bytes of data at
// partition key index 0.
func recordLen(n int) int {
	return protowire.SizeTag(fieldPartitionKeyIndex) + protowire.SizeVarint(0) + protowire.SizeTag(fieldData) + protowire.SizeBytes(n)
}

// Aggregate is one aggregated record holding data, in order, every record
// under partitionKey.
func Aggregate(partitionKey string, data [][]byte) []byte {
	users := make([]User, len(data))
	for i, d := range data {
		users[i] = User{PartitionKey: partitionKey, Data: d}
	}
	return AggregateUsers(users)
}

// User is one user record of an aggregated record: its data and its keys
// (ExplicitHashKey "": none).
type User struct {
	PartitionKey    string
	ExplicitHashKey string
	Data            []byte
}

// GroupEmptySize is the size of an aggregated record of no user records
// whose explicit hash key table holds explicitHashKey (magic, that table,
// MD5); GroupRecordMaxSize bounds what each user record adds.
func GroupEmptySize(explicitHashKey string) int {
	return len(Magic) + protowire.SizeTag(fieldExplicitHashKeyTable) + protowire.SizeBytes(len(explicitHashKey)) + md5.Size
}

// GroupRecordMaxSize bounds what a user record of n bytes of data under
// partitionKey and explicit hash key index 0 adds to an aggregated record
// of AggregateUsers whose partition key table holds at most keys keys: its
// key in the table (counted as new, whether or not it is) and its Record
// at a partition key index below keys.
func GroupRecordMaxSize(partitionKey string, n, keys int) int {
	rec := protowire.SizeTag(fieldPartitionKeyIndex) + protowire.SizeVarint(uint64(max(keys, 1)-1)) +
		protowire.SizeTag(fieldExplicitHashKeyIndex) + protowire.SizeVarint(0) +
		protowire.SizeTag(fieldData) + protowire.SizeBytes(n)
	return protowire.SizeTag(fieldPartitionKeyTable) + protowire.SizeBytes(len(partitionKey)) +
		protowire.SizeTag(fieldRecords) + protowire.SizeBytes(rec)
}

// AggregateUsers is one aggregated record holding users, in order: its
// partition key table and explicit hash key table list the keys in the
// order they first appear, and each user record carries the indexes of its
// own (explicit_hash_key_index only when it has one).
func AggregateUsers(users []User) []byte {
	var pks, ehks []string
	pkIndex, ehkIndex := map[string]uint64{}, map[string]uint64{}
	index := func(table *[]string, at map[string]uint64, key string) uint64 {
		i, ok := at[key]
		if !ok {
			i = uint64(len(*table))
			at[key] = i
			*table = append(*table, key)
		}
		return i
	}
	type rec struct {
		pk, ehk uint64
		hasEHK  bool
		len     int
	}
	recs := make([]rec, len(users))
	size := len(Magic) + md5.Size
	for i, u := range users {
		r := rec{pk: index(&pks, pkIndex, u.PartitionKey)}
		if u.ExplicitHashKey != "" {
			r.ehk, r.hasEHK = index(&ehks, ehkIndex, u.ExplicitHashKey), true
		}
		r.len = protowire.SizeTag(fieldPartitionKeyIndex) + protowire.SizeVarint(r.pk) + protowire.SizeTag(fieldData) + protowire.SizeBytes(len(u.Data))
		if r.hasEHK {
			r.len += protowire.SizeTag(fieldExplicitHashKeyIndex) + protowire.SizeVarint(r.ehk)
		}
		recs[i] = r
		size += protowire.SizeTag(fieldRecords) + protowire.SizeBytes(r.len)
	}
	for _, k := range pks {
		size += protowire.SizeTag(fieldPartitionKeyTable) + protowire.SizeBytes(len(k))
	}
	for _, k := range ehks {
		size += protowire.SizeTag(fieldExplicitHashKeyTable) + protowire.SizeBytes(len(k))
	}
	b := make([]byte, 0, size)
	b = append(b, Magic...)
	for _, k := range pks {
		b = protowire.AppendTag(b, fieldPartitionKeyTable, protowire.BytesType)
		b = protowire.AppendString(b, k)
	}
	for _, k := range ehks {
		b = protowire.AppendTag(b, fieldExplicitHashKeyTable, protowire.BytesType)
		b = protowire.AppendString(b, k)
	}
	for i, u := range users {
		r := recs[i]
		b = protowire.AppendTag(b, fieldRecords, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(r.len))
		b = protowire.AppendTag(b, fieldPartitionKeyIndex, protowire.VarintType)
		b = protowire.AppendVarint(b, r.pk)
		if r.hasEHK {
			b = protowire.AppendTag(b, fieldExplicitHashKeyIndex, protowire.VarintType)
			b = protowire.AppendVarint(b, r.ehk)
		}
		b = protowire.AppendTag(b, fieldData, protowire.BytesType)
		b = protowire.AppendBytes(b, u.Data)
	}
	sum := md5.Sum(b[len(Magic):])
	return append(b, sum[:]...)
}

// IsAggregated reports whether data starts with the magic number and is
// long enough to hold a checksum.
func IsAggregated(data []byte) bool {
	return len(data) >= len(Magic)+md5.Size && bytes.HasPrefix(data, Magic)
}

// ErrChecksum: an aggregated record whose MD5 does not match its protobuf
// bytes.
var ErrChecksum = errors.New("kpl: aggregated record fails its MD5 check")

// Deaggregate is the user records' data of one Kinesis record, in order: a
// plain record (no magic number) is its own one user record. A record with
// the magic number and a bad checksum, or protobuf bytes that are not an
// AggregatedRecord, is an error.
func Deaggregate(data []byte) ([][]byte, error) {
	users, err := Users(data)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(users))
	for i, u := range users {
		out[i] = u.Data
	}
	return out, nil
}

// Users is the user records of one Kinesis record, in order, each with its
// keys from the record's tables: a plain record (no magic number) is its
// own one user record, without keys (they are the Kinesis record's). A
// record with the magic number and a bad checksum, protobuf bytes that are
// not an AggregatedRecord, or an index outside its table is an error.
func Users(data []byte) ([]User, error) {
	if !IsAggregated(data) {
		return []User{{Data: data}}, nil
	}
	msg := data[len(Magic) : len(data)-md5.Size]
	if sum := md5.Sum(msg); !bytes.Equal(sum[:], data[len(data)-md5.Size:]) {
		return nil, ErrChecksum
	}
	var (
		pks, ehks []string
		recs      []parsed
	)
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return nil, fmt.Errorf("kpl: aggregated record: %w", protowire.ParseError(n))
		}
		msg = msg[n:]
		switch {
		case (num == fieldPartitionKeyTable || num == fieldExplicitHashKeyTable) && typ == protowire.BytesType:
			var k []byte
			k, n = protowire.ConsumeBytes(msg)
			if num == fieldPartitionKeyTable {
				pks = append(pks, string(k))
			} else {
				ehks = append(ehks, string(k))
			}
		case num == fieldRecords && typ == protowire.BytesType:
			var rec []byte
			rec, n = protowire.ConsumeBytes(msg)
			if n >= 0 {
				p, err := parseRecord(rec)
				if err != nil {
					return nil, fmt.Errorf("kpl: user record %d: %w", len(recs), err)
				}
				recs = append(recs, p)
			}
		case num == fieldExplicitHashKeyTable, num == fieldPartitionKeyTable, num == fieldRecords:
			return nil, fmt.Errorf("kpl: aggregated record: field %d of wire type %d", num, typ)
		default:
			n = protowire.ConsumeFieldValue(num, typ, msg)
		}
		if n < 0 {
			return nil, fmt.Errorf("kpl: aggregated record: %w", protowire.ParseError(n))
		}
		msg = msg[n:]
	}
	users := make([]User, len(recs))
	for i, r := range recs {
		if r.pk >= uint64(len(pks)) {
			return nil, fmt.Errorf("kpl: user record %d: partition key index %d outside a table of %d", i, r.pk, len(pks))
		}
		users[i] = User{PartitionKey: pks[r.pk], Data: r.data}
		if r.hasEHK {
			if r.ehk >= uint64(len(ehks)) {
				return nil, fmt.Errorf("kpl: user record %d: explicit hash key index %d outside a table of %d", i, r.ehk, len(ehks))
			}
			users[i].ExplicitHashKey = ehks[r.ehk]
		}
	}
	return users, nil
}

// parsed is a Record as read: its data and its indexes.
type parsed struct {
	data    []byte
	pk, ehk uint64
	hasEHK  bool
}

// parseRecord reads a Record.
func parseRecord(b []byte) (parsed, error) {
	var (
		p                 parsed
		hasIndex, hasData bool
	)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return parsed{}, protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == fieldPartitionKeyIndex && typ == protowire.VarintType:
			p.pk, n = protowire.ConsumeVarint(b)
			hasIndex = true
		case num == fieldExplicitHashKeyIndex && typ == protowire.VarintType:
			p.ehk, n = protowire.ConsumeVarint(b)
			p.hasEHK = true
		case num == fieldData && typ == protowire.BytesType:
			p.data, n = protowire.ConsumeBytes(b)
			hasData = true
		case num == fieldPartitionKeyIndex, num == fieldData, num == fieldExplicitHashKeyIndex,
			num == fieldTags && typ != protowire.BytesType:
			return parsed{}, fmt.Errorf("field %d of wire type %d", num, typ)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return parsed{}, protowire.ParseError(n)
		}
		b = b[n:]
	}
	if !hasIndex || !hasData {
		return parsed{}, errors.New("missing its required partition_key_index or data")
	}
	if p.data == nil {
		p.data = []byte{}
	}
	return p, nil
}
