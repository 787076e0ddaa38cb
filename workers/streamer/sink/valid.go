package sink

import (
	"encoding/binary"
	"math/bits"
)

// maxNestingDepth is encoding/json's limit on nested arrays and objects
// (scanner.go): validJSON must refuse exactly what json.Valid refuses, or a
// payload would be embedded raw by one and quoted by the other.
const maxNestingDepth = 10000

// strPlain[c] is true for a byte a string body takes as is: anything but
// '"', '\\' and the control bytes below 0x20. encoding/json does not check
// UTF-8 inside strings (bytes >= 0x80 pass), and DEL (0x7f) is legal.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// isHex[c] is true for an ASCII hex digit of either case (\uXXXX).
var isHex = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	return t
}()

// validJSON reports what json.Valid(data) reports, without its per-byte
// state-function calls (about half of the stdout sink's CPU per message).
//
// It does not recurse: the open arrays and objects are a bit stack (1 =
// object) held in a small array on the frame and moved to the heap only
// past inlineDepth levels, so a deeply nested payload neither grows the
// session goroutine's stack nor allocates in the usual case.
func validJSON(data []byte) bool {
	const inlineDepth = 128
	var inline [inlineDepth / 64]uint64
	kinds := inline[:]
	depth := 0 // open arrays and objects
	n := len(data)
	i := skipSpace(data, 0)

	for {
		// A value starts at i.
		if i >= n {
			return false
		}
		switch c := data[i]; c {
		case '{', '[':
			// The limit counts an empty one too: json.Valid refuses the
			// opening bracket past maxNestingDepth whatever follows it.
			if depth == maxNestingDepth {
				return false
			}
			i = skipSpace(data, i+1)
			if i < n && data[i] == c+2 { // '[' + 2 = ']', '{' + 2 = '}'
				i++
				break // empty: a complete value, nothing to push
			}
			if depth == len(kinds)*64 {
				grown := make([]uint64, (maxNestingDepth+63)/64)
				copy(grown, kinds)
				kinds = grown
			}
			w, bit := depth>>6, uint64(1)<<(depth&63)
			depth++
			if c == '[' {
				kinds[w] &^= bit
				continue // its first element
			}
			kinds[w] |= bit
			if i = objectKey(data, i); i < 0 {
				return false
			}
			continue // the first member's value
		case '"':
			if i = scanString(data, i+1); i < 0 {
				return false
			}
		case 't':
			if n-i < 4 || string(data[i:i+4]) != "true" {
				return false
			}
			i += 4
		case 'f':
			if n-i < 5 || string(data[i:i+5]) != "false" {
				return false
			}
			i += 5
		case 'n':
			if n-i < 4 || string(data[i:i+4]) != "null" {
				return false
			}
			i += 4
		default:
			if i = scanNumber(data, i); i < 0 {
				return false
			}
		}

		// A value ended before i: close what it completes, up to the point
		// where another value must follow.
	after:
		for {
			i = skipSpace(data, i)
			if depth == 0 {
				return i == n // one top-level value, then only whitespace
			}
			if i >= n {
				return false
			}
			inObject := kinds[(depth-1)>>6]&(1<<((depth-1)&63)) != 0
			switch data[i] {
			case ',':
				i = skipSpace(data, i+1)
				if inObject {
					if i = objectKey(data, i); i < 0 {
						return false
					}
				}
				break after
			case ']':
				if inObject {
					return false
				}
			case '}':
				if !inObject {
					return false
				}
			default:
				return false
			}
			depth--
			i++
		}
	}
}

// objectKey scans `"key"` `:` and the whitespace around the colon from i
// and returns the index of the member's value, or -1.
func objectKey(data []byte, i int) int {
	if i >= len(data) || data[i] != '"' {
		return -1
	}
	if i = scanString(data, i+1); i < 0 {
		return -1
	}
	i = skipSpace(data, i)
	if i >= len(data) || data[i] != ':' {
		return -1
	}
	return skipSpace(data, i+1)
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace (space, \t, \n, \r: nothing else, unlike unicode.IsSpace).
func skipSpace(data []byte, i int) int {
	for ; i < len(data); i++ {
		c := data[i]
		if c > ' ' || (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
			return i
		}
	}
	return i
}

// SWAR constants: the bytes of a little-endian word, 8 at a time.
const (
	lsbs = 0x0101010101010101
	msbs = 0x8080808080808080
)

// scanString scans a string body from i (after the opening quote) and
// returns the index after the closing quote, or -1.
//
// It reads 8 bytes at a time and jumps straight to the first '"', '\\' or
// control byte of the word: a feed's keys and values are mostly shorter
// than a word, so one load and one mask usually find the closing quote.
func scanString(data []byte, i int) int {
	n := len(data)
	for {
		var mask uint64
		switch {
		case i+8 <= n:
			if mask = specialMask(binary.LittleEndian.Uint64(data[i:])); mask == 0 {
				i += 8
				continue
			}
		case n >= 8:
			// Fewer than 8 bytes left: the slice's last word, shifted
			// so that data[i] is its first byte. The zero bytes shifted
			// in read as control bytes past the end: unterminated.
			mask = specialMask(binary.LittleEndian.Uint64(data[n-8:]) >> (8 * (i + 8 - n)))
		default:
			for i < n && strPlain[data[i]] {
				i++
			}
			mask = 1
		}
		if i += bits.TrailingZeros64(mask) >> 3; i >= n {
			return -1 // unterminated
		}
		switch data[i] {
		case '"':
			return i + 1
		case '\\':
			if i+1 >= n {
				return -1
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if n-i < 6 || !isHex[data[i+2]] || !isHex[data[i+3]] || !isHex[data[i+4]] || !isHex[data[i+5]] {
					return -1
				}
				i += 6
			default:
				return -1
			}
		default:
			return -1 // a raw control byte
		}
	}
}

// specialMask has the high bit of each byte of w that is '"', '\\' or
// below 0x20, and no other bit. Each lane is exact, since no borrow
// crosses bytes (every byte's high bit is set before subtracting): the
// lowest set bit is the first such byte, and none is ever missed.
func specialMask(w uint64) uint64 {
	// b < 0x20: (b|0x80) - 0x20 keeps the high bit iff b&0x7f >= 0x20,
	// and b itself must have its high bit clear.
	ctl := ^((w | msbs) - 0x20*lsbs) & ^w & msbs
	// b == x: z = b^x is zero; ((z|0x80) - 1) keeps the high bit iff
	// z&0x7f >= 1, so z == 0 is ^((z|0x80)-1) & ^z & 0x80.
	q := w ^ ('"' * lsbs)
	bs := w ^ ('\\' * lsbs)
	zq := ^((q | msbs) - lsbs) & ^q & msbs
	zb := ^((bs | msbs) - lsbs) & ^bs & msbs
	return ctl | zq | zb
}

// scanNumber scans a number from i as encoding/json's grammar has it
// (RFC 8259: -? (0 | [1-9][0-9]*) (.[0-9]+)? ([eE][+-]?[0-9]+)?) and
// returns the index after it, or -1. What follows is the caller's to check
// ("01" is 0 then a stray 1).
func scanNumber(data []byte, i int) int {
	n := len(data)
	if data[i] == '-' {
		i++
		if i >= n {
			return -1
		}
	}
	switch c := data[i]; {
	case c == '0':
		i++
	case '1' <= c && c <= '9':
		i++
		for i < n && isDigit(data[i]) {
			i++
		}
	default:
		return -1
	}
	if i < n && data[i] == '.' {
		i++
		if i >= n || !isDigit(data[i]) {
			return -1
		}
		for i < n && isDigit(data[i]) {
			i++
		}
	}
	if i < n && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < n && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= n || !isDigit(data[i]) {
			return -1
		}
		for i < n && isDigit(data[i]) {
			i++
		}
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
