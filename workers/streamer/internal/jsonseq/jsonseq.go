// Package jsonseq finds a message's sequence number (the integer value of one
// field of a JSON object, top-level or along a dotted path into nested
// objects) and the raw value at a path (for keep-alive and acknowledgement
// matching), without decoding the rest of the message and without
// allocating. It is the per-message hot path of the worker.
package jsonseq

import (
	"encoding/json"
	"errors"
)

// Errors.
var (
	ErrNotObject  = errors.New("message is not a JSON object")
	ErrMalformed  = errors.New("malformed JSON")
	ErrNoField    = errors.New("sequence field absent")
	ErrNotInteger = errors.New("sequence field is not an integer")
	ErrOutOfRange = errors.New("sequence number outside 0 to 2^53-1")
)

// MaxSeq is the largest sequence number Find accepts: 2^53 - 1, the largest
// integer JSON exchanges exactly (RFC 8259, section 6: "integers ... in the
// range [-(2**53)+1, (2**53)-1] are interoperable"). A seq is 0 to MaxSeq;
// any other integer is unusable like a missing one (ErrOutOfRange): one
// near math.MaxInt64 would move the checkpoint there for good, making every
// later message a duplicate and overflowing the resume value (last + 1). A
// negative one could never be delivered (it is at or below "none yet", -1).
const MaxSeq = 1<<53 - 1

// Find returns the value of the top-level field named field in the JSON
// object data. The value must be an integer from 0 to MaxSeq, either a JSON
// number without fraction or exponent, or a string holding one ("42"). When the field
// occurs more than once the first occurrence wins. Find scans only as far as
// the field; it does not validate the rest of the object.
func Find(data []byte, field string) (int64, error) {
	i, err := findKey(data, 0, field)
	if err != nil {
		return 0, err
	}
	return parseInt(data, i)
}

// FindPath is Find along a path of keys into nested objects ("data", "u"
// for data.u): every key but the last must hold an object.
func FindPath(data []byte, path []string) (int64, error) {
	i, err := lookup(data, path)
	if err != nil {
		return 0, err
	}
	return parseInt(data, i)
}

// Lookup returns the raw JSON value at path (nested objects), without
// decoding it: a string keeps its quotes and escapes.
func Lookup(data []byte, path []string) ([]byte, error) {
	i, err := lookup(data, path)
	if err != nil {
		return nil, err
	}
	end, ok := skipValue(data, i)
	if !ok {
		return nil, ErrMalformed
	}
	return data[i:end], nil
}

func lookup(data []byte, path []string) (int, error) {
	if len(path) == 0 {
		return 0, ErrNoField
	}
	i := 0
	for n, key := range path {
		j, err := findKey(data, i, key)
		if err != nil {
			if n > 0 && err == ErrNotObject {
				return 0, ErrNoField // an intermediate value that is not an object
			}
			return 0, err
		}
		i = j
	}
	return i, nil
}

// findKey returns the index of the value of key in the object that starts
// at data[i] (after whitespace). The first occurrence wins; the scan stops
// there.
func findKey(data []byte, i int, field string) (int, error) {
	i = skipWS(data, i)
	if i >= len(data) || data[i] != '{' {
		return 0, ErrNotObject
	}
	i++
	for {
		i = skipWS(data, i)
		if i >= len(data) {
			return 0, ErrMalformed
		}
		if data[i] == '}' {
			return 0, ErrNoField
		}
		if data[i] != '"' {
			return 0, ErrMalformed
		}
		end, escaped, ok := scanString(data, i)
		if !ok {
			return 0, ErrMalformed
		}
		key := data[i+1 : end-1]
		i = skipWS(data, end)
		if i >= len(data) || data[i] != ':' {
			return 0, ErrMalformed
		}
		i = skipWS(data, i+1)
		if keyEquals(key, escaped, field) {
			return i, nil
		}
		if i, ok = skipValue(data, i); !ok {
			return 0, ErrMalformed
		}
		i = skipWS(data, i)
		if i >= len(data) {
			return 0, ErrMalformed
		}
		switch data[i] {
		case ',':
			i++
		case '}':
			return 0, ErrNoField
		default:
			return 0, ErrMalformed
		}
	}
}

func keyEquals(key []byte, escaped bool, field string) bool {
	if !escaped {
		return string(key) == field // no allocation
	}
	var s string
	q := make([]byte, 0, len(key)+2)
	q = append(append(append(q, '"'), key...), '"')
	if json.Unmarshal(q, &s) != nil {
		return false
	}
	return s == field
}

func skipWS(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// scanString returns the index after the closing quote of the string that
// starts at data[i] == '"', and whether it holds escapes.
func scanString(data []byte, i int) (end int, escaped, ok bool) {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped, true
		}
	}
	return 0, false, false
}

// skipValue returns the index after the value starting at data[i].
func skipValue(data []byte, i int) (int, bool) {
	if i >= len(data) {
		return 0, false
	}
	switch data[i] {
	case '"':
		end, _, ok := scanString(data, i)
		return end, ok
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end, _, ok := scanString(data, j)
				if !ok {
					return 0, false
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	default:
		j := i
		for j < len(data) {
			switch data[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j, j > i
			}
			j++
		}
		return j, j > i
	}
}

// parseInt parses the integer value at data[i] (a number, or a string
// holding one).
func parseInt(data []byte, i int) (int64, error) {
	if i >= len(data) {
		return 0, ErrMalformed
	}
	quoted := data[i] == '"'
	if quoted {
		i++
	}
	neg := false
	if i < len(data) && data[i] == '-' {
		neg = true
		i++
	}
	start := i
	var n uint64
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		if n <= MaxSeq { // beyond it, only the digits are scanned
			n = n*10 + uint64(data[i]-'0')
		}
		i++
	}
	digits := i - start
	if digits == 0 || (digits > 1 && data[start] == '0') {
		return 0, ErrNotInteger
	}
	if quoted {
		if i >= len(data) || data[i] != '"' {
			return 0, ErrNotInteger
		}
	} else if i < len(data) {
		switch data[i] {
		case ',', '}', ' ', '\t', '\n', '\r':
		default:
			return 0, ErrNotInteger // fraction, exponent or garbage
		}
	} else {
		return 0, ErrMalformed
	}
	if n > MaxSeq || (neg && n != 0) {
		return 0, ErrOutOfRange
	}
	return int64(n), nil
}
