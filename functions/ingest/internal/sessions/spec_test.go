package sessions_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/wsfleet/wsfleet/functions/ingest/internal/sessions"
	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
)

// storedSpec is id's configuration as stored: inline (an older ingest's
// item) or in the spec item its session names.
func (e *env) storedSpec(t *testing.T, id string) string {
	t.Helper()
	it := e.raw(t, id)
	if v := s(it, schema.AttrSpec); v != "" {
		return v
	}
	sp := e.raw(t, schema.SpecKey(id, s(it, schema.AttrSpecRef)))
	if sp == nil {
		t.Fatalf("%s names spec item %q, which does not exist", id, s(it, schema.AttrSpecRef))
	}
	return s(sp, schema.AttrSpec)
}

// specItems is the spec items of id in the table (a scan: tests only).
func (e *env) specItems(t *testing.T, id string) []string {
	t.Helper()
	out, err := e.db.Scan(ctxT(t), &dynamodb.ScanInput{TableName: &e.table, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, it := range out.Items {
		if k := s(it, schema.AttrPk); strings.HasPrefix(k, schema.SpecKey(id, "")) {
			keys = append(keys, k)
		}
	}
	return keys
}

// TestSpecInAnItemOfItsOwn: a start stores the configuration (a 1 KB
// Authorization header) in a spec item and the session item names it, so
// the session item the workers' ownership writes are billed on stays below
// 1 KB; a change puts a new spec item and deletes the one it superseded; a
// restart of the same configuration keeps its spec item; status shows the
// configuration from it.
func TestSpecInAnItemOfItsOwn(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	d := desired("big", "wss://a.example.com/f")
	d.Spec.Headers = map[string]string{"Authorization": "Bearer " + strings.Repeat("x", 1024)}
	if _, err := e.store.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	it := e.raw(t, "big")
	if _, inline := it[schema.AttrSpec]; inline || dynamostore.ItemSize(it) >= 1024 {
		t.Fatalf("session item: inline spec %v, %d bytes; want none, below 1 KB", inline, dynamostore.ItemSize(it))
	}
	want, _ := d.Spec.Encode()
	if e.storedSpec(t, "big") != want {
		t.Fatal("the spec item does not hold the configuration")
	}
	got, err := e.store.Get(ctx, "big")
	if err != nil || got.Spec.Headers["Authorization"] != d.Spec.Headers["Authorization"] {
		t.Fatalf("get: %v (header %d bytes)", err, len(got.Spec.Headers["Authorization"]))
	}
	first := s(it, schema.AttrSpecRef)

	d.Spec.WSURL = "wss://b.example.com/f"
	if _, err := e.store.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	second := s(e.raw(t, "big"), schema.AttrSpecRef)
	if keys := e.specItems(t, "big"); second == first || len(keys) != 1 || keys[0] != schema.SpecKey("big", second) {
		t.Fatalf("after a change: refs %q then %q, spec items %v; want only the new one", first, second, keys)
	}

	if _, err := e.store.Stop(ctx, "big"); err != nil {
		t.Fatal(err)
	}
	res, err := e.store.Start(ctx, d)
	if err != nil || res.Outcome != sessions.Restarted {
		t.Fatalf("restart: %+v %v", res, err)
	}
	if ref := s(e.raw(t, "big"), schema.AttrSpecRef); ref != second || len(e.specItems(t, "big")) != 1 {
		t.Fatalf("a restart of the same configuration: ref %q (was %q), spec items %v", ref, second, e.specItems(t, "big"))
	}
	page, err := e.store.List(ctx, schema.StateStarted, 10, "")
	if err != nil || len(page.Sessions) != 1 || page.Sessions[0].Spec.WSURL != d.Spec.WSURL {
		t.Fatalf("list: %+v %v", page, err)
	}
}

// TestInlineItemOfAnOlderIngest: an item an older ingest wrote (the spec
// inline) is shown and compared as it is (the same start changes nothing),
// and a start with another configuration moves it to a spec item.
func TestInlineItemOfAnOlderIngest(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	d := desired("old", "wss://a.example.com/f")
	stored, _ := d.Spec.Encode()
	gen := int64(1)
	m, err := sessionitem.Encode(sessionitem.Item{ConnectionID: "old", DesiredState: schema.StateStarted,
		IndexShard: schema.IndexShardFor(schema.StateStarted, "old"), UnownedShard: schema.UnownedShardOf("old"),
		Spec: stored, Generation: &gen, UpdatedAtMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &e.table, Item: m}); err != nil {
		t.Fatal(err)
	}
	got, err := e.store.Get(ctx, "old")
	if err != nil || got.Spec.WSURL != d.Spec.WSURL {
		t.Fatalf("get: %+v %v", got, err)
	}
	if res, err := e.store.Start(ctx, d); err != nil || res.Outcome != sessions.Unchanged {
		t.Fatalf("the same start: %+v %v", res, err)
	}
	d.Spec.WSURL = "wss://b.example.com/f"
	if res, err := e.store.Start(ctx, d); err != nil || res.Outcome != sessions.Updated {
		t.Fatalf("a change: %+v %v", res, err)
	}
	it := e.raw(t, "old")
	if _, inline := it[schema.AttrSpec]; inline || s(it, schema.AttrSpecRef) == "" {
		t.Fatalf("after a change the item is still inline: %v", it)
	}
	if want, _ := d.Spec.Encode(); e.storedSpec(t, "old") != want {
		t.Fatal("spec item")
	}
}
