package dynamostore

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Sizes by the rules of
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html
func TestItemSize(t *testing.T) {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	for _, c := range []struct {
		name string
		item map[string]types.AttributeValue
		want int
	}{
		{"empty", nil, 0},
		// name bytes + UTF-8 bytes.
		{"string", map[string]types.AttributeValue{"Pk": s("abc")}, 2 + 3},
		{"utf8 string", map[string]types.AttributeValue{"é": s("日本")}, 2 + 6},
		// 1 byte per two significant digits, rounded up, + 1.
		{"number 5 digits", map[string]types.AttributeValue{"n": n("12345")}, 1 + 3 + 1},
		{"number 4 digits", map[string]types.AttributeValue{"n": n("1234")}, 1 + 2 + 1},
		{"zeroes trimmed", map[string]types.AttributeValue{"n": n("1000")}, 1 + 1 + 1},
		{"leading zeroes and fraction", map[string]types.AttributeValue{"n": n("-0.00125")}, 1 + 2 + 1},
		{"zero", map[string]types.AttributeValue{"n": n("0")}, 1 + 0 + 1},
		{"epoch ms", map[string]types.AttributeValue{"hb_at_ms": n("1800000000123")}, 8 + 7 + 1},
		{"bool and null", map[string]types.AttributeValue{"b": &types.AttributeValueMemberBOOL{Value: true}, "z": &types.AttributeValueMemberNULL{Value: true}}, 2 + 2},
		{"binary", map[string]types.AttributeValue{"bin": &types.AttributeValueMemberB{Value: []byte{1, 2, 3, 4}}}, 3 + 4},
		// Sets: the sum of their elements.
		{"string set", map[string]types.AttributeValue{"mailbox": &types.AttributeValueMemberSS{Value: []string{"a1", "b22"}}}, 7 + 5},
		// Maps: 3 + per element 1 + name + value.
		{"map", map[string]types.AttributeValue{"headers": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"Auth": s("xy")}}}, 7 + 3 + 1 + 4 + 2},
		{"empty map", map[string]types.AttributeValue{"m": &types.AttributeValueMemberM{}}, 1 + 3},
		// Lists: 3 + per element 1 + value.
		{"list", map[string]types.AttributeValue{"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{s("ab"), n("7")}}}, 1 + 3 + (1 + 2) + (1 + 2)},
	} {
		if got := ItemSize(c.item); got != c.want {
			t.Errorf("%s: ItemSize = %d, want %d", c.name, got, c.want)
		}
	}
	if WriteUnits(0) != 1 || WriteUnits(1024) != 1 || WriteUnits(1025) != 2 || ConsistentReadUnits(4096) != 1 || ConsistentReadUnits(4097) != 2 {
		t.Error("unit rounding")
	}
	if queryHalfUnits(0) != 1 || queryHalfUnits(8192) != 2 || queryHalfUnits(8193) != 3 {
		t.Error("query rounding")
	}
	big := map[string]types.AttributeValue{"h": s(strings.Repeat("x", 1024))}
	if WriteUnits(ItemSize(big)) != 2 {
		t.Error("a 1 KB value plus its name is 2 write units")
	}
}

func TestIndexWrites(t *testing.T) {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	base := map[string]types.AttributeValue{"Pk": s("c1"), "desired_state": s("STARTED"), "index_shard": s("STARTED#01"), "lease_epoch": n("1"), "generation": n("1")}
	with := func(kv ...any) map[string]types.AttributeValue {
		m := map[string]types.AttributeValue{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
			} else {
				m[kv[i].(string)] = kv[i+1].(types.AttributeValue)
			}
		}
		return m
	}
	for _, c := range []struct {
		name          string
		before, after map[string]types.AttributeValue
		want          int64
	}{
		{"new item: by_state put", nil, base, 1},
		{"acquire of an unowned session: by_owner put, by_unowned delete", with("unowned_shard", s("U#01")), with("lease_owner", s("w1"), "lease_epoch", n("2")), 2},
		{"takeover: by_owner move", with("lease_owner", s("w1")), with("lease_owner", s("w2"), "lease_epoch", n("2")), 2},
		{"re-acquire: by_owner projected epoch", with("lease_owner", s("w1")), with("lease_owner", s("w1"), "lease_epoch", n("2")), 1},
		{"note error: nothing indexed", with("lease_owner", s("w1")), with("lease_owner", s("w1"), "last_error", s("x")), 0},
		{"stop of an owned session: by_state move, by_owner projection", with("lease_owner", s("w1")), with("lease_owner", s("w1"), "desired_state", s("STOPPED"), "index_shard", s("STOPPED#01")), 3},
		{"worker declared dead: by_worker_list move", map[string]types.AttributeValue{"Pk": s("worker#a"), "w_list": s("ALIVE")}, map[string]types.AttributeValue{"Pk": s("worker#a"), "w_list": s("GONE")}, 2},
		{"heartbeat: nothing", map[string]types.AttributeValue{"Pk": s("worker#a"), "w_list": s("ALIVE"), "hb_seq": n("1")}, map[string]types.AttributeValue{"Pk": s("worker#a"), "w_list": s("ALIVE"), "hb_seq": n("2")}, 0},
	} {
		if got := IndexWrites(c.before, c.after); got != c.want {
			t.Errorf("%s: %d index writes, want %d", c.name, got, c.want)
		}
	}
}
