package dynamodel

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
)

// The tests in this file need no engine: the distributions, item sizes,
// index writes and the throttling arithmetic, on a fake clock.

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

// A Dist's body has the median and 99th percentile it is given, and its
// spikes come at the share given, within [SpikeMin, SpikeMax] (plus the
// body).
func TestDistQuantilesAndSpikes(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	d := Dist{Median: 4 * time.Millisecond, P99: 16 * time.Millisecond}
	var ds []time.Duration
	for range 20000 {
		ds = append(ds, d.Draw(r))
	}
	if p50 := quantile(ds, 0.5); p50 < 3600*time.Microsecond || p50 > 4400*time.Microsecond {
		t.Errorf("p50 %v, want about 4ms", p50)
	}
	if p99 := quantile(ds, 0.99); p99 < 13*time.Millisecond || p99 > 19*time.Millisecond {
		t.Errorf("p99 %v, want about 16ms", p99)
	}
	s := Dist{Median: time.Millisecond, SpikeShare: 0.01, SpikeMin: 5 * time.Second, SpikeMax: 6 * time.Second}
	spikes := 0
	for range 20000 {
		v := s.Draw(r)
		if v >= 5*time.Second {
			spikes++
			if v > 6*time.Second+time.Millisecond {
				t.Fatalf("spike %v beyond SpikeMax plus the body", v)
			}
		} else if v != time.Millisecond {
			t.Fatalf("a body of %v, want exactly the median (no P99)", v)
		}
	}
	if spikes < 120 || spikes > 300 {
		t.Errorf("%d spikes in 20000 draws, want about 200 (1%%)", spikes)
	}
	if !(Dist{}).IsZero() || (Dist{}).Draw(r) != 0 {
		t.Error("the zero Dist draws something")
	}
}

func attrs(t *testing.T, js string) item {
	t.Helper()
	var it item
	if err := json.Unmarshal([]byte(js), &it); err != nil {
		t.Fatal(err)
	}
	return it
}

// Item sizes follow DynamoDB's rules: names plus values; numbers by
// significant digits; binaries by their raw bytes; lists and maps 3 bytes
// plus 1 per element.
func TestItemSize(t *testing.T) {
	for _, c := range []struct {
		js   string
		size int
	}{
		{`{"pk":{"S":"abc"}}`, 2 + 3},
		{`{"n":{"N":"12345"}}`, 1 + 3 + 1},
		{`{"n":{"N":"-0.00120"}}`, 1 + 1 + 1},
		{`{"n":{"N":"1000"}}`, 1 + 1 + 1},
		{`{"b":{"B":"AAEC"}}`, 1 + 3},
		{`{"t":{"BOOL":true},"z":{"NULL":true}}`, 2 + 2},
		{`{"ss":{"SS":["a","bc"]}}`, 2 + 3},
		{`{"l":{"L":[{"S":"ab"},{"N":"1"}]}}`, 1 + 3 + (1 + 2) + (1 + 2)},
		{`{"m":{"M":{"k":{"S":"v"}}}}`, 1 + 3 + (1 + 1 + 1)},
		{`{"e":{"M":{}}}`, 1 + 3},
	} {
		if got := itemSize(attrs(t, c.js)); got != c.size {
			t.Errorf("%s: size %d, want %d", c.js, got, c.size)
		}
	}
	if writeUnits(3584) != 4 || writeUnits(1229) != 2 || writeUnits(0) != 1 || writeUnits(1024) != 1 {
		t.Error("write units are not ceil(size / 1 KB), at least 1")
	}
	if readUnits(4097, true) != 2 || readUnits(10, false) != 0.5 || readUnits(0, true) != 1 {
		t.Error("read units are not ceil(size / 4 KB), at least 1, halved when eventually consistent")
	}
}

// genValue is a random AttributeValue, as the SDK holds it and as the JSON
// protocol carries it (depth bounds the nesting).
func genValue(r *rand.Rand, depth int) (types.AttributeValue, any) {
	str := func() string {
		runes := []rune("aZ09_-é日本🙂")
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteRune(runes[r.IntN(len(runes))])
		}
		return b.String()
	}
	num := func() string {
		return []string{"0", "7", "-12", "1000", "0.00120", "123456789012345678901234567890", "1.5e3", "-0.5", fmt.Sprint(r.Int64())}[r.IntN(9)]
	}
	bin := func() []byte {
		b := make([]byte, r.IntN(9))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return b
	}
	kinds := 8
	if depth > 0 {
		kinds = 10
	}
	switch r.IntN(kinds) {
	case 0:
		v := str()
		return &types.AttributeValueMemberS{Value: v}, map[string]any{"S": v}
	case 1:
		v := num()
		return &types.AttributeValueMemberN{Value: v}, map[string]any{"N": v}
	case 2:
		v := bin()
		return &types.AttributeValueMemberB{Value: v}, map[string]any{"B": base64.StdEncoding.EncodeToString(v)}
	case 3:
		v := r.IntN(2) == 0
		return &types.AttributeValueMemberBOOL{Value: v}, map[string]any{"BOOL": v}
	case 4:
		return &types.AttributeValueMemberNULL{Value: true}, map[string]any{"NULL": true}
	case 5:
		v := []string{str(), str() + "x"}
		return &types.AttributeValueMemberSS{Value: v}, map[string]any{"SS": v}
	case 6:
		v := []string{num(), "42"}
		return &types.AttributeValueMemberNS{Value: v}, map[string]any{"NS": v}
	case 7:
		v := [][]byte{bin(), {1}}
		return &types.AttributeValueMemberBS{Value: v}, map[string]any{"BS": []string{base64.StdEncoding.EncodeToString(v[0]), "AQ=="}}
	case 8:
		var l []types.AttributeValue
		js := []any{}
		for range r.IntN(4) {
			a, j := genValue(r, depth-1)
			l, js = append(l, a), append(js, j)
		}
		return &types.AttributeValueMemberL{Value: l}, map[string]any{"L": js}
	default:
		m := map[string]types.AttributeValue{}
		js := map[string]any{}
		for range r.IntN(4) {
			k := str()
			m[k], js[k] = genValue(r, depth-1)
		}
		return &types.AttributeValueMemberM{Value: m}, map[string]any{"M": js}
	}
}

// The model meters an item as the store does (finding 11 of issue 35: the
// two kept their own copies of the size rules, and they disagreed on a
// number's length: the store counted runes, the model bytes). On generated
// items of every type, as the SDK holds them and as the wire carries them,
// and on a number string that is not ASCII (DynamoDB refuses it as a number,
// but the model meters what it is sent).
func TestItemSizeIsTheStoresOnGeneratedItems(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 35))
	check := func(sdk map[string]types.AttributeValue, wire map[string]any) {
		t.Helper()
		js, err := json.Marshal(wire)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := itemSize(attrs(t, string(js))), dynamostore.ItemSize(sdk); got != want {
			t.Fatalf("the model sizes %s at %d bytes, the store at %d", js, got, want)
		}
	}
	check(map[string]types.AttributeValue{"n": &types.AttributeValueMemberN{Value: "١٢٣٤"}}, map[string]any{"n": map[string]any{"N": "١٢٣٤"}})
	for range 2000 {
		sdk := map[string]types.AttributeValue{}
		wire := map[string]any{}
		for i := range 1 + r.IntN(6) {
			name := fmt.Sprintf("a%dé", i)
			sdk[name], wire[name] = genValue(r, 3)
		}
		check(sdk, wire)
	}
}

// Index writes: an entry put or deleted costs its projected size, a key
// change a delete and a put, a change of projected attributes one write,
// a change of nothing projected nothing.
func TestIndexWrites(t *testing.T) {
	tbl := parseTable(tableDescription{TableName: "t", TableArn: "arn:t", KeySchema: []keySchemaElement{{"pk", "HASH"}},
		GlobalSecondaryIndexes: []indexDescription{{IndexName: "by_owner", KeySchema: []keySchemaElement{{"owner", "HASH"}}}}})
	tbl.indexes[0].include = []string{"epoch"}
	big := strings.Repeat("x", 3000)
	cases := []struct {
		name          string
		before, after string
		units         []float64
	}{
		{"new item with the index key", ``, `{"pk":{"S":"a"},"owner":{"S":"w1"}}`, []float64{1}},
		{"new item without it (sparse)", ``, `{"pk":{"S":"a"}}`, nil},
		{"key change", `{"pk":{"S":"a"},"owner":{"S":"w1"}}`, `{"pk":{"S":"a"},"owner":{"S":"w2"}}`, []float64{1, 1}},
		{"projected attribute changes", `{"pk":{"S":"a"},"owner":{"S":"w1"},"epoch":{"N":"1"}}`, `{"pk":{"S":"a"},"owner":{"S":"w1"},"epoch":{"N":"2"}}`, []float64{1}},
		{"nothing projected changes", `{"pk":{"S":"a"},"owner":{"S":"w1"},"x":{"S":"` + big + `"}}`, `{"pk":{"S":"a"},"owner":{"S":"w1"},"x":{"S":"y"}}`, nil},
		{"delete", `{"pk":{"S":"a"},"owner":{"S":"w1"},"epoch":{"S":"` + big + `"}}`, ``, []float64{3}},
	}
	for _, c := range cases {
		var before, after item
		if c.before != "" {
			before = attrs(t, c.before)
		}
		if c.after != "" {
			after = attrs(t, c.after)
		}
		var got []float64
		for _, w := range tbl.indexWrites(before, after) {
			got = append(got, w.units)
		}
		if !slices.Equal(got, c.units) {
			t.Errorf("%s: index writes %v, want %v", c.name, got, c.units)
		}
	}
}

type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time      { return c.now }
func (c *fakeClock) add(d time.Duration) { c.now = c.now.Add(d) }
func testTable(name string) *tableInfo {
	return &tableInfo{name: name, arn: "arn:aws:dynamodb:us-east-1:0:table/" + name, onDemand: true}
}
func write(t *tableInfo, pk string, u float64) demand {
	return demand{table: t, write: true, partition: "S:" + pk, units: u}
}

// One partition key value takes 1,000 write units a second with a
// second's burst; other keys are not affected; a hot key takes its
// fraction.
func TestKeyBucket(t *testing.T) {
	clk := &fakeClock{time.Unix(1e9, 0)}
	th := newThrottler(AWS().Throughput, clk.Now)
	tbl := testTable("t")
	n := 0
	for th.admit(write(tbl, "hot", 20)) == nil {
		n++
	}
	if n != 50 {
		t.Fatalf("%d writes of 20 units admitted from a full bucket, want 50", n)
	}
	why := th.admit(write(tbl, "hot", 20))
	if len(why) != 1 || why[0].Reason != "TableWriteKeyRangeThroughputExceeded" || why[0].Resource != tbl.arn {
		t.Fatalf("throttled with %v", why)
	}
	if th.admit(write(tbl, "cold", 20)) != nil {
		t.Fatal("another key was throttled")
	}
	clk.add(500 * time.Millisecond)
	n = 0
	for th.admit(write(tbl, "hot", 20)) == nil {
		n++
	}
	if n != 25 {
		t.Fatalf("%d writes admitted after half a second, want 25", n)
	}
	th.hotKey("t", "k", 0.01, time.Minute) // 10 units a second, 10 deep
	if th.admit(write(tbl, "k", 10)) != nil || th.admit(write(tbl, "k", 1)) == nil {
		t.Fatal("a hot key at 1% does not take 10 units a second")
	}
}

// A drained key (never written before, or with a full bucket) admits
// nothing until its units refill at its rate; other keys keep theirs.
func TestDrainedKeyRefillsAtItsRate(t *testing.T) {
	clk := &fakeClock{time.Unix(1e9, 0)}
	th := newThrottler(AWS().Throughput, clk.Now)
	tbl := testTable("t")
	if th.admit(write(tbl, "warm", 1)) != nil {
		t.Fatal("a full bucket refused a unit")
	}
	th.hotKey("t", "warm", 0.05, time.Minute) // 50 units a second
	th.drainKey("t", "warm")
	th.drainKey("t", "new")
	for _, k := range []string{"warm", "new"} {
		if th.admit(write(tbl, k, 1)) == nil {
			t.Fatalf("drained key %s admitted a write at once", k)
		}
	}
	if th.admit(write(tbl, "cold", 20)) != nil {
		t.Fatal("another key was drained")
	}
	clk.add(100 * time.Millisecond) // hot: 5 units back; new: 100
	n := 0
	for th.admit(write(tbl, "warm", 1)) == nil {
		n++
	}
	if n != 5 {
		t.Fatalf("hot drained key admitted %d units after 100 ms, want 5", n)
	}
	if th.admit(write(tbl, "new", 100)) != nil || th.admit(write(tbl, "new", 1)) == nil {
		t.Fatal("drained key at the full rate does not refill 100 units in 100 ms")
	}
	// The value as an index key (a by_owner entry) is drained too.
	idx := &indexInfo{name: "by_owner", arn: tbl.arn + "/index/by_owner", global: true}
	entry := func(pk, owner string) demand {
		d := write(tbl, pk, 1)
		d.index = []indexWrite{{index: idx, value: "S:" + owner, units: 1}}
		return d
	}
	if th.admit(entry("a", "w1")) != nil {
		t.Fatal("a full index bucket refused an entry")
	}
	th.drainKey("t", "w1")
	why := th.admit(entry("b", "w1"))
	if len(why) != 1 || why[0].Reason != "IndexWriteKeyRangeThroughputExceeded" {
		t.Fatalf("an entry for a drained index key: %v, want the index key throttled", why)
	}
}

// A table serves 4,000 write units a second at first, twice a peak once
// the peak is 30 minutes old, and never more than the 40,000 quota.
func TestOnDemandTable(t *testing.T) {
	clk := &fakeClock{time.Unix(2e9, 0)}
	th := newThrottler(AWS().Throughput, clk.Now)
	tbl := testTable("t")
	i := 0
	second := func() (float64, []reason) { // admits 100-unit writes on fresh keys for one second
		clk.add(time.Second)
		units := 0.0
		for {
			i++
			if why := th.admit(write(tbl, fmt.Sprint("k", i), 100)); why != nil {
				return units, why
			}
			units += 100
		}
	}
	if u, why := second(); u != 4000 || why[0].Reason != "TableWriteKeyRangeThroughputExceeded" {
		t.Fatalf("a new table served %v units in a second (%v), want 4000", u, why)
	}
	if u, _ := second(); u != 4000 {
		t.Fatalf("a peak younger than 30 minutes raised the capacity: %v", u)
	}
	for _, want := range []float64{8000, 16000, 32000, 40000, 40000} {
		clk.add(30 * time.Minute)
		u, why := second()
		if u != want {
			t.Fatalf("after 30 more minutes the table served %v units in a second, want %v", u, want)
		}
		if want == 40000 && why[0].Reason != "TableWriteAccountLimitExceeded" {
			t.Fatalf("at the quota: %v", why)
		}
	}
	th.holdTable("t", 0.1, time.Minute)
	if u, _ := second(); u != 4000 {
		t.Fatalf("held at 10%% the table served %v units, want 4000", u)
	}
}
