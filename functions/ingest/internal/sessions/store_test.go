package sessions_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
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
	"github.com/wsfleet/wsfleet/shared/enginetest"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/shared/schema"
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
	if err := dynamostore.CreateTable(ctx, e.db, e.table); err != nil {
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
	d := sessions.Desired{ConnectionID: "c1", WSURL: "wss://a.example.com/f?token=1", Headers: map[string]string{"Authorization": "Bearer x"}}
	res, err := e.store.Start(ctx, d)
	if err != nil || res != (sessions.Result{Generation: 1, Outcome: sessions.Created}) {
		t.Fatalf("create: %+v %v", res, err)
	}
	it := e.raw(t, "c1")
	now := e.clk.Now().UnixMilli()
	if s(it, schema.AttrDesiredState) != schema.StateStarted || s(it, schema.AttrWSURL) != d.WSURL || s(it, schema.AttrSeqField) != "seq" {
		t.Fatalf("item %v", it)
	}
	if got, want := s(it, schema.AttrIndexShard), schema.IndexShardFor(schema.StateStarted, "c1"); got != want {
		t.Fatalf("index_shard %q, want %q", got, want)
	}
	if exp, ok := n(it, schema.AttrLeaseExpiresAtMs); !ok || exp != 0 {
		t.Fatalf("new item lease_expires_at_ms = %d (present %v), want 0", exp, ok)
	}
	if g, _ := n(it, schema.AttrGeneration); g != 1 {
		t.Fatalf("generation %d", g)
	}
	if c, _ := n(it, schema.AttrCreatedAtMs); c != now {
		t.Fatalf("created_at_ms %d", c)
	}
	for _, a := range []string{schema.AttrLeaseOwner, schema.AttrLeaseEpoch, schema.AttrLastSeq, schema.AttrResumeParam} {
		if _, ok := it[a]; ok {
			t.Fatalf("new item has %s", a)
		}
	}
	if h, ok := it[schema.AttrHeaders].(*types.AttributeValueMemberM); !ok || h.Value["Authorization"].(*types.AttributeValueMemberS).Value != "Bearer x" {
		t.Fatalf("headers %v", it[schema.AttrHeaders])
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
	// The same start with the default seq_field spelled out is the same start.
	d2 := d
	d2.SeqField = "seq"
	d2.Headers = map[string]string{"Authorization": "Bearer x"}
	if res, _ := e.store.Start(ctx, d2); res.Outcome != sessions.Unchanged {
		t.Fatalf("explicit default: %+v", res)
	}

	steps := []struct {
		name   string
		change func(*sessions.Desired)
	}{
		{"url", func(d *sessions.Desired) { d.WSURL = "wss://b.example.com/f" }},
		{"header value", func(d *sessions.Desired) { d.Headers = map[string]string{"Authorization": "Bearer y"} }},
		{"header added", func(d *sessions.Desired) { d.Headers = map[string]string{"Authorization": "Bearer y", "X-A": "1"} }},
		{"seq field", func(d *sessions.Desired) { d.SeqField = "n" }},
		{"resume param", func(d *sessions.Desired) { d.ResumeQueryParam = "from" }},
		{"headers removed", func(d *sessions.Desired) { d.Headers = nil }},
		{"resume removed", func(d *sessions.Desired) { d.ResumeQueryParam = "" }},
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
		if res, _ := e.store.Start(ctx, d); res.Outcome != sessions.Unchanged || res.Generation != gen {
			t.Fatalf("%s repeated: %+v", st.name, res)
		}
	}
	it = e.raw(t, "c1")
	if _, ok := it[schema.AttrHeaders]; ok {
		t.Fatal("headers not removed")
	}
	if _, ok := it[schema.AttrResumeParam]; ok {
		t.Fatal("resume_query_param not removed")
	}
}

func TestStopAndRestart(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	if _, err := e.store.Stop(ctx, "nope"); !errors.Is(err, sessions.ErrNotFound) {
		t.Fatalf("stop unknown: %v", err)
	}
	if it := e.raw(t, "nope"); len(it) != 0 {
		t.Fatalf("stop created an item: %v", it)
	}
	d := sessions.Desired{ConnectionID: "c1", WSURL: "wss://a.example.com/"}
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

// TestLeaseFieldsUntouched: whatever a worker wrote to the lease fields,
// starts and stops leave them as they are.
func TestLeaseFieldsUntouched(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	if _, err := e.store.Start(ctx, sessions.Desired{ConnectionID: "c1", WSURL: "wss://a.example.com/"}); err != nil {
		t.Fatal(err)
	}
	// A worker holds the lease.
	_, err := e.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        &e.table,
		Key:              map[string]types.AttributeValue{schema.AttrPk: &types.AttributeValueMemberS{Value: "c1"}},
		UpdateExpression: aws.String("SET #o = :o, #e = :e, #ep = :ep, #ls = :ls"),
		ExpressionAttributeNames: map[string]string{"#o": schema.AttrLeaseOwner, "#e": schema.AttrLeaseExpiresAtMs,
			"#ep": schema.AttrLeaseEpoch, "#ls": schema.AttrLastSeq},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":o": &types.AttributeValueMemberS{Value: "worker-1"}, ":e": &types.AttributeValueMemberN{Value: "1800000099999"},
			":ep": &types.AttributeValueMemberN{Value: "7"}, ":ls": &types.AttributeValueMemberN{Value: "42"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	check := func(step string) {
		it := e.raw(t, "c1")
		exp, _ := n(it, schema.AttrLeaseExpiresAtMs)
		ep, _ := n(it, schema.AttrLeaseEpoch)
		ls, _ := n(it, schema.AttrLastSeq)
		if s(it, schema.AttrLeaseOwner) != "worker-1" || exp != 1800000099999 || ep != 7 || ls != 42 {
			t.Fatalf("%s changed lease fields: %v", step, it)
		}
	}
	if _, err := e.store.Start(ctx, sessions.Desired{ConnectionID: "c1", WSURL: "wss://b.example.com/"}); err != nil {
		t.Fatal(err)
	}
	check("url change")
	if _, err := e.store.Stop(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	check("stop")
	if _, err := e.store.Start(ctx, sessions.Desired{ConnectionID: "c1", WSURL: "wss://b.example.com/"}); err != nil {
		t.Fatal(err)
	}
	check("restart")
	got, err := e.store.Get(ctx, "c1")
	if err != nil || got.LeaseOwner != "worker-1" || got.LeaseEpoch != 7 || got.LastSeq == nil || *got.LastSeq != 42 || got.LeaseExpiresAtMs != 1800000099999 {
		t.Fatalf("Get: %+v %v", got, err)
	}
}

// A session a worker failed shows failed and its last error; a start with the
// same configuration is a restart that clears FAILED (generation + 1, lease
// expiry back to 0) so that a worker acquires it again; a stop of a FAILED
// session wins, and a later start clears it too.
func TestStartClearsFailed(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	leases := dynamostore.New(e.db, e.table)
	fail := func(id string) lease.Item {
		t.Helper()
		now := e.clk.Now().UnixMilli()
		it, err := leases.Acquire(ctx, id, "w1", now, now+10_000)
		if err != nil {
			t.Fatal(err)
		}
		if err := leases.Fail(ctx, lease.Token{ConnectionID: id, Owner: "w1", Epoch: it.Epoch}, it.Generation, lease.NoSeq, "handshake refused: HTTP 401", now+1); err != nil {
			t.Fatal(err)
		}
		return it
	}
	d := sessions.Desired{ConnectionID: "c1", WSURL: "wss://a.example.com/"}
	if _, err := e.store.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	fail("c1")
	got, err := e.store.Get(ctx, "c1")
	if err != nil || !got.Failed || got.LastError != "handshake refused: HTTP 401" || got.LastErrorAtMs != e.clk.Now().UnixMilli()+1 {
		t.Fatalf("Get of a FAILED session: %+v %v", got, err)
	}
	page, err := e.store.List(ctx, schema.StateStarted, 10, "")
	if err != nil || len(page.Sessions) != 1 || !page.Sessions[0].Failed {
		t.Fatalf("list of a FAILED session: %+v %v", page, err)
	}
	res, err := e.store.Start(ctx, d)
	if err != nil || res.Outcome != sessions.Restarted || res.Generation != 2 {
		t.Fatalf("start of a FAILED session: %+v %v", res, err)
	}
	raw := e.raw(t, "c1")
	if exp, _ := n(raw, schema.AttrLeaseExpiresAtMs); exp != 0 || raw[schema.AttrFailedGeneration] != nil {
		t.Fatalf("after the restart: expiry %d, failed_generation %v", exp, raw[schema.AttrFailedGeneration])
	}
	if got, _ := e.store.Get(ctx, "c1"); got.Failed || got.LastError == "" {
		t.Fatalf("after the restart: %+v (the last error stays, with its time)", got)
	}
	if res, err := e.store.Start(ctx, d); err != nil || res.Outcome != sessions.Unchanged {
		t.Fatalf("second start: %+v %v", res, err)
	}
	if _, err := leases.Acquire(ctx, "c1", "w2", e.clk.Now().UnixMilli(), e.clk.Now().UnixMilli()+10_000); err != nil {
		t.Fatalf("acquire after the restart: %v", err)
	}

	// Stop wins; the start after it clears failed_generation as well.
	if _, err := e.store.Start(ctx, sessions.Desired{ConnectionID: "c2", WSURL: "wss://a.example.com/"}); err != nil {
		t.Fatal(err)
	}
	fail("c2")
	if _, err := e.store.Stop(ctx, "c2"); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.store.Get(ctx, "c2"); got.Failed || got.DesiredState != schema.StateStopped {
		t.Fatalf("a stopped session shows %+v", got)
	}
	if res, err := e.store.Start(ctx, sessions.Desired{ConnectionID: "c2", WSURL: "wss://a.example.com/"}); err != nil || res.Outcome != sessions.Restarted {
		t.Fatalf("restart after stop: %+v %v", res, err)
	}
	if raw := e.raw(t, "c2"); raw[schema.AttrFailedGeneration] != nil {
		t.Fatalf("failed_generation survived a restart: %v", raw)
	}
	if exp, _ := n(e.raw(t, "c2"), schema.AttrLeaseExpiresAtMs); exp != 0 {
		t.Fatalf("lease expiry %d after a restart of a once-FAILED session", exp)
	}
}

func TestGet(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	if _, err := e.store.Get(ctx, "nope"); !errors.Is(err, sessions.ErrNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
	d := sessions.Desired{ConnectionID: "c1", WSURL: "wss://a.example.com/?k=v", SeqField: "n", ResumeQueryParam: "from",
		Headers: map[string]string{"X-B": "2", "Authorization": "secret"}}
	if _, err := e.store.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	got, err := e.store.Get(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	want := sessions.Session{ConnectionID: "c1", DesiredState: "STARTED", WSURL: d.WSURL, HeaderNames: []string{"Authorization", "X-B"},
		SeqField: "n", ResumeQueryParam: "from", Generation: 1, CreatedAtMs: e.clk.Now().UnixMilli(), UpdatedAtMs: e.clk.Now().UnixMilli()}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Get:\n got %+v\nwant %+v", got, want)
	}
}

func TestListPaginates(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	var started, stopped []string
	for i := 0; i < 10; i++ {
		id := fmt.Sprintf("c%02d", i)
		if _, err := e.store.Start(ctx, sessions.Desired{ConnectionID: id, WSURL: "wss://a.example.com/?t=" + id}); err != nil {
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
	wrongShard := fmt.Sprintf(`{"st":"STARTED","sh":%d,"id":"c01","exp":"0"}`, (schema.IndexShardOf("c01")+1)%schema.IndexShards)
	for _, bad := range []string{"!!", "e30", "eyJpZCI6ImEgYiIsInN0IjoiU1RBUlRFRCIsImV4cCI6IjAifQ",
		cur(fmt.Sprintf(`{"st":"STARTED","sh":%d}`, schema.IndexShards)), cur(`{"st":"STARTED","sh":-1}`), cur(wrongShard), cur(`{"st":"STARTED","sh":0,"id":"c01"}`)} {
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
			res, err := e.store.Start(ctx, sessions.Desired{ConnectionID: "race", WSURL: fmt.Sprintf("wss://a.example.com/%d", i)})
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
		if g == K && got.WSURL != fmt.Sprintf("wss://a.example.com/%d", i) {
			t.Fatalf("stored URL %s is not the last writer's (%d)", got.WSURL, i)
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
			outcomes[i], errs[i] = e.store.Start(ctx, sessions.Desired{ConnectionID: "same", WSURL: "wss://a.example.com/", Headers: map[string]string{"A": "1"}})
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

// TestNewStartIsAnOrphan: the lease store's reconciliation query lists a new
// start before any worker touched it.
func TestNewStartIsAnOrphan(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	if _, err := e.store.Start(ctx, sessions.Desired{ConnectionID: "orphan", WSURL: "wss://a.example.com/"}); err != nil {
		t.Fatal(err)
	}
	orphans, err := dynamostore.New(e.db, e.table).Orphans(ctx, time.Now().UnixMilli(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(orphans) != 1 || orphans[0].ConnectionID != "orphan" || orphans[0].ExpiresAtMs != 0 {
		t.Fatalf("orphans %+v", orphans)
	}
	if _, err := e.store.Stop(ctx, "orphan"); err != nil {
		t.Fatal(err)
	}
	if orphans, _ := dynamostore.New(e.db, e.table).Orphans(ctx, time.Now().UnixMilli(), 10); len(orphans) != 0 {
		t.Fatalf("a stopped session is an orphan: %+v", orphans)
	}
}

// TestUnavailable: every operation maps a DynamoDB failure to ErrUnavailable
// (no SDK error type escapes) and a missing table too.
func TestUnavailable(t *testing.T) {
	enginetest.Require(t)
	cfg := testenv.Config(t)
	ctx := ctxT(t)
	for name, st := range map[string]*sessions.Store{
		"dead endpoint": sessions.New(testenv.DeadDynamo(cfg), "t"),
		"missing table": sessions.New(dynamodb.NewFromConfig(cfg), "no-such-table-"+testenv.Name(t)),
	} {
		_, err1 := st.Start(ctx, sessions.Desired{ConnectionID: "c", WSURL: "wss://a.example.com/"})
		_, err2 := st.Stop(ctx, "c")
		_, err3 := st.Get(ctx, "c")
		_, err4 := st.List(ctx, "STARTED", 5, "")
		for i, err := range []error{err1, err2, err3, err4} {
			if !errors.Is(err, sessions.ErrUnavailable) {
				t.Fatalf("%s op %d: %v", name, i, err)
			}
			var apiErr interface{ ErrorCode() string }
			if errors.As(err, &apiErr) {
				t.Fatalf("%s op %d: an SDK error type escapes: %T", name, i, apiErr)
			}
		}
	}
}

// TestStartSubprotocols: subprotocols are stored in order, are part of the
// configuration (a change bumps the generation, the same list does not),
// show in Get, and an omitted list clears them.
func TestStartSubprotocols(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	d := sessions.Desired{ConnectionID: "sp", WSURL: "wss://a.example.com/f", Subprotocols: []string{"v2.json", "v1.json"}}
	if res, err := e.store.Start(ctx, d); err != nil || res.Generation != 1 {
		t.Fatalf("create: %+v %v", res, err)
	}
	if res, err := e.store.Start(ctx, d); err != nil || res.Outcome != sessions.Unchanged {
		t.Fatalf("same list: %+v %v", res, err)
	}
	got, err := e.store.Get(ctx, "sp")
	if err != nil || !slices.Equal(got.Subprotocols, d.Subprotocols) {
		t.Fatalf("get: %v %v", got.Subprotocols, err)
	}
	d.Subprotocols = []string{"v1.json", "v2.json"} // the order is the preference
	if res, err := e.store.Start(ctx, d); err != nil || res != (sessions.Result{Generation: 2, Outcome: sessions.Updated}) {
		t.Fatalf("reordered: %+v %v", res, err)
	}
	d.Subprotocols = nil
	if res, err := e.store.Start(ctx, d); err != nil || res.Generation != 3 {
		t.Fatalf("cleared: %+v %v", res, err)
	}
	if _, ok := e.raw(t, "sp")[schema.AttrSubprotocols]; ok {
		t.Fatal("cleared subprotocols still stored")
	}
}
