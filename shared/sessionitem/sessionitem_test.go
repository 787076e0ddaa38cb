package sessionitem

import (
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// Every field of Item is one schema attribute, and every schema attribute is a field.
func TestItemTagsAreSchemaAttributes(t *testing.T) {
	gen, failed, released, last := int64(3), int64(3), int64(41), int64(40)
	full := Item{
		ConnectionID: "c-1", DesiredState: schema.StateStarted, IndexShard: schema.IndexShardFor(schema.StateStarted, "c-1"),
		Spec: `{"ws_url":"wss://x","seq_mode":"none"}`, SpecRef: "3.0123456789abcdef", Generation: &gen, CheckpointEveryMs: 5000, LeaseOwner: "w1", LeaseEpoch: 2, UnownedShard: "U#01", HandoffTo: "w2", HandoffAtMs: 9, LastSeq: &last, ReleaseSeq: &released, CreatedAtMs: 1, UpdatedAtMs: 4,
		FailedGeneration: &failed, LastError: "handshake refused: HTTP 401", LastErrorAtMs: 6, LastErrorGen: 3, LastErrorEpoch: 2,
		Standby: "w2", StandbyEpoch: 5, StandbyRefusedGen: 2, StandbyError: "source refused a second connection",
		TenureKey: "0123456789abcdef0123456789abcdef",
	}
	m, err := Encode(full)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{schema.AttrPk, schema.AttrDesiredState, schema.AttrIndexShard, schema.AttrSpec, schema.AttrSpecRef,
		schema.AttrGeneration, schema.AttrCheckpointEvery, schema.AttrLeaseOwner,
		schema.AttrLeaseEpoch, schema.AttrUnownedShard, schema.AttrHandoffTo, schema.AttrHandoffAtMs, schema.AttrLastSeq, schema.AttrReleaseSeq, schema.AttrCreatedAtMs, schema.AttrUpdatedAtMs,
		schema.AttrFailedGeneration, schema.AttrLastError, schema.AttrLastErrorAtMs, schema.AttrLastErrorGen, schema.AttrLastErrorEpoch,
		schema.AttrStandby, schema.AttrStandbyEpoch, schema.AttrStandbyRefusedGen, schema.AttrStandbyError, schema.AttrTenureKey}
	if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Fatalf("encoded attributes %v, want %v", got, want)
	}
	if n := reflect.TypeFor[Item]().NumField(); n != len(want) {
		t.Fatalf("Item has %d fields, schema %d attributes", n, len(want))
	}
	if _, ok := m[schema.AttrLeaseEpoch].(*types.AttributeValueMemberN); !ok {
		t.Fatalf("lease_epoch encoded as %T", m[schema.AttrLeaseEpoch])
	}
	back, err := Decode(m)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, full) {
		t.Fatalf("round trip: %+v, want %+v", back, full)
	}
}

// Absent optional attributes stay absent, and decode as absent.
func TestOptionalAttributesAbsent(t *testing.T) {
	m, err := Encode(Item{ConnectionID: "c-2", DesiredState: schema.StateStopped})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{schema.AttrIndexShard, schema.AttrSpec, schema.AttrSpecRef, schema.AttrGeneration, schema.AttrLeaseOwner, schema.AttrUnownedShard, schema.AttrCheckpointEvery, schema.AttrLastSeq, schema.AttrCreatedAtMs,
		schema.AttrFailedGeneration, schema.AttrLastError, schema.AttrLastErrorAtMs, schema.AttrLastErrorGen, schema.AttrLastErrorEpoch,
		schema.AttrStandby, schema.AttrStandbyEpoch, schema.AttrStandbyRefusedGen, schema.AttrStandbyError} {
		if v, ok := m[a]; ok {
			t.Errorf("%s written as %v for a zero value", a, v)
		}
	}
	it, err := Decode(map[string]types.AttributeValue{schema.AttrPk: &types.AttributeValueMemberS{Value: "c-2"}})
	if err != nil {
		t.Fatal(err)
	}
	if it.ConnectionID != "c-2" || it.Generation != nil || it.LeaseOwner != "" || it.Spec != "" {
		t.Fatalf("decoded %+v", it)
	}
}

// A wrongly typed attribute is an error, not a silent zero.
func TestDecodeRejectsWrongType(t *testing.T) {
	_, err := Decode(map[string]types.AttributeValue{
		schema.AttrPk:         &types.AttributeValueMemberS{Value: "c-3"},
		schema.AttrGeneration: &types.AttributeValueMemberS{Value: "one"},
	})
	if err == nil {
		t.Fatal("decoded a string generation")
	}
}

func TestUpdateAndIndexQuery(t *testing.T) {
	in, err := Update("tbl", "c-4", expression.Set(LeaseOwner, expression.Value("w1")).Add(LeaseEpoch, expression.Value(1)),
		expression.AttributeExists(Pk).And(DesiredState.Equal(expression.Value(schema.StateStarted))))
	if err != nil {
		t.Fatal(err)
	}
	if *in.TableName != "tbl" || !reflect.DeepEqual(in.Key, Key("c-4")) || *in.UpdateExpression == "" || *in.ConditionExpression == "" {
		t.Fatalf("update input %+v", in)
	}
	if got := slices.Sorted(maps.Values(in.ExpressionAttributeNames)); !slices.Equal(got, []string{schema.AttrPk, schema.AttrDesiredState, schema.AttrLeaseEpoch, schema.AttrLeaseOwner}) {
		t.Fatalf("names %v", got)
	}
	q, err := StateQuery("tbl", "STARTED#01", 10, StateIndexKey("c-4", "STARTED#01"))
	if err != nil {
		t.Fatal(err)
	}
	if *q.IndexName != schema.IndexByState || *q.Limit != 10 || len(q.ExpressionAttributeValues) != 1 || len(q.ExclusiveStartKey) != 2 {
		t.Fatalf("query input %+v", q)
	}
	q, err = IndexQuery("tbl", schema.IndexByOwner, schema.AttrLeaseOwner, "w1", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if *q.IndexName != schema.IndexByOwner || q.Limit != nil {
		t.Fatalf("query input %+v", q)
	}
}

// FAILED is STARTED with failed_generation equal to the generation: a later
// generation (a new start) or a STOP ends it.
func TestFailed(t *testing.T) {
	g := func(n int64) *int64 { return &n }
	for _, c := range []struct {
		name string
		it   Item
		want bool
	}{
		{"never failed", Item{DesiredState: schema.StateStarted, Generation: g(2)}, false},
		{"failed at this generation", Item{DesiredState: schema.StateStarted, Generation: g(2), FailedGeneration: g(2)}, true},
		{"failed at an older generation", Item{DesiredState: schema.StateStarted, Generation: g(3), FailedGeneration: g(2)}, false},
		{"stopped after failing", Item{DesiredState: schema.StateStopped, Generation: g(2), FailedGeneration: g(2)}, false},
		{"no generation attribute", Item{DesiredState: schema.StateStarted, FailedGeneration: g(0)}, true},
	} {
		if got := c.it.Failed(); got != c.want {
			t.Errorf("%s: Failed() = %v, want %v", c.name, got, c.want)
		}
	}
}

// A ref names the generation it was stored at and the content: the same
// configuration at two generations, or two configurations at one, are
// different items; the hash is the content's, from a ref or an inline spec.
func TestSpecRef(t *testing.T) {
	a, b := `{"ws_url":"wss://a"}`, `{"ws_url":"wss://b"}`
	if SpecRef(1, a) == SpecRef(2, a) || SpecRef(2, a) == SpecRef(2, b) {
		t.Fatal("refs collide")
	}
	if HashOfRef(SpecRef(7, a)) != SpecHash(a) || SpecHashOf(Item{SpecRef: SpecRef(7, a)}) != SpecHash(a) || SpecHashOf(Item{Spec: a}) != SpecHash(a) {
		t.Fatal("hash of a ref or an inline spec")
	}
	// An inline spec beside a ref (an older ingest's start over a newer
	// one's item) is the newer configuration.
	if SpecHashOf(Item{Spec: b, SpecRef: SpecRef(7, a)}) != SpecHash(b) {
		t.Fatal("an inline spec wins over a ref")
	}
	m, err := EncodeSpec("c-1", SpecRef(7, a), a)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeSpec(m); err != nil || got.Spec != a || got.Key != schema.SpecKey("c-1", SpecRef(7, a)) {
		t.Fatalf("spec item round trip: %+v, %v", got, err)
	}
}
