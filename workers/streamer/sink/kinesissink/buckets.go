package kinesissink

import (
	"crypto/md5"
	"encoding/binary"
	"math/big"
	"math/bits"
	"strconv"
)

// This file owns the hash buckets: which sessions may share an aggregated
// record, and the explicit hash key every record of a bucket carries.
//
// Kinesis puts a record on the shard whose hash key range holds its hash
// key: the explicit hash key when the record has one, else the MD5 of its
// partition key as a 128-bit big-endian integer. A Kinesis record goes to
// one shard, so an aggregated record of several sessions must hold only
// sessions that belong on one shard, whatever the stream's shards are. The
// sink cuts the hash key space into N equal ranges (buckets): a session's
// bucket is the range its connection_id's MD5 falls in,
// b = MD5(connection_id) * N >> 128, and every record of the bucket, plain
// or aggregated, carries the midpoint of the range as its explicit hash
// key (so does every user record inside an aggregated one, which the KCL's
// deaggregation checks against the shard's range). A session's records thus
// go to the one shard holding its bucket's key, on every worker, across a
// reshard.

// buckets are N hash buckets, their names (the pack groups) and their
// explicit hash keys, made once so that a message costs one MD5 and no
// allocation to place.
type buckets struct {
	names []string // names[b] is bucket b's pack group (its number)
	keys  []string // keys[b] is bucket b's explicit hash key (decimal)
}

// newBuckets returns n buckets (nil for n <= 0: no buckets).
func newBuckets(n int) *buckets {
	if n <= 0 {
		return nil
	}
	space := new(big.Int).Lsh(big.NewInt(1), 128)
	bound := func(b int) *big.Int { // the first hash key of bucket b (b = n: 2^128), ceil(b * 2^128 / n)
		lo := new(big.Int).Mul(space, big.NewInt(int64(b)))
		lo.Add(lo, big.NewInt(int64(n-1)))
		return lo.Div(lo, big.NewInt(int64(n)))
	}
	bs := &buckets{names: make([]string, n), keys: make([]string, n)}
	for b := range n {
		mid := new(big.Int).Add(bound(b), bound(b+1))
		bs.keys[b] = mid.Rsh(mid, 1).String()
		bs.names[b] = strconv.Itoa(b)
	}
	return bs
}

// of is connectionID's bucket: the MD5 of the partition key (Kinesis' hash
// key of it) times N, over 2^128.
func (bs *buckets) of(connectionID string) int {
	sum := md5.Sum([]byte(connectionID))
	n := uint64(len(bs.keys))
	// (hi * 2^64 + lo) * n >> 128, in 64-bit halves.
	hi1, lo1 := bits.Mul64(binary.BigEndian.Uint64(sum[:8]), n)
	hi2, _ := bits.Mul64(binary.BigEndian.Uint64(sum[8:]), n)
	_, carry := bits.Add64(lo1, hi2, 0)
	return int(hi1 + carry)
}

// key is bucket b's explicit hash key: the decimal midpoint of its range.
func (bs *buckets) key(b int) string { return bs.keys[b] }
