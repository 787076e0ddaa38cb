package jsonseq

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
)

func TestFind(t *testing.T) {
	cases := []struct {
		in    string
		field string
		want  int64
		err   error
	}{
		{`{"seq":42}`, "seq", 42, nil},
		{` { "a" : 1 , "seq" : 7 } `, "seq", 7, nil},
		{`{"seq":"42"}`, "seq", 42, nil},
		{`{"seq":-3}`, "seq", 0, ErrOutOfRange},
		{`{"seq":"-1"}`, "seq", 0, ErrOutOfRange},
		{`{"seq":-0}`, "seq", 0, nil},
		{`{"seq":0}`, "seq", 0, nil},
		{`{"nested":{"seq":1},"seq":2}`, "seq", 2, nil},
		{`{"arr":[{"seq":1},"}"],"seq":3}`, "seq", 3, nil},
		{`{"s":"has \"seq\":9 inside","seq":4}`, "seq", 4, nil},
		{`{"se\u0071":5}`, "seq", 5, nil},
		{`{"id":"x","sequence_number":11}`, "sequence_number", 11, nil},
		{`{"seq":9007199254740991}`, "seq", MaxSeq, nil},
		{`{"seq":"9007199254740991"}`, "seq", MaxSeq, nil},
		{`{"seq":9007199254740992}`, "seq", 0, ErrOutOfRange},
		{`{"seq":9223372036854775807}`, "seq", 0, ErrOutOfRange},
		{`{"seq":"9223372036854775807"}`, "seq", 0, ErrOutOfRange},
		{`{"seq":99999999999999999999999999}`, "seq", 0, ErrOutOfRange},
		{`{"seq":99999999999999999999999999.5}`, "seq", 0, ErrNotInteger},
		{`{"seq":1.5}`, "seq", 0, ErrNotInteger},
		{`{"seq":1e3}`, "seq", 0, ErrNotInteger},
		{`{"seq":01}`, "seq", 0, ErrNotInteger},
		{`{"seq":null}`, "seq", 0, ErrNotInteger},
		{`{"seq":"x"}`, "seq", 0, ErrNotInteger},
		{`{"other":1}`, "seq", 0, ErrNoField},
		{`{}`, "seq", 0, ErrNoField},
		{`[1,2]`, "seq", 0, ErrNotObject},
		{`hello`, "seq", 0, ErrNotObject},
		{``, "seq", 0, ErrNotObject},
		{`{"a":`, "seq", 0, ErrMalformed},
		{`{"a" 1}`, "seq", 0, ErrMalformed},
		{`{"seq":5`, "seq", 0, ErrMalformed},
	}
	for _, c := range cases {
		got, err := Find([]byte(c.in), c.field)
		if !errors.Is(err, c.err) || (err == nil && got != c.want) {
			t.Errorf("Find(%s, %q) = %d, %v; want %d, %v", c.in, c.field, got, err, c.want, c.err)
		}
	}
}

func TestFindDoesNotAllocate(t *testing.T) {
	msg := []byte(`{"type":"data","payload":{"a":[1,2,3],"b":"text"},"seq":123456,"ts":1700000000000}`)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := Find(msg, "seq"); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Find allocates %.1f times per call", allocs)
	}
}

// FuzzFind checks Find against encoding/json on objects whose top-level keys
// are unique: whenever both succeed they agree, and Find never panics.
func FuzzFind(f *testing.F) {
	for _, s := range []string{`{"seq":1}`, `{"a":{"seq":2},"seq":3}`, `{"seq":"4"}`, `{"x":[1,{"y":"}"}],"seq":-5}`, `{"seq":1.0}`, `{"seq":9223372036854775807}`, `{"seq":"9007199254740992"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Find(data, "seq")
		if err == nil && (got < 0 || got > MaxSeq) {
			t.Fatalf("Find(%q) = %d, outside 0 to MaxSeq", data, got)
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) != nil || !uniqueKeys(data) {
			return
		}
		raw, ok := m["seq"]
		if !ok {
			if err == nil {
				t.Fatalf("Find(%q) = %d, but there is no seq field", data, got)
			}
			return
		}
		want, werr := strconv.ParseInt(string(bytes.Trim(raw, `"`)), 10, 64)
		if err == nil && (werr != nil || want != got) {
			t.Fatalf("Find(%q) = %d, encoding/json says %s", data, got, raw)
		}
	})
}

func uniqueKeys(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	seen := map[string]bool{}
	depth := 0
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return true
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				depth++
			} else {
				depth--
			}
			expectKey = depth == 1 && v == '{'
			continue
		case string:
			if depth == 1 && expectKey {
				if seen[v] {
					return false
				}
				seen[v] = true
				expectKey = false
				continue
			}
		}
		if depth == 1 {
			expectKey = true
		}
	}
}

func BenchmarkFind(b *testing.B) {
	msg := []byte(`{"seq":123456,"session":"s-1","ts":1700000000000,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if _, err := Find(msg, "seq"); err != nil {
			b.Fatal(err)
		}
	}
}

func TestFindPath(t *testing.T) {
	cases := []struct {
		in   string
		path []string
		want int64
		err  error
	}{
		{`{"stream":"btcusdt@depth","data":{"e":"depthUpdate","U":157,"u":160}}`, []string{"data", "u"}, 160, nil},
		{`{"data":{"u":"161"}}`, []string{"data", "u"}, 161, nil},
		{`{"event":"media","sequenceNumber":"7"}`, []string{"sequenceNumber"}, 7, nil},
		{`{"a":{"b":{"c":3}},"c":9}`, []string{"a", "b", "c"}, 3, nil},
		{`{"data":[{"u":1}]}`, []string{"data", "u"}, 0, ErrNoField},
		{`{"data":5}`, []string{"data", "u"}, 0, ErrNoField},
		{`{"data":{}}`, []string{"data", "u"}, 0, ErrNoField},
		{`{"other":{"u":1}}`, []string{"data", "u"}, 0, ErrNoField},
		{`{"data":{"u":1.5}}`, []string{"data", "u"}, 0, ErrNotInteger},
		{`audio bytes`, []string{"data", "u"}, 0, ErrNotObject},
		{`{"data":{"u":`, []string{"data", "u"}, 0, ErrMalformed},
	}
	for _, c := range cases {
		got, err := FindPath([]byte(c.in), c.path)
		if !errors.Is(err, c.err) || (err == nil && got != c.want) {
			t.Errorf("FindPath(%s, %q) = %d, %v; want %d, %v", c.in, c.path, got, err, c.want, c.err)
		}
	}
}

func TestLookup(t *testing.T) {
	cases := []struct {
		in, want string
		path     []string
		err      error
	}{
		{`{"msg_type":"KEEP_ALIVE_REQ","timestamp":1}`, `"KEEP_ALIVE_REQ"`, []string{"msg_type"}, nil},
		{`{"event":"subscribe","arg":{"channel":"tickers"}}`, `"tickers"`, []string{"arg", "channel"}, nil},
		{`{"ok":true}`, `true`, []string{"ok"}, nil},
		{`{"code":0,"x":1}`, `0`, []string{"code"}, nil},
		{`{"a":{"b":[1,{"c":2}]}}`, `[1,{"c":2}]`, []string{"a", "b"}, nil},
		{`{"a":"q\"uote"}`, `"q\"uote"`, []string{"a"}, nil},
		{`{"a":1}`, ``, []string{"b"}, ErrNoField},
		{`pong`, ``, []string{"a"}, ErrNotObject},
	}
	for _, c := range cases {
		got, err := Lookup([]byte(c.in), c.path)
		if !errors.Is(err, c.err) || string(got) != c.want {
			t.Errorf("Lookup(%s, %q) = %s, %v; want %s, %v", c.in, c.path, got, err, c.want, c.err)
		}
	}
}

func TestFindPathDoesNotAllocate(t *testing.T) {
	msg := []byte(`{"stream":"btcusdt@depth","data":{"e":"depthUpdate","E":1700000000000,"U":157,"u":160,"b":[["0.0024","10"]]}}`)
	path := []string{"data", "u"}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := FindPath(msg, path); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("FindPath allocates %.1f times per call", allocs)
	}
}
