package sink

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// validCases are inputs where a hand-written validator is likely to part
// from encoding/json; each is checked against json.Valid itself, and the
// table seeds the differential fuzz test.
func validCases() []string {
	cases := []string{
		// empty and whitespace
		"", " ", "\t\n\r ", "\f", "\v", "\u00a0", " 1", "1 ", " \t\n\r{} \r\n\t ", "\f1", "1\f",
		// one top-level value only
		"1 2", "{}{}", "[] []", `"a" "b"`, "true false", "1,", "1]", "{}}", "[]]",
		// numbers
		"0", "-0", "-", "--1", "+1", "01", "-01", "00", "1.", "1.e5", ".5", "-.5", "0.5", "1e", "1e+", "1e-",
		"1E-5", "1e+5", "1e5", "1E5", "1e05", "1.0e10", "1.0E+10", "-1.25e-300", "1ee5", "1e5.5", "1.2.3",
		"0x10", "1_000", "Infinity", "-Infinity", "NaN", "1e1e1", "0e", "0e0", "0.0", "-0.0e-0", "12a",
		"123456789012345678901234567890123456789012345678901234567890", "1e999999999", "-1e-999999999",
		"[-]", "[1.]", "[01]", "[1e]", "{\"a\":-}", "{\"a\":1.}", "{\"a\":01}", "[0,1,-1,1.5,-1.5e3]",
		// literals
		"true", "false", "null", "tru", "fals", "nul", "True", "NULL", "truee", "nulll", "t", "f", "n",
		"[true,false,null]", "[tru]", "{\"a\":nul}", "true1", "null,",
		// strings and escapes
		`""`, `"a"`, `"\""`, `"\\"`, `"\/"`, `"\b"`, `"\f"`, `"\n"`, `"\r"`, `"\t"`, `"\u0000"`, `"\uABCD"`,
		`"\uabcd"`, `"\uAbCd"`, `"\ud83d\ude00"`, `"\ud800"`, `"\"\\\/\b\f\n\r\t\u0041"`,
		`"\x41"`, `"\a"`, `"\0"`, `"\'"`, `"\U0041"`, `"\u12"`, `"\u12G4"`, `"\u"`, `"\u123"`, `"\u123g"`,
		`"\`, `"\\`, `"\u00`, `"abc`, `"`, `"a\"`, `"a\\"`, `"a\\\"`,
		"\"\x00\"", "\"\x01\"", "\"\x1f\"", "\"\t\"", "\"\n\"", "\"\r\"", "\"\x7f\"", "\" \"", "\"\x20\"",
		"\"\x80\"", "\"\xff\"", "\"\xc3\x28\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"héllo ✓ 😀\"",
		"\xff", "\xef\xbb\xbf{}", "{\"\xff\":1}", "[\"\xfe\xff\"]",
		// strings crossing the 8-byte words of the fast path
		`"1234567"`, `"12345678"`, `"123456789"`, `"1234567\"8"`, `"12345678\n"`, `"abcdefgh\u0041ijklmnop"`,
		"\"abcdefg\x1f\"", "\"abcdefgh\x00ijklmno\"", "\"abcdefghijklmnop", "\"abcdefghijklmno\\",
		"\"abc\x80\x80\x80\x80\x80\x80\x80\x80\x7f\"", "\"\x9f\x9f\x9f\x9f\x9f\x9f\x9f\x9f\"", "\"\xa2\xa2\xa2\xa2\xa2\xa2\xa2\xa2\"",
		"\"\xdc\xdc\xdc\xdc\xdc\xdc\xdc\xdc\"", "\"\x1f\x1f\x1f\x1f\x1f\x1f\x1f\x1f\"",
		// arrays
		"[]", "[ ]", "[", "]", "[1", "[1,", "[1,]", "[,]", "[,1]", "[1,,2]", "[1 2]", "[1,2]", "[[]]", "[[]", "[]]",
		"[\"a\"\"b\"]", "[{}]", "[{},{}]", "[1:2]", "[\n1\n,\n2\n]",
		// objects
		"{}", "{ }", "{", "}", `{"a"}`, `{"a":}`, `{"a":1`, `{"a":1,}`, `{"a" 1}`, `{"a":1 "b":2}`, `{,}`,
		`{a:1}`, `{1:1}`, `{null:1}`, `{"a":1,"a":2}`, `{"a":1,,"b":2}`, `{"a"::1}`, `{:1}`, `{"a":1}}`,
		`{"a":[1,{"b":null}],"c":{"d":[]}}`, `{ "a" : 1 , "b" : [ ] }`, `{"a":1]`, `[1}`, `{"a":{"b":[}]}}`,
		`{"a":1,"b"}`, `{"a":1,"b":}`, `{"a":1,"b`, `{"a":1,"`, `{"a":1,`, `{"a`, `{"a":"`, `{"a":"b`,
		// feed-like messages
		`{"seq":123456,"ts":1700000000123,"sym":"BTCUSDT","p":"42000.5"}`,
		`{"seq":1,"session":"bench-000001","ts":1767225600000}`,
		`{"seq":123456,"ts":1700000000123,"sym":"BTCUSDT","p":"42000.5"`,
		`{"seq":123456,"ts":1700000000123,"sym":"BTCUSDT","p":"42000.5",}`,
	}
	// nesting at encoding/json's limit and one past it, arrays, objects and
	// both mixed; past the inline bit stack (128) and at its word edges
	for _, d := range []int{1, 2, 63, 64, 65, 127, 128, 129, 130, 1000, maxNestingDepth - 1, maxNestingDepth, maxNestingDepth + 1} {
		cases = append(cases,
			strings.Repeat("[", d)+strings.Repeat("]", d),
			strings.Repeat(`{"a":`, d)+"1"+strings.Repeat("}", d),
			strings.Repeat(`[{"a":`, d/2)+strings.Repeat("[", d%2)+"0"+strings.Repeat("]", d%2)+strings.Repeat("}]", d/2),
			strings.Repeat("[", d)+strings.Repeat("]", d-1),             // unterminated
			strings.Repeat("[", d)+strings.Repeat("]", d)+"]",           // one closer too many
			strings.Repeat("[", d)+strings.Repeat("}", d),               // mismatched closers
			strings.Repeat(`{"a":[`, d/2+1)+strings.Repeat("]}", d/2+1), // 2*(d/2+1) levels
		)
	}
	return cases
}

func TestValidJSONMatchesEncodingJSON(t *testing.T) {
	sawTrue, sawFalse := 0, 0
	for _, c := range validCases() {
		want := json.Valid([]byte(c))
		if got := validJSON([]byte(c)); got != want {
			t.Errorf("validJSON(%s) = %v, json.Valid says %v", short(c), got, want)
		}
		if want {
			sawTrue++
		} else {
			sawFalse++
		}
	}
	// the table must exercise both answers (a sanity check of the table)
	if sawTrue < 50 || sawFalse < 50 {
		t.Fatalf("table has %d valid and %d invalid cases", sawTrue, sawFalse)
	}
}

// TestValidJSONDepthLimit pins the limit itself, not just agreement: a
// change in encoding/json's limit should be noticed, not followed silently.
func TestValidJSONDepthLimit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{strings.Repeat("[", maxNestingDepth) + strings.Repeat("]", maxNestingDepth), true},
		{strings.Repeat("[", maxNestingDepth+1) + strings.Repeat("]", maxNestingDepth+1), false},
		{strings.Repeat(`{"":`, maxNestingDepth) + "0" + strings.Repeat("}", maxNestingDepth), true},
		{strings.Repeat(`{"":`, maxNestingDepth+1) + "0" + strings.Repeat("}", maxNestingDepth+1), false},
	} {
		if got, std := validJSON([]byte(tc.in)), json.Valid([]byte(tc.in)); got != tc.want || std != tc.want {
			t.Errorf("depth case %s: validJSON %v, json.Valid %v, want %v", short(tc.in), got, std, tc.want)
		}
	}
}

func TestValidJSONNoAllocs(t *testing.T) {
	shallow := []byte(strings.Repeat(`[{"a":`, 32) + `"x"` + strings.Repeat("}]", 32)) // 64 deep
	feed := []byte(`{"seq":123456,"ts":1700000000123,"sym":"BTCUSDT","p":"42000.5"}`)
	for _, b := range [][]byte{shallow, feed} {
		if !validJSON(b) {
			t.Fatalf("validJSON(%s) = false", short(string(b)))
		}
		if n := testing.AllocsPerRun(100, func() { validJSON(b) }); n != 0 {
			t.Errorf("validJSON(%s) allocates %v times", short(string(b)), n)
		}
	}
}

func TestSpecialMaskExhaustiveByte(t *testing.T) {
	// every byte value in every lane, among plain neighbours, both with
	// high-bit and low neighbours (borrows would show up there)
	for _, fill := range []byte{'a', 0x80, 0xff, 0x20, 0x7f} {
		for lane := 0; lane < 8; lane++ {
			for c := 0; c < 256; c++ {
				var w uint64
				for j := 0; j < 8; j++ {
					b := uint64(fill)
					if j == lane {
						b = uint64(c)
					}
					w |= b << (8 * j)
				}
				var want uint64
				for j := 0; j < 8; j++ {
					if b := byte(w >> (8 * j)); b < 0x20 || b == '"' || b == '\\' {
						want |= 0x80 << (8 * j)
					}
				}
				if got := specialMask(w); got != want {
					t.Fatalf("specialMask(%#016x) = %#016x, want %#016x (byte %#x in lane %d)", w, got, want, c, lane)
				}
			}
		}
	}
}

func FuzzValidJSONMatchesEncodingJSON(f *testing.F) {
	for _, c := range validCases() {
		if len(c) <= 4096 { // the deep cases would only slow the fuzzer's mutations
			f.Add([]byte(c))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid says %v", b, got, want)
		}
	})
}

// short quotes s for a failure message, eliding the middle of a long one.
func short(s string) string {
	if len(s) > 80 {
		return strconv.Quote(s[:40]) + "…" + strconv.Quote(s[len(s)-20:]) + " (" + strconv.Itoa(len(s)) + " B)"
	}
	return strconv.Quote(s)
}

var (
	benchFeed60 = []byte(`{"seq":123456,"ts":1700000000123,"sym":"BTCUSDT","p":"42000.5"}`)
	// a ~640 B depth-update-like message: nested arrays of price strings
	benchFeed640 = []byte(`{"e":"depthUpdate","E":1700000000123,"s":"BTCUSDT","U":157,"u":160,"seq":123456,` +
		`"b":[["42000.50","0.125"],["41999.90","1.500"],["41999.10","0.020"],["41998.00","3.000"],["41997.50","0.750"],` +
		`["41996.20","0.010"],["41995.00","2.250"],["41994.80","0.500"],["41993.30","1.125"],["41992.00","0.300"]],` +
		`"a":[["42001.00","0.400"],["42001.50","0.075"],["42002.30","1.000"],["42003.00","2.500"],["42004.10","0.060"],` +
		`["42005.00","0.900"],["42006.70","1.750"],["42007.20","0.040"],["42008.00","5.000"],["42009.90","0.225"]],` +
		`"meta":{"venue":"binance","stream":"btcusdt@depth@100ms","note":"snapshot-aligned \"delta\" frame","ok":true,"gap":null}}`)
)

func BenchmarkValidJSON(b *testing.B) {
	for _, m := range []struct {
		name string
		data []byte
	}{{"60B", benchFeed60}, {"640B", benchFeed640}} {
		if !json.Valid(m.data) || !validJSON(m.data) {
			b.Fatalf("%s message is not valid JSON", m.name)
		}
		b.Run(m.name+"/wsfleet", func(b *testing.B) {
			b.SetBytes(int64(len(m.data)))
			b.ReportAllocs()
			for b.Loop() {
				if !validJSON(m.data) {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(m.name+"/encoding-json", func(b *testing.B) {
			b.SetBytes(int64(len(m.data)))
			b.ReportAllocs()
			for b.Loop() {
				if !json.Valid(m.data) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
