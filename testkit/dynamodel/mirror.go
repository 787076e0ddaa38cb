package dynamodel

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"
)

// Index lag and eventually consistent reads. The mirror is a second
// dynalite holding the same tables as the primary (the model replays
// CreateTable, UpdateTable and DeleteTable to it). After every applied
// write the model knows the item's new image (it holds the item's key lock
// across the write, see writes.go) and schedules a Put of that image (a
// Delete when the write removed the item) on the mirror after a lag drawn
// from Profile.Lag, or the lag episode's when one is on. Per item the
// images are applied in the order of the writes: an image is never applied
// before an earlier one of the same item (its time is at least theirs, and
// one applier owns each item). Query on an index, and GetItem, Query,
// BatchGetItem and Scan without ConsistentRead, are answered by the mirror:
// the table as it was a lag ago.

const appliers = 4

type mirror struct {
	m        *Model
	endpoint string

	mu      sync.Mutex
	due     map[string]time.Time // per item: the latest time an image of it is due
	gen     map[string]uint64    // per table: bumped when it is created or deleted
	episode struct {
		lag   time.Duration
		until time.Time
	}
	seq     uint64
	pending atomic.Int64
	queues  [appliers]*applyQueue
	stop    chan struct{}
	wg      sync.WaitGroup
}

type image struct {
	at    time.Time
	seq   uint64
	table string
	gen   uint64
	id    string
	key   item
	item  item // nil: delete
}

type imageHeap []*image

func (h imageHeap) Len() int { return len(h) }
func (h imageHeap) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].seq < h[j].seq
	}
	return h[i].at.Before(h[j].at)
}
func (h imageHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *imageHeap) Push(x any)   { *h = append(*h, x.(*image)) }
func (h *imageHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type applyQueue struct {
	mu   sync.Mutex
	h    imageHeap
	wake chan struct{}
}

func newMirror(m *Model, endpoint string) *mirror {
	mr := &mirror{m: m, endpoint: endpoint, due: map[string]time.Time{}, gen: map[string]uint64{}, stop: make(chan struct{})}
	for i := range mr.queues {
		q := &applyQueue{wake: make(chan struct{}, 1)}
		mr.queues[i] = q
		mr.wg.Add(1)
		go mr.run(q)
	}
	return mr
}

func (mr *mirror) close() {
	close(mr.stop)
	mr.wg.Wait()
}

// bump marks table as created or deleted: images scheduled before are
// dropped.
func (mr *mirror) bump(table string) {
	mr.mu.Lock()
	mr.gen[table]++
	mr.mu.Unlock()
}

// schedule puts the item's new image (nil: deleted) on the mirror after a
// lag.
func (mr *mirror) schedule(table string, k key, it item) {
	lag := mr.m.draw(mr.m.prof.Lag)
	now := time.Now()
	mr.mu.Lock()
	if now.Before(mr.episode.until) {
		lag = max(lag, mr.episode.lag)
	}
	at := now.Add(lag)
	if d, ok := mr.due[k.id]; ok && d.After(at) {
		at = d
	}
	mr.due[k.id] = at
	mr.seq++
	img := &image{at: at, seq: mr.seq, table: table, gen: mr.gen[table], id: k.id, key: k.attrs, item: it}
	mr.mu.Unlock()
	mr.pending.Add(1)
	h := fnv.New32a()
	h.Write([]byte(k.id))
	q := mr.queues[h.Sum32()%appliers]
	q.mu.Lock()
	heap.Push(&q.h, img)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (mr *mirror) run(q *applyQueue) {
	defer mr.wg.Done()
	for {
		q.mu.Lock()
		var next *image
		wait := time.Hour
		if len(q.h) > 0 {
			if d := time.Until(q.h[0].at); d <= 0 {
				next = heap.Pop(&q.h).(*image)
			} else {
				wait = d
			}
		}
		q.mu.Unlock()
		if next != nil {
			mr.apply(next)
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-mr.stop:
			t.Stop()
			return
		case <-q.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

func (mr *mirror) apply(img *image) {
	defer mr.pending.Add(-1)
	mr.mu.Lock()
	stale := mr.gen[img.table] != img.gen
	if d, ok := mr.due[img.id]; ok && !d.After(img.at) {
		delete(mr.due, img.id)
	}
	mr.mu.Unlock()
	if stale {
		return
	}
	op, body := "PutItem", map[string]any{"TableName": img.table, "Item": img.item}
	if img.item == nil {
		op, body = "DeleteItem", map[string]any{"TableName": img.table, "Key": img.key}
	}
	b, _ := json.Marshal(body)
	for attempt := 0; attempt < 3; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rep, err := mr.m.call(ctx, mr.endpoint, op, b)
		cancel()
		if err == nil && rep.status == 200 {
			return
		}
		if err == nil && rep.errType() != "ResourceNotFoundException" { // refused: give up
			mr.m.logf("mirror: %s %s: %d %s", op, img.table, rep.status, rep.body)
			return
		}
		// Not answering, or the table is not there (yet: dynalite makes a
		// new table ACTIVE a moment after CreateTable answers): again.
		select {
		case <-mr.stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	mr.m.logf("mirror: %s %s: the mirror does not take it; image dropped", op, img.table)
}

// waitActive waits (a few seconds at most) until the mirror's table is
// ACTIVE, so that the first images of a new table find it.
func (mr *mirror) waitActive(ctx context.Context, table string) {
	body, _ := json.Marshal(map[string]string{"TableName": table})
	for range 100 {
		rep, err := mr.m.call(ctx, mr.endpoint, "DescribeTable", body)
		if err != nil {
			return
		}
		var out struct{ Table struct{ TableStatus string } }
		if rep.status == 200 && json.Unmarshal(rep.body, &out) == nil && out.Table.TableStatus == "ACTIVE" {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// LagEpisode holds the lagging state lag behind for dur: every write in
// the next dur reaches index queries and eventually consistent reads no
// sooner than lag after it (the writes after the episode never overtake
// them, item by item). It fails on a model without a mirror (a profile
// with a zero Lag).
func (m *Model) LagEpisode(lag, dur time.Duration) error {
	if m.mirror == nil {
		return errors.New("dynamodel: this model has no lagging state (its profile's Lag is zero)")
	}
	m.mirror.mu.Lock()
	m.mirror.episode.lag, m.mirror.episode.until = lag, time.Now().Add(dur)
	m.mirror.mu.Unlock()
	return nil
}

// Pending is how many item images wait to reach the lagging state.
func (m *Model) Pending() int {
	if m.mirror == nil {
		return 0
	}
	return int(m.mirror.pending.Load())
}

// Settle waits until the lagging state has every image scheduled so far
// (Pending is 0), or ctx ends.
func (m *Model) Settle(ctx context.Context) error {
	for m.Pending() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// sync copies to the mirror every table the primary has (its definition
// and items): a model started on a primary that already holds tables.
func (mr *mirror) sync(ctx context.Context) error {
	var start string
	for {
		req := map[string]any{}
		if start != "" {
			req["ExclusiveStartTableName"] = start
		}
		b, _ := json.Marshal(req)
		rep, err := mr.m.call(ctx, mr.m.primary, "ListTables", b)
		if err != nil {
			return err
		}
		var out struct {
			TableNames             []string
			LastEvaluatedTableName string
		}
		if err := json.Unmarshal(rep.body, &out); err != nil {
			return err
		}
		for _, name := range out.TableNames {
			if err := mr.copyTable(ctx, name); err != nil {
				return err
			}
		}
		if out.LastEvaluatedTableName == "" {
			return nil
		}
		start = out.LastEvaluatedTableName
	}
}

func (mr *mirror) copyTable(ctx context.Context, name string) error {
	t, err := mr.m.describe(ctx, mr.m.primary, name)
	if err != nil {
		return err
	}
	if _, err := mr.m.describe(ctx, mr.endpoint, name); err == nil {
		return nil // there already
	}
	if rep, err := mr.m.call(ctx, mr.endpoint, "CreateTable", t.create); err != nil || rep.status != 200 {
		return errors.Join(err, replyError("mirror CreateTable "+name, rep))
	}
	mr.waitActive(ctx, name)
	var from json.RawMessage
	for {
		req := map[string]any{"TableName": name, "ConsistentRead": true}
		if from != nil {
			req["ExclusiveStartKey"] = from
		}
		b, _ := json.Marshal(req)
		rep, err := mr.m.call(ctx, mr.m.primary, "Scan", b)
		if err != nil || rep.status != 200 {
			return errors.Join(err, replyError("scan "+name, rep))
		}
		var page struct {
			Items            []item
			LastEvaluatedKey json.RawMessage
		}
		if err := json.Unmarshal(rep.body, &page); err != nil {
			return err
		}
		for len(page.Items) > 0 {
			n := min(25, len(page.Items))
			var puts []any
			for _, it := range page.Items[:n] {
				puts = append(puts, map[string]any{"PutRequest": map[string]any{"Item": it}})
			}
			page.Items = page.Items[n:]
			b, _ := json.Marshal(map[string]any{"RequestItems": map[string]any{name: puts}})
			if rep, err := mr.m.call(ctx, mr.endpoint, "BatchWriteItem", b); err != nil || rep.status != 200 {
				return errors.Join(err, replyError("mirror BatchWriteItem "+name, rep))
			}
		}
		if len(page.LastEvaluatedKey) == 0 || string(page.LastEvaluatedKey) == "null" {
			return nil
		}
		from = page.LastEvaluatedKey
	}
}
