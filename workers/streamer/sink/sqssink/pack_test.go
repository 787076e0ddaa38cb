package sqssink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/consume"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/sinktest"
)

// packAll encodes msgs (one session, one tenure, in order) and packs them
// as the batcher does: greedily, each pack at most s.PackLimit() by
// PackGrow.
func packAll(t *testing.T, s *Sink, msgs []sink.Message) []batch.Record {
	t.Helper()
	var packs []batch.Record
	var cur []batch.Record
	size := 0
	flush := func() {
		if len(cur) == 0 {
			return
		}
		p, err := s.Pack(cur)
		if err != nil {
			t.Fatal(err)
		}
		if s.Size(p) != size {
			t.Fatalf("a pack of %d has Size %d, PackGrow said %d", len(cur), s.Size(p), size)
		}
		packs, cur, size = append(packs, p), nil, 0
	}
	for _, m := range msgs {
		r, err := s.Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		if len(cur) > 0 && s.PackGrow(size, r) > s.PackLimit() {
			flush()
		}
		cur, size = append(cur, r), s.PackGrow(size, r)
	}
	flush()
	return packs
}

// sendAll sends recs in SendMessageBatch requests of up to 10.
func sendAll(ctx context.Context, t *testing.T, s *Sink, recs []batch.Record) {
	t.Helper()
	for len(recs) > 0 {
		n := min(len(recs), MaxBatchEntries)
		failed, err := s.Send(ctx, recs[:n])
		if err != nil || failed != nil {
			t.Fatalf("send: failed %v, err %v", failed, err)
		}
		recs = recs[n:]
	}
}

// receiveAll drains q, unpacking each message with consume (asking SQS
// for the content-type attribute), and returns the envelopes in arrival
// order and the messages' count (receiveByType).
func receiveAll(ctx context.Context, t *testing.T, client *sqs.Client, q *string) ([]consume.Envelope, int) {
	t.Helper()
	envs, byType := receiveByType(ctx, t, client, q)
	return envs, byType[consume.PackV1] + byType[consume.PackV2]
}

// receiveByType drains q as receiveAll does (sinktest.DrainSQS) and counts
// the messages by content type; a message of version 1 must hold one
// session and tenure, one of version 2 several.
func receiveByType(ctx context.Context, t *testing.T, client *sqs.Client, q *string) ([]consume.Envelope, map[string]int) {
	t.Helper()
	var envs []consume.Envelope
	byType := map[string]int{}
	for _, m := range sinktest.DrainSQS(ctx, t, client, aws.ToString(q)) {
		e, err := consume.FromSQS(m.Body, m.ContentType)
		if err != nil {
			t.Fatal(err)
		}
		several := slices.ContainsFunc(e, func(x consume.Envelope) bool {
			return x.ConnectionID != e[0].ConnectionID || x.LeaseEpoch != e[0].LeaseEpoch
		})
		if want := map[bool]string{false: consume.PackV1, true: consume.PackV2}[several]; m.ContentType != want {
			t.Fatalf("content type %q for a pack of several tenures %v, want %q", m.ContentType, several, want)
		}
		envs, byType[m.ContentType] = append(envs, e...), byType[m.ContentType]+1
	}
	return envs, byType
}

// same reports whether e is m as the sink wrote it.
func same(e consume.Envelope, m sink.Message) bool {
	return e.ConnectionID == m.ConnectionID && e.Seq == m.Seq && e.Sub == m.Sub && e.LeaseEpoch == m.LeaseEpoch &&
		e.WorkerID == m.WorkerID && e.ReceivedAtMs == m.ReceivedAtMs && e.Binary == m.Binary && string(e.Data) == string(m.Data)
}

// sessionMessages are n messages of one session and tenure: JSON, strings,
// binary frames, a poisoned text frame, U+FFFE, and unsequenced ones.
func sessionMessages(id string, epoch int64, n int) []sink.Message {
	var msgs []sink.Message
	seq := int64(0)
	for i := range n {
		m := sink.Message{ConnectionID: id, LeaseEpoch: epoch, WorkerID: "w-1", ReceivedAtMs: 1_700_000_000_000 + int64(i)}
		switch i % 7 {
		case 3:
			m.Seq, m.Sub = seq, 1 // no seq of its own
		case 4:
			seq++
			m.Seq, m.Binary, m.Data = seq, true, []byte{0, 1, '\n', 0xff}
		case 5:
			seq++
			m.Seq, m.Data = seq, []byte(poisoned)
		case 6:
			seq++
			m.Seq, m.Data = seq, []byte("line\nbreak \uFFFE")
		default:
			seq++
			m.Seq, m.Data = seq, []byte(fmt.Sprintf(`{"seq":%d,"pad":%q}`, seq, strings.Repeat("x", 300)))
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// Packs sent by Send to a FIFO queue of fauxqs are received, unpacked by
// consume, as exactly the envelopes sent, in order per session, in fewer
// messages than envelopes.
func TestPacksOnFauxqs(t *testing.T) {
	ctx, client := fauxqsClient(t)
	name := fmt.Sprintf("packs-%d.fifo", time.Now().UnixNano())
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: map[string]string{"FifoQueue": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	s := NewConfig(client, aws.ToString(q.QueueUrl), Config{PackBytes: 4000}) // several packs per session
	sent := map[string][]sink.Message{}
	var packs []batch.Record
	for i := range 3 {
		id := fmt.Sprintf("session-%d", i)
		sent[id] = sessionMessages(id, int64(i+2), 40)
		packs = append(packs, packAll(t, s, sent[id])...)
	}
	sendAll(ctx, t, s, packs)

	envs, n := receiveAll(ctx, t, client, q.QueueUrl)
	if n != len(packs) || n >= 3*40 {
		t.Fatalf("%d messages received, %d packs sent for %d envelopes", n, len(packs), 3*40)
	}
	got := bySession(t, envs, sent)
	for id, msgs := range sent {
		for i, m := range msgs {
			if e := got[id][i]; !same(e, m) {
				t.Fatalf("%s #%d: received %+v, sent %+v", id, i, e, m)
			}
		}
	}
}

// On a standard queue of fauxqs sessions share packs: a pack of several
// sessions and tenures is one SQS message of content type version 2,
// which consume.FromSQS reads back as exactly the envelopes sent, each
// session's in order; a pack of one session stays version 1. On a FIFO
// queue packs stay per session (TestPacksOnFauxqs).
func TestSessionsSharePacksOnFauxqs(t *testing.T) {
	ctx, client := fauxqsClient(t)
	name := fmt.Sprintf("shared-%d", time.Now().UnixNano())
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name})
	if err != nil {
		t.Fatal(err)
	}
	s := NewConfig(client, aws.ToString(q.QueueUrl), Config{PackBytes: 4000})
	sent := map[string][]sink.Message{}
	var all []sink.Message // interleaved: message i of every session, then i+1
	const perSession = 40
	for i := range 3 {
		id := fmt.Sprintf("session-%d", i)
		sent[id] = sessionMessages(id, int64(i+2), perSession)
	}
	for i := range perSession {
		for j := range 3 {
			all = append(all, sent[fmt.Sprintf("session-%d", j)][i])
		}
	}
	later := sessionMessages("session-0", 9, 3) // a later tenure of session-0, among the others
	all = slices.Insert(all, len(all)/2, later...)
	sent["session-0"] = append(sent["session-0"], later...)
	alone := packAll(t, s, sessionMessages("alone", 1, 3)) // one session: version 1
	sent["alone"] = sessionMessages("alone", 1, 3)
	packs := append(packAll(t, s, all), alone...)
	if g := s.PackGroup(batch.Record{ConnectionID: "session-0"}); g != "" {
		t.Fatalf("standard queue: PackGroup %q, want every session in one group", g)
	}
	sendAll(ctx, t, s, packs)

	envs, byType := receiveByType(ctx, t, client, q.QueueUrl)
	if byType[consume.PackV2] == 0 || byType[consume.PackV1] != len(alone) || byType[consume.PackV1]+byType[consume.PackV2] != len(packs) {
		t.Fatalf("messages by content type %v: want %d, the mixed ones version 2, the %d of one session version 1", byType, len(packs), len(alone))
	}
	got := bySession(t, envs, sent)
	for id, msgs := range sent {
		// a standard queue keeps no order between messages: compare as sets
		for _, m := range msgs {
			if !slices.ContainsFunc(got[id], func(e consume.Envelope) bool { return same(e, m) }) {
				t.Fatalf("%s: %+v sent, not received", id, m)
			}
		}
	}
}

// A FIFO retry of a pack (the same messages: the same id) is dropped by
// SQS; a longer pack starting at the same message is not (another id), and
// the consumer's Filter drops its repeats.
func TestPackRetryIsDeduplicatedOnFauxqs(t *testing.T) {
	ctx, client := fauxqsClient(t)
	name := fmt.Sprintf("retry-%d.fifo", time.Now().UnixNano())
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: map[string]string{"FifoQueue": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	s := New(client, aws.ToString(q.QueueUrl))
	msgs := sessionMessages("c", 3, 9)
	short := packAll(t, s, msgs[:5])
	long := packAll(t, s, msgs)
	if len(short) != 1 || len(long) != 1 {
		t.Fatalf("%d and %d packs, want 1 each", len(short), len(long))
	}
	sendAll(ctx, t, s, short)
	sendAll(ctx, t, s, short) // the retry of an entry SQS had taken
	envs, n := receiveAll(ctx, t, client, q.QueueUrl)
	if n != 1 || len(envs) != 5 {
		t.Fatalf("%d messages, %d envelopes after a retry: want 1 and 5", n, len(envs))
	}
	sendAll(ctx, t, s, long)
	more, n := receiveAll(ctx, t, client, q.QueueUrl)
	if n != 1 || len(more) != 9 {
		t.Fatalf("%d messages, %d envelopes of the longer pack: want 1 and 9", n, len(more))
	}
	var f consume.Filter
	var taken []consume.Envelope
	for _, e := range append(envs, more...) {
		if f.Keep(e) {
			taken = append(taken, e)
		}
	}
	if len(taken) != len(msgs) {
		t.Fatalf("the filter took %d envelopes, want %d", len(taken), len(msgs))
	}
	for i, m := range msgs {
		if !same(taken[i], m) {
			t.Fatalf("#%d: took %+v, sent %+v", i, taken[i], m)
		}
	}
}

// The rule that a byte never poisons a session holds for packs: the
// envelope of a text frame SQS would refuse or alter carries it in
// data_b64, so a pack holding one is taken whole, every neighbour intact,
// on a standard queue of fauxqs.
func TestPoisonedMessageInAPackOnFauxqs(t *testing.T) {
	ctx, client := fauxqsClient(t)
	name := fmt.Sprintf("poison-pack-%d", time.Now().UnixNano())
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name})
	if err != nil {
		t.Fatal(err)
	}
	s := New(client, aws.ToString(q.QueueUrl))
	var msgs []sink.Message
	for seq, data := range []string{`{"seq":1}`, poisoned, "{\"seq\":3,\"x\":\"\uFFFF\"}", `{"seq":4}`} {
		msgs = append(msgs, sink.Message{ConnectionID: "c", Seq: int64(seq + 1), LeaseEpoch: 2, WorkerID: "w", Data: []byte(data)})
	}
	packs := packAll(t, s, msgs)
	if len(packs) != 1 {
		t.Fatalf("%d packs", len(packs))
	}
	sendAll(ctx, t, s, packs)
	envs, n := receiveAll(ctx, t, client, q.QueueUrl)
	if n != 1 || len(envs) != len(msgs) {
		t.Fatalf("%d messages, %d envelopes", n, len(envs))
	}
	for i, m := range msgs {
		if !same(envs[i], m) {
			t.Fatalf("#%d: %+v, sent %q", i, envs[i], m.Data)
		}
	}
	if envs[1].Form != consume.FormB64 || envs[1].B64Reason != sink.ReasonInvalidUTF8 || envs[2].B64Reason != sink.ReasonRefusedChar {
		t.Fatalf("forms %+v", envs[1:3])
	}
}

// An altered pack (SQS holds another body than the one sent) is a final
// refusal of the pack, so of every message in it, and is not sent again.
func TestAlteredPackIsRefusedFinally(t *testing.T) {
	si, client := startStandIn(t, func(body string) string { return strings.Replace(body, "ALTER", "altered", 1) })
	s := New(client, "http://127.0.0.1/000000000000/out")
	msgs := []sink.Message{
		{ConnectionID: "c", Seq: 1, WorkerID: "w", Data: []byte(`{"x":"ALTER"}`)},
		{ConnectionID: "c", Seq: 2, WorkerID: "w", Data: []byte(`{}`)},
	}
	recs := append(packAll(t, s, msgs), packAll(t, s, []sink.Message{{ConnectionID: "d", Seq: 1, WorkerID: "w", Data: []byte(`{}`)}})...)
	failed, err := s.Send(context.Background(), recs)
	var ce *ChecksumError
	if err != nil || len(failed) != 2 || !errors.As(failed[0], &ce) || !sink.IsFinal(failed[0]) || failed[1] != nil {
		t.Fatalf("failed %v, err %v", failed, err)
	}
	if got := si.stored(); len(got) != 2 || !strings.Contains(got[0], "\n") {
		t.Fatalf("stored %q", got)
	}
}

// Size and PackGrow count the content-type attribute (SQS counts it toward
// the message's size), and Pack keeps to one session, one tenure, in order,
// within the limit.
func TestPackSizeAndRefusals(t *testing.T) {
	s := NewConfig(nil, "q.fifo", Config{PackBytes: 1000})
	enc := func(id string, seq, sub, epoch int64, n int) batch.Record {
		r, err := s.Encode(sink.Message{ConnectionID: id, Seq: seq, Sub: sub, LeaseEpoch: epoch, WorkerID: "w", Data: []byte(strings.Repeat("a", n))})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := enc("c", 1, 0, 2, 10), enc("c", 1, 1, 2, 10)
	if s.Size(a) != len(a.Body)+attrBytes || s.PackGrow(0, a) != s.Size(a) || s.PackGrow(s.Size(a), b) != s.Size(a)+1+len(b.Body) {
		t.Fatalf("sizes: %d %d %d", s.Size(a), s.PackGrow(0, a), s.PackGrow(s.Size(a), b))
	}
	if attrBytes != len("content-type")+len("String")+len(consume.PackV1) {
		t.Fatal("the attribute's size")
	}
	if p, err := s.Pack([]batch.Record{a}); err != nil || string(p.Body) != string(a.Body) {
		t.Fatalf("a pack of one: %v", err)
	}
	for name, recs := range map[string][]batch.Record{
		"empty":          nil,
		"two sessions":   {a, enc("d", 2, 0, 2, 10)},
		"two tenures":    {a, enc("c", 2, 0, 3, 10)},
		"out of order":   {b, a},
		"over the limit": {a, enc("c", 2, 0, 2, 900)},
	} {
		if _, err := s.Pack(recs); err == nil {
			t.Errorf("%s: packed", name)
		}
	}
	if g := s.PackGroup(a); g != "c" {
		t.Fatalf("FIFO: PackGroup %q, want the session", g)
	}
	std := NewConfig(nil, "q", Config{PackBytes: 1000})
	if p, err := std.Pack([]batch.Record{a, enc("d", 2, 0, 2, 10), enc("c", 2, 0, 3, 10), b}); err != nil || p.ConnectionID != "c" || p.Seq != 1 || p.Epoch != 2 {
		t.Fatalf("standard queue: a pack of two sessions and tenures: %+v, %v", p, err)
	}
	if _, err := std.Pack([]batch.Record{b, enc("d", 2, 0, 2, 10), a}); err == nil {
		t.Error("standard queue: a session out of order in its tenure: packed")
	}
	off := NewConfig(nil, "q", Config{})
	if off.PackLimit() != 0 || off.Size(a) != len(a.Body) {
		t.Fatal("packing off still counts the attribute")
	}
	if _, err := off.Pack([]batch.Record{a, b}); err == nil {
		t.Fatal("packing off packed")
	}
}

// A pack's FIFO id names its first and last positions and its epoch, and a
// pack of one has the id of its message.
func TestPackDedupID(t *testing.T) {
	s := New(nil, "q.fifo")
	msgs := sessionMessages("c", 4, 5) // seqs 1, 2, 3, 3.1, 4
	p := packAll(t, s, msgs)[0]
	id, err := dedupIDOf(p)
	if err != nil || id != "c:1.0.4~4.0" || id != DedupIDRange("c", 1, 0, 4, 0, 4) {
		t.Fatalf("id %q: %v", id, err)
	}
	p3 := packAll(t, s, msgs[:4])[0]
	if id, err := dedupIDOf(p3); err != nil || id != "c:1.0.4~3.1" {
		t.Fatalf("id %q: %v", id, err)
	}
	one := packAll(t, s, msgs[:1])[0]
	if id, err := dedupIDOf(one); err != nil || id != DedupIDOf(msgs[0]) {
		t.Fatalf("id %q: %v", id, err)
	}
	long := strings.Repeat("a", 128)
	ids := []string{DedupIDRange(long, 1, 0, 9, 0, 2), DedupIDRange(long, 1, 0, 8, 0, 2), DedupIDRange(long, 1, 0, 9, 0, 3)}
	for _, id := range ids {
		if len(id) > maxDedupID {
			t.Fatalf("id of %d characters", len(id))
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(ids)))) != 3 {
		t.Fatalf("ids %q collide", ids)
	}
}

// A pack is version 1 when every line is one session's of one tenure, version
// 2 otherwise; sessions whose ids share a prefix or hold escaped quotes are
// told apart, and a line the sink did not write makes version 2.
func TestPackVersion(t *testing.T) {
	s := New(nil, "q")
	enc := func(id string, seq, epoch int64) batch.Record {
		r, err := s.Encode(sink.Message{ConnectionID: id, Seq: seq, LeaseEpoch: epoch, WorkerID: "w", Data: []byte(`{"lease_epoch":5}`)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tc := range []struct {
		name string
		recs []batch.Record
		want string
	}{
		{"one", []batch.Record{enc("c", 1, 2)}, consume.PackV1},
		{"one session", []batch.Record{enc("c", 1, 2), enc("c", 2, 2), enc("c", 3, 2)}, consume.PackV1},
		{"escaped quote", []batch.Record{enc(`a"b`, 1, 2), enc(`a"b`, 2, 2)}, consume.PackV1},
		{"two sessions", []batch.Record{enc("c", 1, 2), enc("d", 1, 2)}, consume.PackV2},
		{"a prefix", []batch.Record{enc("c", 1, 2), enc("cc", 1, 2)}, consume.PackV2},
		{"escaped quotes", []batch.Record{enc(`a"b`, 1, 2), enc(`a"c`, 1, 2)}, consume.PackV2},
		{"two tenures", []batch.Record{enc("c", 1, 2), enc("c", 1, 12)}, consume.PackV2},
		{"a last other", []batch.Record{enc("c", 1, 2), enc("c", 2, 2), enc("d", 1, 2)}, consume.PackV2},
	} {
		p, err := s.Pack(tc.recs)
		if err != nil {
			t.Fatal(err)
		}
		if got := packVersion(p.Body); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := packVersion([]byte("{\"x\":1}\n{\"x\":1}")); got != consume.PackV2 {
		t.Errorf("lines the sink did not write: %q", got)
	}
	api := &fakeSQS{}
	std := New(api, "q")
	mixed, _ := std.Pack([]batch.Record{enc("c", 1, 2), enc("d", 1, 2)})
	one, _ := std.Pack([]batch.Record{enc("c", 2, 2), enc("c", 3, 2)})
	if _, err := std.Send(context.Background(), []batch.Record{mixed, one}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{consume.PackV2, consume.PackV1} {
		e := api.batches[0].Entries[i]
		if got := aws.ToString(e.MessageAttributes[consume.ContentTypeAttribute].StringValue); got != want || aws.ToString(e.Id) != strconv.Itoa(i) {
			t.Errorf("entry %d: id %q content type %q, want %q", i, aws.ToString(e.Id), got, want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		bytes int
		ok    bool
	}{{0, true}, {DefaultPackBytes, true}, {MaxPackBytes, true}, {-1, false}, {MaxPackBytes + 1, false}} {
		if err := (Config{PackBytes: c.bytes}).Validate(); (err == nil) != c.ok {
			t.Errorf("pack bytes %d: %v", c.bytes, err)
		}
	}
	if DefaultConfig().PackBytes > 64000 {
		t.Fatal("the default pack is over SQS's 64 KB billing chunk")
	}
}

// bySession groups envs by their session and checks that each session of
// sent received as many envelopes as were sent.
func bySession[M any](t *testing.T, envs []consume.Envelope, sent map[string][]M) map[string][]consume.Envelope {
	t.Helper()
	got := map[string][]consume.Envelope{}
	for _, e := range envs {
		got[e.ConnectionID] = append(got[e.ConnectionID], e)
	}
	for id, msgs := range sent {
		if len(got[id]) != len(msgs) {
			t.Fatalf("%s: %d envelopes received, %d sent", id, len(got[id]), len(msgs))
		}
	}
	return got
}
