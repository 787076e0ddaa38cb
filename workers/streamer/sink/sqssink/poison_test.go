package sqssink

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch/batchtest"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/consume"
)

// standIn is an SQS stand-in on 127.0.0.1 that the real SDK client talks
// to (JSON protocol): it decodes each body as SQS does (encoding/json, as
// text: a byte that is not UTF-8 becomes U+FFFD), stores it after alter,
// and answers with the MD5 of what it stored, as SQS does. A body the SDK
// or the stand-in changed thus fails the SDK's MD5 check, as it does on SQS.
type standIn struct {
	alter    func(string) string
	mu       sync.Mutex
	bodies   []string // what the queue holds, in arrival order
	requests int
}

func (s *standIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var in struct {
		MessageBody string
		Entries     []struct{ Id, MessageBody string }
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	store := func(body string) map[string]string {
		if s.alter != nil {
			body = s.alter(body)
		}
		s.bodies = append(s.bodies, body)
		sum := md5.Sum([]byte(body))
		return map[string]string{"MessageId": fmt.Sprintf("m-%d", len(s.bodies)), "MD5OfMessageBody": hex.EncodeToString(sum[:])}
	}
	var out any
	switch r.Header.Get("X-Amz-Target") {
	case "AmazonSQS.SendMessage":
		out = store(in.MessageBody)
	case "AmazonSQS.SendMessageBatch":
		var ok []map[string]string
		for _, e := range in.Entries {
			res := store(e.MessageBody)
			res["Id"] = e.Id
			ok = append(ok, res)
		}
		out = map[string]any{"Successful": ok, "Failed": []any{}}
	default:
		http.Error(w, "unsupported", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_ = json.NewEncoder(w).Encode(out)
}

func (s *standIn) stored() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

// startStandIn is a stand-in and an SDK client on it (no SDK retries).
func startStandIn(t *testing.T, alter func(string) string) (*standIn, *sqs.Client) {
	t.Helper()
	s := &standIn{alter: alter}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	client := sqs.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: aws.AnonymousCredentials{}}, func(o *sqs.Options) {
		o.BaseEndpoint = aws.String(srv.URL)
		o.RetryMaxAttempts = 1
	})
	return s, client
}

// refusals is a tenure that records the refused messages and skips them.
type refusals struct {
	batchtest.Ignore
	mu   sync.Mutex
	seqs []int64
	errs []error
}

func (r *refusals) Refused(seq, _ int64, err error) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seqs, r.errs = append(r.seqs, seq), append(r.errs, err)
	return true
}

// poisoned is the finding's text frame: valid JSON to json.Valid, one byte
// of it not UTF-8.
const poisoned = "{\"seq\":7,\"x\":\"\xff\"}"

// sendAround submits seqs 6, 7 (payload7) and 8 of one session through a
// batcher on s, flushes, and returns the refusals.
func sendAround(t *testing.T, s *Sink, payload7 string) *refusals {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := batchtest.Start(t, s, batch.DefaultConfig())
	ten := &refusals{}
	for seq := int64(6); seq <= 8; seq++ {
		data := fmt.Sprintf(`{"seq":%d}`, seq)
		if seq == 7 {
			data = payload7
		}
		if err := b.Submit(ctx, sink.Message{ConnectionID: "c", Seq: seq, LeaseEpoch: 2, Data: []byte(data)}, ten, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatalf("flush: %v (stats %+v)", err, b.Stats())
	}
	return ten
}

// checkOncePerSeq checks that the queue holds each of seqs 6..8 once (in
// messages of one envelope or packs), as valid UTF-8 JSON, and that seq 7
// carries poisoned's exact bytes.
func checkOncePerSeq(t *testing.T, bodies []string) {
	t.Helper()
	seen := map[int64]int{}
	for _, body := range bodies {
		envs, err := consume.Lines([]byte(body))
		if !utf8.ValidString(body) || err != nil {
			t.Fatalf("body %q is not UTF-8 JSON envelopes: %v", body, err)
		}
		for _, env := range envs {
			seen[env.Seq]++
			if env.Seq == 7 && (env.Binary || env.Form != consume.FormB64 || env.B64Reason != sink.ReasonInvalidUTF8 || string(env.Data) != poisoned) {
				t.Fatalf("seq 7 not carried losslessly: %s", body)
			}
		}
	}
	if seen[6] != 1 || seen[7] != 1 || seen[8] != 1 || len(seen) != 3 {
		t.Fatalf("the queue holds per seq %v: want 6, 7 and 8 once each", seen)
	}
}

// Issue 35 finding 1 on a stand-in that reproduces the SDK's MD5 failure:
// the poisoned frame and its neighbours reach the queue once each, the
// poisoned one base64 (before: the SDK's serializer turned \xff into
// U+FFFD, the MD5 check failed the whole request, and the batcher sent all
// three again and again).
func TestPoisonedTextFrameOnStandIn(t *testing.T) {
	si, client := startStandIn(t, nil)
	ten := sendAround(t, New(client, "http://127.0.0.1/000000000000/out"), poisoned)
	checkOncePerSeq(t, si.stored())
	if len(ten.seqs) != 0 {
		t.Fatalf("refused %v: %v", ten.seqs, ten.errs)
	}
}

// The same on fauxqs, a standard queue.
func TestPoisonedTextFrameOnFauxqs(t *testing.T) {
	ctx, client := fauxqsClient(t)
	name := fmt.Sprintf("poison-%d", time.Now().UnixNano())
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name})
	if err != nil {
		t.Fatal(err)
	}
	// A character SQS refuses, in a JSON payload, goes base64 too.
	refusedChar := "{\"seq\":7,\"x\":\"\uFFFE\"}"
	for _, payload := range []string{poisoned, refusedChar} {
		if ten := sendAround(t, New(client, aws.ToString(q.QueueUrl)), payload); len(ten.seqs) != 0 {
			t.Fatalf("refused %v: %v", ten.seqs, ten.errs)
		}
		var bodies []string
		for {
			out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Messages) == 0 {
				break
			}
			for _, m := range out.Messages {
				bodies = append(bodies, aws.ToString(m.Body))
				if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: m.ReceiptHandle}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if payload == poisoned {
			checkOncePerSeq(t, bodies)
			continue
		}
		envs, err := consume.Lines([]byte(strings.Join(bodies, "\n")))
		if err != nil || len(envs) != 3 || envs[1].B64Reason != sink.ReasonRefusedChar || string(envs[1].Data) != refusedChar {
			t.Fatalf("bodies %q: %v", bodies, err)
		}
	}
}

// Issue 35 finding 1, the checksum: SQS applied every entry of a request,
// one of them altered. Only that entry is refused, finally (never sent
// again: the queue holds each message once), and the request is not
// retried (before: the SDK failed the whole request, the batcher retried
// all of it, and each retry added copies of all three).
func TestChecksumMismatchRefusesOnlyThatEntryOnce(t *testing.T) {
	alter := func(body string) string { return strings.Replace(body, "ALTER", "altered", 1) }
	var ce *ChecksumError
	si, client := startStandIn(t, alter)
	ten := sendAround(t, NewConfig(client, "http://127.0.0.1/000000000000/out", Config{PackBytes: 0}), `{"seq":7,"x":"ALTER"}`)
	if got := si.stored(); len(got) != 3 || si.requests != 1 {
		t.Fatalf("%d requests, the queue holds %d messages: %q", si.requests, len(got), got)
	}
	if len(ten.seqs) != 1 || ten.seqs[0] != 7 || !errors.As(ten.errs[0], &ce) || !sink.IsFinal(ten.errs[0]) {
		t.Fatalf("refused %v: %v", ten.seqs, ten.errs)
	}

	// Packed (the default), the entry is the pack: SQS applied all three
	// messages in it, one altered, and which one is not known to the
	// worker. None is sent again (the queue holds the one pack), and each
	// of the three is refused finally, once: its tenure decides.
	si, client = startStandIn(t, alter)
	ten = sendAround(t, New(client, "http://127.0.0.1/000000000000/out"), `{"seq":7,"x":"ALTER"}`)
	if got := si.stored(); len(got) != 1 || si.requests != 1 {
		t.Fatalf("packed: %d requests, the queue holds %d messages: %q", si.requests, len(got), got)
	}
	if len(ten.seqs) != 3 || ten.seqs[0] != 6 || ten.seqs[1] != 7 || ten.seqs[2] != 8 {
		t.Fatalf("packed: refused %v: %v", ten.seqs, ten.errs)
	}
	for _, err := range ten.errs {
		if !errors.As(err, &ce) || !sink.IsFinal(err) {
			t.Fatalf("packed: refused %v: %v", ten.seqs, ten.errs)
		}
	}

	// The unbatched path: a final refusal at once, not sent again.
	s := New(client, "http://127.0.0.1/000000000000/out")
	err := s.Handle(context.Background(), sink.Message{ConnectionID: "c", Seq: 9, Data: []byte(`"ALTER"`)})
	if !errors.As(err, &ce) || !sink.IsFinal(err) || !sink.IsPermanent(err) {
		t.Fatalf("Handle: %v", err)
	}
	if err := s.Handle(context.Background(), sink.Message{ConnectionID: "c", Seq: 10, Data: []byte(poisoned)}); err != nil {
		t.Fatalf("Handle of the poisoned frame: %v", err)
	}
}
