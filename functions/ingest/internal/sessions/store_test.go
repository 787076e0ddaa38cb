package sessions_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/goleak"

	"github.com/wsfleet/wsfleet/functions/ingest/internal/sessions"
	"github.com/wsfleet/wsfleet/functions/ingest/internal/testenv"
	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
	"github.com/wsfleet/wsfleet/shared/source"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
)

func TestMain(m *testing.M) {
	os.Exit(enginetest.Main(m, enginetest.Needs{Dynamo: true}))
}

// idle HTTP connections of the SDK clients outlive a test by design.
var leakOpts = []goleak.Option{
	goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
	goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
}

type env struct {
	db    *dynamodb.Client
	table string
	clk   *clock.Fake
	store *sessions.Store
}

func newEnv(t *testing.T, opts ...sessions.Option) *env {
	t.Helper()
	enginetest.Require(t)
	cfg := testenv.Config(t)
	e := &env{db: dynamodb.NewFromConfig(cfg), table: testenv.Name(t), clk: clock.NewFake(time.UnixMilli(1_800_000_000_000))}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sessionitem.CreateTable(ctx, e.db, e.table); err != nil {
		t.Fatal(err)
	}
	e.store = sessions.New(e.db, e.table, append([]sessions.Option{sessions.WithClock(e.clk)}, opts...)...)
	return e
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// raw reads the item as stored.
func (e *env) raw(t *testing.T, id string) map[string]types.AttributeValue {
	t.Helper()
	out, err := e.db.GetItem(ctxT(t), &dynamodb.GetItemInput{TableName: &e.table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{schema.AttrPk: &types.AttributeValueMemberS{Value: id}}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func n(it map[string]types.AttributeValue, name string) (int64, bool) {
	v, ok := it[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	x, _ := strconv.ParseInt(v.Value, 10, 64)
	return x, true
}

func s(it map[string]types.AttributeValue, name string) string {
	v, _ := it[name].(*types.AttributeValueMemberS)
	if v == nil {
		return ""
	}
	return v.Value
}

func TestStartNewIdempotentAndChanges(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	d := desired("c1", "wss://a.example.com/f?token=1")
	d.Spec.Headers = map[string]string{"Authorization": "Bearer x"}
	res, err := e.store.Start(ctx, d)
	if err != nil || res != (sessions.Result{Generation: 1, Outcome: sessions.Created}) {
		t.Fatalf("create: %+v %v", res, err)
	}
	it := e.raw(t, "c1")
	now := e.clk.Now().UnixMilli()
	if s(it, schema.AttrDesiredState) != schema.StateStarted || e.storedSpec(t, "c1") != `{"ws_url":"wss://a.example.com/f?token=1","headers":{"Authorization":"Bearer x"}}` {
		t.Fatalf("item %v", it)
	}
	if got, want := s(it, schema.AttrIndexShard), schema.IndexShardFor(schema.StateStarted, "c1"); got != want {
		t.Fatalf("index_shard %q, want %q", got, want)
	}
	if got, want := s(it, schema.AttrUnownedShard), schema.UnownedShardOf("c1"); got != want {
		t.Fatalf("new item unowned_shard %q, want %q", got, want)
	}
	if g, _ := n(it, schema.AttrGeneration); g != 1 {
		t.Fatalf("generation %d", g)
	}
	if c, _ := n(it, schema.AttrCreatedAtMs); c != now {
		t.Fatalf("created_at_ms %d", c)
	}
	for _, a := range []string{schema.AttrLeaseOwner, schema.AttrLeaseEpoch, schema.AttrLastSeq, schema.AttrCheckpointEvery} {
		if _, ok := it[a]; ok {
			t.Fatalf("new item has %s", a)
		}
	}

	// The same start again writes nothing.
	e.clk.Advance(time.Second)
	res, err = e.store.Start(ctx, d)
	if err != nil || res != (sessions.Result{Generation: 1, Outcome: sessions.Unchanged}) {
		t.Fatalf("repeat: %+v %v", res, err)
	}
	if u, _ := n(e.raw(t, "c1"), schema.AttrUpdatedAtMs); u != now {
		t.Fatalf("idempotent start wrote updated_at_ms %d", u)
	}
	// The same start with the defaults spelled out is the same start
	// (spec.Check makes it canonical).
	d2 := desired("c1", d.Spec.WSURL)
	d2.Spec.SeqPath, d2.Spec.SeqMode, d2.Spec.OnSinkRefusal = "seq", "field", "fail"
	d2.Spec.Headers = map[string]string{"Authorization": "Bearer x"}
	if fe := d2.Spec.Check(spec.Keys{"seq_path": true}); fe != nil {
		t.Fatal(fe)
	}
	if res, _ := e.store.Start(ctx, d2); res.Outcome != sessions.Unchanged {
		t.Fatalf("explicit default: %+v", res)
	}

	steps := []struct {
		name   string
		change func(*sessions.Desired)
	}{
		{"url", func(d *sessions.Desired) { d.Spec.WSURL = "wss://b.example.com/f" }},
		{"header value", func(d *sessions.Desired) { d.Spec.Headers = map[string]string{"Authorization": "Bearer y"} }},
		{"header added", func(d *sessions.Desired) { d.Spec.Headers = map[string]string{"Authorization": "Bearer y", "X-A": "1"} }},
		{"seq path", func(d *sessions.Desired) { d.Spec.SeqPath = "n" }},
		{"resume param", func(d *sessions.Desired) { d.Spec.Resume = &spec.Resume{QueryParam: "from"} }},
		{"headers removed", func(d *sessions.Desired) { d.Spec.Headers = nil }},
		{"resume removed", func(d *sessions.Desired) { d.Spec.Resume = nil }},
		{"checkpoint every", func(d *sessions.Desired) { d.Spec.CheckpointEvery = "30s" }},
		{"checkpoint every default", func(d *sessions.Desired) { d.Spec.CheckpointEvery = "" }},
		{"open messages", func(d *sessions.Desired) { d.Spec.OpenMessages = []source.OpenMessage{{Text: ptr("subscribe")}} }},
		{"open messages changed", func(d *sessions.Desired) { d.Spec.OpenMessages = []source.OpenMessage{{Text: ptr("subscribe2")}} }},
		{"open messages removed", func(d *sessions.Desired) { d.Spec.OpenMessages = nil }},
	}
	gen := int64(1)
	for _, st := range steps {
		e.clk.Advance(time.Second)
		st.change(&d)
		res, err := e.store.Start(ctx, d)
		gen++
		if err != nil || res != (sessions.Result{Generation: gen, Outcome: sessions.Updated}) {
			t.Fatalf("%s: %+v %v", st.name, res, err)
		}
		it := e.raw(t, "c1")
		if g, _ := n(it, schema.AttrGeneration); g != gen {
			t.Fatalf("%s: stored generation %d", st.name, g)
		}
		if u, _ := n(it, schema.AttrUpdatedAtMs); u != e.clk.Now().UnixMilli() {
			t.Fatalf("%s: updated_at_ms %d", st.name, u)
		}
		if c, _ := n(it, schema.AttrCreatedAtMs); c != now {
			t.Fatalf("%s: created_at_ms changed", st.name)
		}
		if want, _ := d.Spec.Encode(); e.storedSpec(t, "c1") != want {
			t.Fatalf("%s: stored spec %s, want %s", st.name, e.storedSpec(t, "c1"), want)
		}
		_, hasCkpt := it[schema.AttrCheckpointEvery]
		if hasCkpt != (d.Spec.CheckpointEvery != "") {
			t.Fatalf("%s: checkpoint_every_ms %v for checkpoint_every %q", st.name, it[schema.AttrCheckpointEvery], d.Spec.CheckpointEvery)
		}
		if res, _ := e.store.Start(ctx, d); res.Outcome != sessions.Unchanged || res.Generation != gen {
			t.Fatalf("%s repeated: %+v", st.name, res)
		}
	}
}

// desired is a start of id at url with the defaults (checked).
func desired(id, url string) sessions.Desired {
	return sessions.Desired{ConnectionID: id, Spec: spec.Spec{WSURL: url}}
}

func ptr(s string) *string { return &s }

func TestStopAndRestart(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	if _, err := e.store.Stop(ctx, "nope"); !errors.Is(err, sessions.ErrNotFound) {
		t.Fatalf("stop unknown: %v", err)
	}
	if it := e.raw(t, "nope"); len(it) != 0 {
		t.Fatalf("stop created an item: %v", it)
	}
	d := desired("c1", "wss://a.example.com/")
	if _, err := e.store.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Second)
	res, err := e.store.Stop(ctx, "c1")
	if err != nil || res != (sessions.Result{Generation: 1, Outcome: sessions.Stopped}) {
		t.Fatalf("stop: %+v %v", res, err)
	}
	stoppedAt := e.clk.Now().UnixMilli()
	e.clk.Advance(time.Second)
	res, err = e.store.Stop(ctx, "c1")
	if err != nil || res != (sessions.Result{Generation: 1, Outcome: sessions.Unchanged}) {
		t.Fatalf("stop again: %+v %v", res, err)
	}
	it := e.raw(t, "c1")
	if s(it, schema.AttrDesiredState) != schema.StateStopped || s(it, schema.AttrIndexShard) != schema.IndexShardFor(schema.StateStopped, "c1") {
		t.Fatalf("state %v", it)
	}
	if u, _ := n(it, schema.AttrUpdatedAtMs); u != stoppedAt {
		t.Fatalf("a repeated stop wrote updated_at_ms")
	}
	// Restarting a stopped session with the same URL bumps the generation.
	res, err = e.store.Start(ctx, d)
	if err != nil || res != (sessions.Result{Generation: 2, Outcome: sessions.Restarted}) {
		t.Fatalf("restart: %+v %v", res, err)
	}
	if got, _ := e.store.Get(ctx, "c1"); got.DesiredState != schema.StateStarted || got.Generation != 2 {
		t.Fatalf("after restart: %+v", got)
	}
}

// own makes worker the owner of id as an acquire does: lease_owner set,
// lease_epoch + 1, unowned_shard removed.
func (e *env) own(t *testing.T, id, worker string) {
	t.Helper()
	_, err := e.db.UpdateItem(ctxT(t), &dynamodb.UpdateItemInput{
		TableName:                 &e.table,
		Key:                       sessionitem.Key(id),
		UpdateExpression:          aws.String("SET #o = :o ADD #ep :one REMOVE #u"),
		ExpressionAttributeNames:  map[string]string{"#o": schema.AttrLeaseOwner, "#ep": schema.AttrLeaseEpoch, "#u": schema.AttrUnownedShard},
		ExpressionAttributeValues: map[string]types.AttributeValue{":o": &types.AttributeValueMemberS{Value: worker}, ":one": &types.AttributeValueMemberN{Value: "1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkpoint writes id's last_seq on its session item, as a worker's
// checkpoint does (the test writes it unconditionally: the owner's
// condition is the lease store's, tested there).
func (e *env) checkpoint(t *testing.T, id string, seq int64) {
	t.Helper()
	_, err := e.db.UpdateItem(ctxT(t), &dynamodb.UpdateItemInput{
		TableName: &e.table, Key: sessionitem.Key(id), UpdateExpression: aws.String("SET #l = :l"),
		ExpressionAttributeNames:  map[string]string{"#l": schema.AttrLastSeq},
		ExpressionAttributeValues: map[string]types.AttributeValue{":l": &types.AttributeValueMemberN{Value: strconv.FormatInt(seq, 10)}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// worker writes a worker record in state.
func (e *env) worker(t *testing.T, id, state string) {
	t.Helper()
	list := schema.WorkerListAlive
	if state != schema.WorkerAlive {
		list = schema.WorkerListGone
	}
	item, err := sessionitem.EncodeWorker(sessionitem.Worker{Key: schema.WorkerKey(id), State: state, Epoch: 1, HeartbeatSeq: 5,
		HeartbeatAt: 1_800_000_000_000, TTLMs: 10_000, Load: 3, Capacity: 1000, AdminAddr: "10.0.0.1:8081", List: list,
		StartedAtMs: 1_799_999_000_000, Host: "ip-10-0-0-1", Pid: 77})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.PutItem(ctxT(t), &dynamodb.PutItemInput{TableName: &e.table, Item: item}); err != nil {
		t.Fatal(err)
	}
}

// mailbox is worker's mailbox as stored.
func (e *env) mailbox(t *testing.T, worker string) []string {
	t.Helper()
	v, _ := e.raw(t, schema.WorkerKey(worker))[schema.AttrMailbox].(*types.AttributeValueMemberSS)
	if v == nil {
		return nil
	}
	return slices.Sorted(slices.Values(v.Value))
}

// TestLeaseFieldsUntouched: whatever a worker wrote to the ownership
// fields and the checkpoint (last_seq), starts and stops leave them as they are,
// and an owned session never gets an unowned_shard.
func TestLeaseFieldsUntouched(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	if _, err := e.store.Start(ctx, desired("c1", "wss://a.example.com/")); err != nil {
		t.Fatal(err)
	}
	e.own(t, "c1", "worker-1")
	e.checkpoint(t, "c1", 42)
	check := func(step string) {
		t.Helper()
		it := e.raw(t, "c1")
		ep, _ := n(it, schema.AttrLeaseEpoch)
		ls, _ := n(it, schema.AttrLastSeq)
		if s(it, schema.AttrLeaseOwner) != "worker-1" || ep != 1 || it[schema.AttrUnownedShard] != nil || ls != 42 {
			t.Fatalf("%s changed ownership fields or the checkpoint: %v", step, it)
		}
	}
	if _, err := e.store.Start(ctx, desired("c1", "wss://b.example.com/")); err != nil {
		t.Fatal(err)
	}
	check("url change")
	if _, err := e.store.Stop(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	check("stop")
	if _, err := e.store.Start(ctx, desired("c1", "wss://b.example.com/")); err != nil {
		t.Fatal(err)
	}
	check("restart")
	got, err := e.store.Get(ctx, "c1")
	if err != nil || got.LeaseOwner != "worker-1" || got.LeaseEpoch != 1 || got.LastSeq == nil || *got.LastSeq != 42 {
		t.Fatalf("Get: %+v %v", got, err)
	}
}

// countingAPI counts the writes to worker records.
type countingAPI struct {
	sessions.API
	mu      sync.Mutex
	mailbox map[string]int // worker key -> UpdateItem calls
}

func (c *countingAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if pk, _ := in.Key[schema.AttrPk].(*types.AttributeValueMemberS); pk != nil && strings.HasPrefix(pk.Value, schema.WorkerKeyPrefix) {
		c.mu.Lock()
		c.mailbox[pk.Value]++
		c.mu.Unlock()
	}
	return c.API.UpdateItem(ctx, in, opts...)
}

func (c *countingAPI) writes(worker string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mailbox[schema.WorkerKey(worker)]
}

func newCountingEnv(t *testing.T) (*env, *countingAPI) {
	e := newEnv(t)
	c := &countingAPI{API: e.db, mailbox: map[string]int{}}
	e.store = sessions.New(c, e.table, sessions.WithClock(e.clk))
	return e, c
}

// TestStartUnownedOnlyWithoutOwner: a start sets unowned_shard on a new
// session and on an existing one without owner (a restart, a change), never
// on an owned one; an owned one is not mailed when nothing changed.
func TestStartUnownedOnlyWithoutOwner(t *testing.T) {
	e, c := newCountingEnv(t)
	ctx := ctxT(t)
	d := desired("u1", "wss://a.example.com/")
	if _, err := e.store.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	unowned := func() string { return s(e.raw(t, "u1"), schema.AttrUnownedShard) }
	if unowned() != schema.UnownedShardOf("u1") {
		t.Fatalf("new: unowned_shard %q", unowned())
	}
	if _, err := e.store.Stop(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	if unowned() != "" {
		t.Fatalf("stopped: unowned_shard %q", unowned())
	}
	if res, err := e.store.Start(ctx, d); err != nil || res.Outcome != sessions.Restarted || res.Owner != "" {
		t.Fatalf("restart: %+v %v", res, err)
	}
	if unowned() != schema.UnownedShardOf("u1") {
		t.Fatalf("restarted without owner: unowned_shard %q", unowned())
	}
	e.own(t, "u1", "w1")
	e.worker(t, "w1", schema.WorkerAlive)
	d.Spec.WSURL = "wss://b.example.com/"
	res, err := e.store.Start(ctx, d)
	if err != nil || res.Outcome != sessions.Updated || res.Owner != "w1" || !res.OwnerNotified {
		t.Fatalf("change of an owned session: %+v %v", res, err)
	}
	if unowned() != "" {
		t.Fatalf("owned: unowned_shard %q", unowned())
	}
	if res, err := e.store.Start(ctx, d); err != nil || res.Outcome != sessions.Unchanged || res.OwnerNotified {
		t.Fatalf("same start: %+v %v", res, err)
	}
	if got := c.writes("w1"); got != 1 {
		t.Fatalf("%d mailbox writes, want 1 (the change only)", got)
	}
}

// TestChangeOfOwnedSessionMailsOwner: a configuration change and a restart
// of an owned session put its id in the owner's mailbox.
func TestChangeOfOwnedSessionMailsOwner(t *testing.T) {
	e, c := newCountingEnv(t)
	ctx := ctxT(t)
	e.worker(t, "w1", schema.WorkerAlive)
	d := desired("m1", "wss://a.example.com/")
	if _, err := e.store.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Start(ctx, desired("m2", "wss://a.example.com/")); err != nil {
		t.Fatal(err)
	}
	e.own(t, "m1", "w1")
	e.own(t, "m2", "w1")
	d.Spec.CheckpointEvery = "5s"
	if res, err := e.store.Start(ctx, d); err != nil || res.Generation != 2 || res.Owner != "w1" || !res.OwnerNotified {
		t.Fatalf("config change: %+v %v", res, err)
	}
	if got := e.mailbox(t, "w1"); !slices.Equal(got, []string{"m1@2:STARTED"}) {
		t.Fatalf("mailbox after the change: %v", got)
	}
	// Stopped, then started again while the owner still holds it (it
	// has not released yet): the owner is told both times, two entries
	// (the ack of one cannot remove the other).
	if _, err := e.store.Stop(ctx, "m2"); err != nil {
		t.Fatal(err)
	}
	if res, err := e.store.Start(ctx, desired("m2", "wss://a.example.com/")); err != nil || res.Outcome != sessions.Restarted || !res.OwnerNotified {
		t.Fatalf("restart: %+v %v", res, err)
	}
	if got := e.mailbox(t, "w1"); !slices.Equal(got, []string{"m1@2:STARTED", "m2@1:STOPPED", "m2@2:STARTED"}) {
		t.Fatalf("mailbox after the restart: %v", got)
	}
	if got := c.writes("w1"); got != 3 {
		t.Fatalf("%d mailbox writes, want 3", got)
	}
	if it := e.raw(t, "m2"); it[schema.AttrUnownedShard] != nil || s(it, schema.AttrLeaseOwner) != "w1" {
		t.Fatalf("restarted owned session: %v", it)
	}
}

// TestStopTellsOwner: a stop returns the owner and writes exactly one
// mailbox ADD; the record's mailbox holds the stop's entry.
func TestStopTellsOwner(t *testing.T) {
	e, c := newCountingEnv(t)
	ctx := ctxT(t)
	e.worker(t, "w1", schema.WorkerAlive)
	if _, err := e.store.Start(ctx, desired("s1", "wss://a.example.com/")); err != nil {
		t.Fatal(err)
	}
	e.own(t, "s1", "w1")
	res, err := e.store.Stop(ctx, "s1")
	if err != nil || res.Outcome != sessions.Stopped || res.Owner != "w1" || !res.OwnerNotified || res.MailboxErr != nil {
		t.Fatalf("stop: %+v %v", res, err)
	}
	if got := c.writes("w1"); got != 1 {
		t.Fatalf("%d mailbox writes, want exactly 1", got)
	}
	if got := e.mailbox(t, "w1"); !slices.Equal(got, []string{schema.MailboxEntry("s1", 1, schema.StateStopped)}) {
		t.Fatalf("mailbox %v", got)
	}
	it := e.raw(t, "s1")
	if s(it, schema.AttrDesiredState) != schema.StateStopped || it[schema.AttrUnownedShard] != nil || s(it, schema.AttrLeaseOwner) != "w1" {
		t.Fatalf("stopped item %v", it)
	}
	// A stop of an unowned session writes no mailbox.
	if _, err := e.store.Start(ctx, desired("s2", "wss://a.example.com/")); err != nil {
		t.Fatal(err)
	}
	if res, err := e.store.Stop(ctx, "s2"); err != nil || res.Owner != "" || res.OwnerNotified {
		t.Fatalf("stop unowned: %+v %v", res, err)
	}
	if it := e.raw(t, "s2"); it[schema.AttrUnownedShard] != nil {
		t.Fatalf("a stopped session keeps unowned_shard: %v", it)
	}
	if got := c.writes("w1"); got != 1 {
		t.Fatalf("%d mailbox writes after an unowned stop, want 1", got)
	}
}

// TestStopOwnerNotAlive: a stop of a session whose owner is DEAD, or whose
// record is gone, succeeds; nothing is mailed and no record is created.
func TestStopOwnerNotAlive(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	e.worker(t, "dead", schema.WorkerDead)
	for id, owner := range map[string]string{"d1": "dead", "d2": "gone"} {
		if _, err := e.store.Start(ctx, desired(id, "wss://a.example.com/")); err != nil {
			t.Fatal(err)
		}
		e.own(t, id, owner)
		res, err := e.store.Stop(ctx, id)
		if err != nil || res.Outcome != sessions.Stopped || res.Owner != owner || res.OwnerNotified || res.MailboxErr != nil {
			t.Fatalf("stop of %s (owner %s): %+v %v", id, owner, res, err)
		}
	}
	if got := e.mailbox(t, "dead"); got != nil {
		t.Fatalf("a DEAD record got mail: %v", got)
	}
	if it := e.raw(t, schema.WorkerKey("gone")); len(it) != 0 {
		t.Fatalf("a stop created a worker record: %v", it)
	}
}

// A session a worker failed shows failed and its last error; a start with the
// same configuration is a restart that clears FAILED (generation + 1,
// failed_generation removed, unowned_shard back) so that a worker acquires
// it again; a stop of a FAILED session wins, and a later start clears it too.
func TestStartClearsFailed(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	// fail does what a worker's acquire then Fail do.
	fail := func(id string) {
		t.Helper()
		e.own(t, id, "w1")
		_, err := e.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:        &e.table,
			Key:              sessionitem.Key(id),
			UpdateExpression: aws.String("SET #f = #g, #le = :le, #la = :la, #lg = #g, #lp = #p REMOVE #o"),
			ExpressionAttributeNames: map[string]string{"#f": schema.AttrFailedGeneration, "#g": schema.AttrGeneration, "#le": schema.AttrLastError, "#la": schema.AttrLastErrorAtMs, "#o": schema.AttrLeaseOwner,
				"#lg": schema.AttrLastErrorGen, "#lp": schema.AttrLastErrorEpoch, "#p": schema.AttrLeaseEpoch},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":le": &types.AttributeValueMemberS{Value: "handshake refused: HTTP 401"},
				":la": &types.AttributeValueMemberN{Value: strconv.FormatInt(e.clk.Now().UnixMilli()+1, 10)},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	d := desired("c1", "wss://a.example.com/")
	if _, err := e.store.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	fail("c1")
	got, err := e.store.Get(ctx, "c1")
	if err != nil || !got.Failed || got.LastError != "handshake refused: HTTP 401" || got.LastErrorAtMs != e.clk.Now().UnixMilli()+1 ||
		got.LastErrorGen != 1 || got.LastErrorEpoch != got.LeaseEpoch || got.LeaseEpoch == 0 {
		t.Fatalf("Get of a FAILED session (with the generation and tenure of its error): %+v %v", got, err)
	}
	page, err := e.store.List(ctx, schema.StateStarted, 10, "")
	if err != nil || len(page.Sessions) != 1 || !page.Sessions[0].Failed {
		t.Fatalf("list of a FAILED session: %+v %v", page, err)
	}
	res, err := e.store.Start(ctx, d)
	if err != nil || res.Outcome != sessions.Restarted || res.Generation != 2 || res.Owner != "" {
		t.Fatalf("start of a FAILED session: %+v %v", res, err)
	}
	raw := e.raw(t, "c1")
	if s(raw, schema.AttrUnownedShard) != schema.UnownedShardOf("c1") || raw[schema.AttrFailedGeneration] != nil {
		t.Fatalf("after the restart: %v", raw)
	}
	if got, _ := e.store.Get(ctx, "c1"); got.Failed || got.LastError == "" || got.LastErrorGen != 1 || got.Generation != 2 {
		t.Fatalf("after the restart: %+v (the last error stays, with its time and generation)", got)
	}
	if res, err := e.store.Start(ctx, d); err != nil || res.Outcome != sessions.Unchanged {
		t.Fatalf("second start: %+v %v", res, err)
	}

	// Stop wins; the start after it clears failed_generation as well.
	if _, err := e.store.Start(ctx, desired("c2", "wss://a.example.com/")); err != nil {
		t.Fatal(err)
	}
	fail("c2")
	if _, err := e.store.Stop(ctx, "c2"); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.store.Get(ctx, "c2"); got.Failed || got.DesiredState != schema.StateStopped {
		t.Fatalf("a stopped session shows %+v", got)
	}
	if res, err := e.store.Start(ctx, desired("c2", "wss://a.example.com/")); err != nil || res.Outcome != sessions.Restarted {
		t.Fatalf("restart after stop: %+v %v", res, err)
	}
	if raw := e.raw(t, "c2"); raw[schema.AttrFailedGeneration] != nil || s(raw, schema.AttrUnownedShard) != schema.UnownedShardOf("c2") {
		t.Fatalf("restart of a once-FAILED session: %v", raw)
	}
}

// TestGetLastSeqFromCheckpoint: last_seq is the checkpoint's, in Get
// and in List; a session without one has none.
func TestGetLastSeqFromCheckpoint(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	for _, id := range []string{"k1", "k2"} {
		if _, err := e.store.Start(ctx, sessions.Desired{ConnectionID: id, Spec: spec.Spec{WSURL: "wss://a.example.com/", Settings: spec.Settings{CheckpointEvery: "2s"}}}); err != nil {
			t.Fatal(err)
		}
	}
	e.own(t, "k1", "w1")
	e.checkpoint(t, "k1", 977)
	got, err := e.store.Get(ctx, "k1")
	if err != nil || got.LastSeq == nil || *got.LastSeq != 977 || got.Spec.CheckpointInterval() != 2*time.Second {
		t.Fatalf("Get k1: %+v %v", got, err)
	}
	if got, err := e.store.Get(ctx, "k2"); err != nil || got.LastSeq != nil {
		t.Fatalf("Get k2: %+v %v", got, err)
	}
	if _, err := e.store.Get(ctx, "k1x"); !errors.Is(err, sessions.ErrNotFound) {
		t.Fatalf("Get of an unknown id: %v", err)
	}
	page, err := e.store.List(ctx, schema.StateStarted, 10, "")
	if err != nil || len(page.Sessions) != 2 {
		t.Fatalf("list: %+v %v", page, err)
	}
	for _, sess := range page.Sessions {
		if (sess.ConnectionID == "k1") != (sess.LastSeq != nil && *sess.LastSeq == 977) {
			t.Fatalf("listed %s with last_seq %v", sess.ConnectionID, sess.LastSeq)
		}
	}
}

// TestWorkers: the records of alive, dead and left workers, alive first,
// capped at the limit.
func TestWorkers(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	if l, err := e.store.Workers(ctx, 0); err != nil || len(l.Workers) != 0 || l.Truncated {
		t.Fatalf("no workers: %+v %v", l, err)
	}
	e.worker(t, "w2", schema.WorkerAlive)
	e.worker(t, "w1", schema.WorkerAlive)
	e.worker(t, "w0", schema.WorkerDead)
	left, err := sessionitem.EncodeWorker(sessionitem.Worker{Key: schema.WorkerKey("w3"), State: schema.WorkerLeft, Epoch: 1,
		List: schema.WorkerListDone, StartedAtMs: 1, EndedAtMs: 2, ExpiresAt: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &e.table, Item: left}); err != nil {
		t.Fatal(err)
	}
	l, err := e.store.Workers(ctx, 0)
	if err != nil || l.Truncated {
		t.Fatal(l, err)
	}
	var ids []string
	for _, w := range l.Workers {
		ids = append(ids, w.ID+":"+w.State)
	}
	if want := []string{"w1:ALIVE", "w2:ALIVE", "w0:DEAD", "w3:LEFT"}; !slices.Equal(ids, want) {
		t.Fatalf("workers %v, want %v", ids, want)
	}
	if w := l.Workers[0]; w.Load != 3 || w.Capacity != 1000 || w.AdminAddr != "10.0.0.1:8081" || w.HeartbeatAtMs != 1_800_000_000_000 || w.Epoch != 1 ||
		w.Host != "ip-10-0-0-1" || w.Pid != 77 {
		t.Fatalf("w1: %+v", w)
	}
	if w := l.Workers[3]; w.EndedAtMs != 2 || w.List != schema.WorkerListDone {
		t.Fatalf("w3: %+v", w)
	}
	l, err = e.store.Workers(ctx, 3)
	if err != nil || !l.Truncated || len(l.Workers) != 3 {
		t.Fatalf("limit 3: %+v %v", l, err)
	}
}

func TestGet(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	if _, err := e.store.Get(ctx, "nope"); !errors.Is(err, sessions.ErrNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
	d := sessions.Desired{ConnectionID: "c1", Spec: spec.Spec{WSURL: "wss://a.example.com/?k=v", SeqPath: "n", Resume: &spec.Resume{QueryParam: "from"},
		Headers: map[string]string{"X-B": "2", "Authorization": "secret"}}}
	if _, err := e.store.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	got, err := e.store.Get(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	want := sessions.Session{ConnectionID: "c1", DesiredState: "STARTED", Spec: d.Spec,
		Generation: 1, CreatedAtMs: e.clk.Now().UnixMilli(), UpdatedAtMs: e.clk.Now().UnixMilli()}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Get:\n got %+v\nwant %+v", got, want)
	}
}

func TestListPaginates(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	var started, stopped []string
	for i := 0; i < 10; i++ {
		id := fmt.Sprintf("c%02d", i)
		if _, err := e.store.Start(ctx, desired(id, "wss://a.example.com/?t="+id)); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if _, err := e.store.Stop(ctx, id); err != nil {
				t.Fatal(err)
			}
			stopped = append(stopped, id)
		} else {
			started = append(started, id)
		}
	}
	collect := func(state string, limit int) ([]string, int) {
		var ids []string
		cursor, pages := "", 0
		for {
			page, err := e.store.List(ctx, state, limit, cursor)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			if len(page.Sessions) > limit {
				t.Fatalf("page of %d > limit %d", len(page.Sessions), limit)
			}
			for _, s := range page.Sessions {
				if s.DesiredState != state {
					t.Fatalf("listed %s in %s", s.DesiredState, state)
				}
				ids = append(ids, s.ConnectionID)
			}
			if page.Next == "" {
				return ids, pages
			}
			if pages > 20 {
				t.Fatal("list does not end")
			}
			cursor = page.Next
		}
	}
	for _, c := range []struct {
		state string
		want  []string
		limit int
	}{{"STARTED", started, 3}, {"STOPPED", stopped, 2}, {"STARTED", started, 100}} {
		got, pages := collect(c.state, c.limit)
		sort.Strings(got)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Fatalf("%s/%d: got %v, want %v", c.state, c.limit, got, c.want)
		}
		if min := (len(c.want) + c.limit - 1) / c.limit; pages < min {
			t.Fatalf("%s/%d: %d pages", c.state, c.limit, pages)
		}
	}
	// Cursors are checked.
	page, err := e.store.List(ctx, "STARTED", 2, "")
	if err != nil || page.Next == "" {
		t.Fatalf("first page: %+v %v", page, err)
	}
	cur := func(js string) string { return base64.RawURLEncoding.EncodeToString([]byte(js)) }
	wrongShard := fmt.Sprintf(`{"st":"STARTED","sh":%d,"id":"c01"}`, (schema.IndexShardOf("c01")+1)%schema.IndexShards)
	for _, bad := range []string{"!!", "e30", "eyJpZCI6ImEgYiIsInN0IjoiU1RBUlRFRCIsImV4cCI6IjAifQ",
		cur(fmt.Sprintf(`{"st":"STARTED","sh":%d}`, schema.IndexShards)), cur(`{"st":"STARTED","sh":-1}`), cur(wrongShard), cur(`{"st":"STARTED","sh":0,"id":"c01","exp":"0"}`)} {
		if _, err := e.store.List(ctx, "STARTED", 2, bad); !errors.Is(err, sessions.ErrInvalidCursor) {
			t.Fatalf("cursor %q: %v", bad, err)
		}
	}
	if _, err := e.store.List(ctx, "STOPPED", 2, page.Next); !errors.Is(err, sessions.ErrInvalidCursor) {
		t.Fatalf("cursor of another state: %v", err)
	}
}

// TestConcurrentStartsNeverLoseAnUpdate: K writers start one session, each
// with its own URL, while stoppers stop it. Every start is a change, so each
// must get its own generation: the generations handed out are exactly 1..K,
// and the stored URL is the one that got K.
func TestConcurrentStartsNeverLoseAnUpdate(t *testing.T) {
	defer goleak.VerifyNone(t, append(leakOpts, goleak.IgnoreCurrent())...)
	e := newEnv(t, sessions.WithMaxAttempts(200))
	ctx := ctxT(t)
	const K = 16
	var wg sync.WaitGroup
	gens := make([]int64, K)
	errs := make([]error, K)
	for i := 0; i < K; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.store.Start(ctx, desired("race", fmt.Sprintf("wss://a.example.com/%d", i)))
			gens[i], errs[i] = res.Generation, err
			if err == nil && res.Outcome == sessions.Unchanged {
				errs[i] = fmt.Errorf("start %d unchanged", i)
			}
		}()
	}
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 5; j++ {
				if _, err := e.store.Stop(ctx, "race"); err != nil && !errors.Is(err, sessions.ErrNotFound) {
					t.Errorf("stop: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	seen := map[int64]int{}
	for i := 0; i < K; i++ {
		if errs[i] != nil {
			t.Fatalf("start %d: %v", i, errs[i])
		}
		seen[gens[i]]++
	}
	for g := int64(1); g <= K; g++ {
		if seen[g] != 1 {
			t.Fatalf("generation %d handed out %d times (all: %v)", g, seen[g], gens)
		}
	}
	got, err := e.store.Get(ctx, "race")
	if err != nil || got.Generation != K {
		t.Fatalf("final: %+v %v", got, err)
	}
	for i, g := range gens {
		if g == K && got.Spec.WSURL != fmt.Sprintf("wss://a.example.com/%d", i) {
			t.Fatalf("stored URL %s is not the last writer's (%d)", got.Spec.WSURL, i)
		}
	}
}

// TestConcurrentIdenticalStarts: many identical first starts create the item
// once; the rest see it unchanged.
func TestConcurrentIdenticalStarts(t *testing.T) {
	defer goleak.VerifyNone(t, append(leakOpts, goleak.IgnoreCurrent())...)
	e := newEnv(t)
	ctx := ctxT(t)
	const K = 12
	var wg sync.WaitGroup
	outcomes := make([]sessions.Result, K)
	errs := make([]error, K)
	for i := 0; i < K; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outcomes[i], errs[i] = e.store.Start(ctx, sessions.Desired{ConnectionID: "same", Spec: spec.Spec{WSURL: "wss://a.example.com/", Headers: map[string]string{"A": "1"}}})
		}()
	}
	wg.Wait()
	created := 0
	for i, r := range outcomes {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if r.Generation != 1 {
			t.Fatalf("generation %d", r.Generation)
		}
		if r.Outcome == sessions.Created {
			created++
		} else if r.Outcome != sessions.Unchanged {
			t.Fatalf("outcome %s", r.Outcome)
		}
	}
	if created != 1 {
		t.Fatalf("%d creators", created)
	}
}

// TestNewStartIsUnowned: a new start is in the by_unowned index (where
// reconcilers look) before any worker touched it, and a stop takes it out.
func TestNewStartIsUnowned(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	if _, err := e.store.Start(ctx, desired("orphan", "wss://a.example.com/")); err != nil {
		t.Fatal(err)
	}
	unowned := func() []string {
		in, err := sessionitem.IndexQuery(e.table, schema.IndexByUnowned, schema.AttrUnownedShard, schema.UnownedShardOf("orphan"), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := e.db.Query(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, it := range out.Items {
			ids = append(ids, s(it, schema.AttrPk))
		}
		return ids
	}
	if got := unowned(); !slices.Equal(got, []string{"orphan"}) {
		t.Fatalf("by_unowned %v", got)
	}
	if _, err := e.store.Stop(ctx, "orphan"); err != nil {
		t.Fatal(err)
	}
	if got := unowned(); len(got) != 0 {
		t.Fatalf("a stopped session is unowned: %v", got)
	}
}

// TestUnavailable: every operation maps a DynamoDB failure to ErrUnavailable
// (no SDK error type escapes) and a missing table too.
func TestUnavailable(t *testing.T) {
	enginetest.Require(t)
	cfg := testenv.Config(t)
	ctx := ctxT(t)
	for name, tc := range map[string]struct {
		st   *sessions.Store
		want error
	}{
		"dead endpoint": {sessions.New(testenv.DeadDynamo(cfg), "t"), sessions.ErrUnavailable},
		// A missing table is the deployment's fault: no retry fixes it.
		"missing table": {sessions.New(dynamodb.NewFromConfig(cfg), "no-such-table-"+testenv.Name(t)), sessions.ErrRejected},
	} {
		_, err1 := tc.st.Start(ctx, desired("c", "wss://a.example.com/"))
		_, err2 := tc.st.Stop(ctx, "c")
		_, err3 := tc.st.Get(ctx, "c")
		_, err4 := tc.st.List(ctx, "STARTED", 5, "")
		for i, err := range []error{err1, err2, err3, err4} {
			if !errors.Is(err, tc.want) {
				t.Fatalf("%s op %d: %v, want %v", name, i, err, tc.want)
			}
			var apiErr interface{ ErrorCode() string }
			if errors.As(err, &apiErr) {
				t.Fatalf("%s op %d: an SDK error type escapes: %T", name, i, apiErr)
			}
		}
	}
}

// An item DynamoDB refuses for what it is (over its 400 KB item limit: a
// ValidationException, a 4xx) is ErrRejected, not ErrUnavailable: the same
// request can never succeed, so it must not be answered "retry". Nothing
// is stored. (spec.Check refuses such a configuration before; this spec
// skips it, as a bug in the check would.)
func TestItemOverTheLimitIsRejectedNotRetryable(t *testing.T) {
	e := newEnv(t)
	d := desired("big", "wss://a.example.com/")
	d.Spec.Headers = map[string]string{}
	for i := range 110 {
		d.Spec.Headers[fmt.Sprintf("X-H%d", i)] = strings.Repeat("v", 4000)
	}
	_, err := e.store.Start(ctxT(t), d)
	if !errors.Is(err, sessions.ErrRejected) || errors.Is(err, sessions.ErrUnavailable) || errors.Is(err, sessions.ErrOutcomeUnknown) {
		t.Fatalf("a 440 KB item: %v, want ErrRejected only", err)
	}
	if it := e.raw(t, "big"); it != nil {
		t.Fatalf("the refused item was stored: %d attributes", len(it))
	}
}

// TestLastSeqIsWhereTheNextOwnerResumes: GET's last_seq is the larger of
// the session's last_seq (its checkpoint) and the release_seq a release
// wrote (a release records its final checkpoint there, in one write).
func TestLastSeqIsWhereTheNextOwnerResumes(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	if _, err := e.store.Start(ctx, desired("c1", "wss://a.example.com/")); err != nil {
		t.Fatal(err)
	}
	released := func(seq int64) {
		t.Helper()
		_, err := e.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &e.table, Key: sessionitem.Key("c1"), UpdateExpression: aws.String("SET #r = :r"),
			ExpressionAttributeNames:  map[string]string{"#r": schema.AttrReleaseSeq},
			ExpressionAttributeValues: map[string]types.AttributeValue{":r": &types.AttributeValueMemberN{Value: strconv.FormatInt(seq, 10)}},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	want := func(step string, seq int64) {
		t.Helper()
		got, err := e.store.Get(ctx, "c1")
		if err != nil || got.LastSeq == nil || *got.LastSeq != seq {
			t.Fatalf("%s: last_seq %v (%v), want %d", step, got.LastSeq, err, seq)
		}
	}
	released(7)
	want("release only", 7)
	e.checkpoint(t, "c1", 42)
	want("checkpoint past the release", 42)
	released(50)
	want("release past the checkpoint", 50)
}

// TestStandbyReadAndLeftAlone: Get and List read the standby attributes a
// standby's worker writes (its worker id and epoch, a refusal's
// generation, the error) and the spec's standby; starts (a change, the same
// spec again) and stops leave those attributes as they are: only the
// standby's worker writes them.
func TestStandbyReadAndLeftAlone(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	d := sessions.Desired{ConnectionID: "c1", Spec: spec.Spec{WSURL: "wss://a.example.com/", Standby: &spec.Standby{Enabled: new(true)}}}
	if _, err := e.store.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	e.own(t, "c1", "w1")
	_, err := e.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        &e.table,
		Key:              sessionitem.Key("c1"),
		UpdateExpression: aws.String("SET #s = :s, #se = :se, #sr = :sr, #er = :er"),
		ExpressionAttributeNames: map[string]string{"#s": schema.AttrStandby, "#se": schema.AttrStandbyEpoch,
			"#sr": schema.AttrStandbyRefusedGen, "#er": schema.AttrStandbyError},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":s": &types.AttributeValueMemberS{Value: "w2"}, ":se": &types.AttributeValueMemberN{Value: "3"},
			":sr": &types.AttributeValueMemberN{Value: "1"}, ":er": &types.AttributeValueMemberS{Value: "connection closed by the source"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	check := func(step string, wantGen int64) {
		t.Helper()
		got, err := e.store.Get(ctx, "c1")
		if err != nil || got.Standby != "w2" || got.StandbyEpoch != 3 || got.StandbyRefusedGen != 1 ||
			got.StandbyError != "connection closed by the source" || got.Generation != wantGen || !got.Spec.StandbyEnabled() {
			t.Fatalf("%s: Get %+v %v", step, got, err)
		}
		page, err := e.store.List(ctx, got.DesiredState, 10, "")
		if err != nil || len(page.Sessions) != 1 || page.Sessions[0].Standby != "w2" || page.Sessions[0].StandbyRefusedGen != 1 {
			t.Fatalf("%s: List %+v %v", step, page, err)
		}
	}
	check("written by the standby's worker", 1)
	if res, err := e.store.Start(ctx, d); err != nil || res.Outcome != sessions.Unchanged {
		t.Fatalf("the same start: %+v %v", res, err)
	}
	check("the same start", 1)
	// {"enabled": false} is no standby: a change of configuration.
	if res, err := e.store.Start(ctx, desired("c1", "wss://a.example.com/")); err != nil || res.Outcome != sessions.Updated {
		t.Fatalf("a start without standby: %+v %v", res, err)
	}
	if got, _ := e.store.Get(ctx, "c1"); got.Spec.StandbyEnabled() || got.Standby != "w2" || got.Generation != 2 {
		t.Fatalf("after the start without standby: %+v", got)
	}
	if _, err := e.store.Stop(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.store.Get(ctx, "c1"); got.Standby != "w2" || got.StandbyEpoch != 3 || got.StandbyRefusedGen != 1 || got.StandbyError == "" {
		t.Fatalf("after the stop: %+v", got)
	}
}
