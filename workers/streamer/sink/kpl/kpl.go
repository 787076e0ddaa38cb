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
// record at index 0, no explicit hash keys, no tags), encoded with
// google.golang.org/protobuf's protowire; Deaggregate reads any record of
// the format (every table, tags skipped).
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
	size := EmptySize(partitionKey)
	for _, d := range data {
		size += RecordSize(len(d))
	}
	b := make([]byte, 0, size)
	b = append(b, Magic...)
	b = protowire.AppendTag(b, fieldPartitionKeyTable, protowire.BytesType)
	b = protowire.AppendString(b, partitionKey)
	for _, d := range data {
		b = protowire.AppendTag(b, fieldRecords, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(recordLen(len(d))))
		b = protowire.AppendTag(b, fieldPartitionKeyIndex, protowire.VarintType)
		b = protowire.AppendVarint(b, 0)
		b = protowire.AppendTag(b, fieldData, protowire.BytesType)
		b = protowire.AppendBytes(b, d)
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
	if !IsAggregated(data) {
		return [][]byte{data}, nil
	}
	msg := data[len(Magic) : len(data)-md5.Size]
	if sum := md5.Sum(msg); !bytes.Equal(sum[:], data[len(data)-md5.Size:]) {
		return nil, ErrChecksum
	}
	var out [][]byte
	keys := 0
	var indexes []uint64
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return nil, fmt.Errorf("kpl: aggregated record: %w", protowire.ParseError(n))
		}
		msg = msg[n:]
		switch {
		case num == fieldPartitionKeyTable && typ == protowire.BytesType:
			keys++
			n = skipBytes(msg)
		case num == fieldRecords && typ == protowire.BytesType:
			var rec []byte
			rec, n = protowire.ConsumeBytes(msg)
			if n >= 0 {
				d, index, err := parseRecord(rec)
				if err != nil {
					return nil, fmt.Errorf("kpl: user record %d: %w", len(out), err)
				}
				out = append(out, d)
				indexes = append(indexes, index)
			}
		case num == fieldExplicitHashKeyTable && typ != protowire.BytesType,
			num == fieldPartitionKeyTable, num == fieldRecords:
			return nil, fmt.Errorf("kpl: aggregated record: field %d of wire type %d", num, typ)
		default:
			n = protowire.ConsumeFieldValue(num, typ, msg)
		}
		if n < 0 {
			return nil, fmt.Errorf("kpl: aggregated record: %w", protowire.ParseError(n))
		}
		msg = msg[n:]
	}
	for i, index := range indexes {
		if index >= uint64(keys) {
			return nil, fmt.Errorf("kpl: user record %d: partition key index %d outside a table of %d", i, index, keys)
		}
	}
	return out, nil
}

func skipBytes(b []byte) int {
	_, n := protowire.ConsumeBytes(b)
	return n
}

// parseRecord is a Record's data and partition key index.
func parseRecord(b []byte) (data []byte, index uint64, err error) {
	var hasIndex, hasData bool
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, 0, protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == fieldPartitionKeyIndex && typ == protowire.VarintType:
			index, n = protowire.ConsumeVarint(b)
			hasIndex = true
		case num == fieldData && typ == protowire.BytesType:
			data, n = protowire.ConsumeBytes(b)
			hasData = true
		case num == fieldPartitionKeyIndex, num == fieldData,
			num == fieldExplicitHashKeyIndex && typ != protowire.VarintType,
			num == fieldTags && typ != protowire.BytesType:
			return nil, 0, fmt.Errorf("field %d of wire type %d", num, typ)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return nil, 0, protowire.ParseError(n)
		}
		b = b[n:]
	}
	if !hasIndex || !hasData {
		return nil, 0, errors.New("missing its required partition_key_index or data")
	}
	if data == nil {
		data = []byte{}
	}
	return data, index, nil
}
