package consume

import (
	"errors"
	"strings"
	"testing"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// messages are one session's messages in every form the envelope has.
var messages = []sink.Message{
	{ConnectionID: "c", Seq: 1, LeaseEpoch: 3, WorkerID: "w", ReceivedAtMs: 10, Data: []byte(`{"a":[1,2]}`)},
	{ConnectionID: "c", Seq: 1, Sub: 1, LeaseEpoch: 3, WorkerID: "w", ReceivedAtMs: 11, Data: []byte("plain text, \"quoted\"\n")},
	{ConnectionID: "c", Seq: 2, LeaseEpoch: 3, WorkerID: "w", ReceivedAtMs: 12, Binary: true, Data: []byte{0, '\n', 0xff}},
	{ConnectionID: "c", Seq: 3, LeaseEpoch: 3, WorkerID: "w", ReceivedAtMs: 13, Data: []byte("\xff not utf-8")},
	{ConnectionID: "c", Seq: 4, LeaseEpoch: 3, WorkerID: "w", ReceivedAtMs: 14, Data: []byte("\uFFFE")},
	{ConnectionID: "c", Seq: 5, LeaseEpoch: 3, WorkerID: "w", ReceivedAtMs: 15, Data: []byte(`null`)},
	{ConnectionID: "c", Seq: 6, LeaseEpoch: 3, WorkerID: "w", ReceivedAtMs: 16},
}

var forms = []string{FormJSON, FormString, FormB64, FormB64, FormB64, FormJSON, FormString}

// pack joins envelopes as the sqs sink does.
func pack(msgs []sink.Message) string {
	var lines []string
	for _, m := range msgs {
		lines = append(lines, string(sink.AppendEnvelope(nil, m, sink.SQSChars)))
	}
	return strings.Join(lines, "\n")
}

func check(t *testing.T, got []Envelope, want []sink.Message) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d envelopes, want %d", len(got), len(want))
	}
	for i, m := range want {
		e := got[i]
		if e.ConnectionID != m.ConnectionID || e.Seq != m.Seq || e.Sub != m.Sub || e.LeaseEpoch != m.LeaseEpoch || e.WorkerID != m.WorkerID ||
			e.ReceivedAtMs != m.ReceivedAtMs || e.Binary != m.Binary || string(e.Data) != string(m.Data) {
			t.Fatalf("#%d: %+v, want %+v", i, e, m)
		}
	}
}

// A pack and a plain envelope (a worker from before packing) give back the
// messages' exact bytes, whichever form carried them.
func TestFromSQS(t *testing.T) {
	envs, err := FromSQS(pack(messages), PackV1)
	if err != nil {
		t.Fatal(err)
	}
	check(t, envs, messages)
	for i, e := range envs {
		if e.Form != forms[i] {
			t.Errorf("#%d: form %s, want %s", i, e.Form, forms[i])
		}
	}
	if envs[3].B64Reason != sink.ReasonInvalidUTF8 || envs[4].B64Reason != sink.ReasonRefusedChar {
		t.Fatalf("b64 reasons %q %q", envs[3].B64Reason, envs[4].B64Reason)
	}
	plain, err := FromSQS(pack(messages[:1]), "")
	if err != nil {
		t.Fatal(err)
	}
	check(t, plain, messages[:1])
}

// A version 2 pack (a standard queue's pack of several sessions and
// tenures) gives back every envelope in the order written, each naming its
// own session and tenure.
func TestFromSQSVersion2(t *testing.T) {
	var mixed []sink.Message
	for i, m := range messages {
		other := m
		other.ConnectionID, other.LeaseEpoch = "other", int64(i%2+1)
		mixed = append(mixed, m, other)
	}
	envs, err := FromSQS(pack(mixed), PackV2)
	if err != nil {
		t.Fatal(err)
	}
	check(t, envs, mixed)
}

func TestFromSQSRefuses(t *testing.T) {
	if _, err := FromSQS(pack(messages), "application/vnd.wsfleet.pack+jsonl; version=3"); !errors.Is(err, ErrFormat) {
		t.Fatalf("a later version: %v", err)
	}
	head := `{"connection_id":"c","seq":1,"lease_epoch":1,"worker_id":"w","received_at_ms":1,`
	for name, body := range map[string]string{
		"empty":          "",
		"not JSON":       "hello",
		"no seq":         `{"connection_id":"c","lease_epoch":1,"worker_id":"w","data":1}`,
		"no worker":      `{"connection_id":"c","seq":1,"lease_epoch":1,"data":1}`,
		"bad base64":     head + `"frame":"binary","data_b64":"!!"}`,
		"a bad 2nd line": pack(messages[:1]) + "\n{",
		"an empty line":  pack(messages[:1]) + "\n\n" + pack(messages[1:2]),
	} {
		for _, v := range []string{PackV1, PackV2} {
			if _, err := FromSQS(body, v); err == nil {
				t.Errorf("%s (%s): parsed", name, v)
			}
		}
	}
}

// Parse decodes the message from each form an envelope may carry it in:
// data as raw JSON (byte for byte, invalid UTF-8 included), data as a JSON
// string, data_b64 (whatever "frame" says), and neither.
func TestParseForms(t *testing.T) {
	const head = `{"connection_id":"s","seq":7,"lease_epoch":1,"worker_id":"w","received_at_ms":1,`
	for _, tc := range []struct {
		body, form string
		want       []byte
	}{
		{head + `"data":{"seq":7,"x":"a` + "\xff" + `b"}}`, FormJSON, []byte(`{"seq":7,"x":"a` + "\xff" + `b"}`)},
		{head + `"data":"{\"seq\":7,\"x\":\"a\u0001b\"}"}`, FormString, []byte("{\"seq\":7,\"x\":\"a\x01b\"}")},
		{head + `"frame":"binary","data_b64":"AAEC/w=="}`, FormB64, []byte{0, 1, 2, 0xff}},
		{head + `"frame":"text","data_b64":"eyJzZXEiOjd9"}`, FormB64, []byte(`{"seq":7}`)},
		{head + `"data_b64":""}`, FormB64, []byte{}},
		{head[:len(head)-1] + `}`, FormNone, nil},
	} {
		e, err := Parse([]byte(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if e.Form != tc.form || string(e.Data) != string(tc.want) || (tc.want != nil) != (e.Data != nil) {
			t.Errorf("%s: data %q form %q; want %q %q", tc.body, e.Data, e.Form, tc.want, tc.form)
		}
		if e.ConnectionID != "s" || e.Seq != 7 || e.LeaseEpoch != 1 || e.WorkerID != "w" || e.ReceivedAtMs != 1 {
			t.Errorf("%s: %+v", tc.body, e)
		}
	}
}
