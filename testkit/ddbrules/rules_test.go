package ddbrules

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
)

// The demands of one Admit are taken all or none: a call whose second
// request would be throttled takes nothing for its first.
func TestAdmitIsAllOrNothing(t *testing.T) {
	th := NewThrottler(AWSThroughput())
	now := time.Unix(1e9, 0)
	w := func(pk string, u float64) Demand {
		return Demand{Table: "t", TableARN: "arn:t", Write: true, Partition: "S:" + pk, Units: u}
	}
	if why := th.Admit(now, w("a", 900)); why != nil {
		t.Fatal(why)
	}
	if why := th.Admit(now, w("b", 500), w("a", 200)); len(why) != 1 || why[0].Reason != TableWriteKeyRange {
		t.Fatalf("a call over key a's bucket: %v", why)
	}
	if why := th.Admit(now, w("b", 1000)); why != nil {
		t.Fatalf("key b was charged for a refused call: %v", why)
	}
	// The table's allowance is checked on the sum of a call's demands:
	// 4,000 a second on a new table, 1,900 taken.
	if why := th.Admit(now, w("c", 1000), w("d", 1000), w("e", 200)); len(why) != 1 || why[0].Reason != TableWriteKeyRange {
		t.Fatalf("a call over the table's warm throughput: %v", why)
	}
	if c := th.Capacity("t", now); c[0] != 4000 || c[1] != 12000 {
		t.Fatalf("capacity of a new table %v", c)
	}
}

// The index entry rule on the sessions table's items agrees with the
// store's count of index writes (every entry is far below 1 KB: one unit
// each).
func TestIndexWritesAgreeWithTheStore(t *testing.T) {
	tbl := TableOf(sessionitem.CreateTableInput("t"))
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	base := Item{"Pk": s("c1"), "desired_state": s("STARTED"), "index_shard": s("STARTED#01"), "lease_epoch": n("1"), "generation": n("1")}
	with := func(kv ...any) Item {
		m := Item{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1].(types.AttributeValue)
		}
		return m
	}
	for _, c := range []struct{ before, after Item }{
		{nil, base},
		{with("unowned_shard", s("U#01")), with("lease_owner", s("w1"), "lease_epoch", n("2"))},
		{with("lease_owner", s("w1")), with("lease_owner", s("w2"), "lease_epoch", n("2"))},
		{with("lease_owner", s("w1")), with("lease_owner", s("w1"), "lease_epoch", n("2"))},
		{with("lease_owner", s("w1")), with("lease_owner", s("w1"), "last_error", s("x"))},
		{Item{"Pk": s("worker#a"), "w_list": s("ALIVE")}, Item{"Pk": s("worker#a"), "w_list": s("GONE")}},
	} {
		units := 0.0
		for _, w := range tbl.IndexWrites(c.before, c.after) {
			units += w.Units
		}
		if want := dynamostore.IndexWrites(c.before, c.after); units != float64(want) {
			t.Errorf("%v → %v: %v index write units, the store counts %d", c.before, c.after, units, want)
		}
	}
	if got := EntryWrites(Entry{In: true, Value: "S:a", Size: 2000}, Entry{In: true, Value: "S:b", Size: 10}, true, true); len(got) != 2 || got[0].Units != 2 || got[1].Units != 1 {
		t.Errorf("a key change: %v, want a delete (2 units) and a put (1)", got)
	}
}
