package sinkfault

import (
	"bytes"
	"testing"
)

// Payload decodes the message from each form an envelope may carry it
// in: data as raw JSON (byte for byte, invalid UTF-8 included), data as a
// JSON string, data_b64 (whatever "frame" says), and neither.
func TestEnvelopePayloadForms(t *testing.T) {
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
		env, err := ParseEnvelope([]byte(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		got, form, err := env.Payload()
		if err != nil || form != tc.form || !bytes.Equal(got, tc.want) {
			t.Errorf("%s: payload %q form %q err %v; want %q %q", tc.body, got, form, err, tc.want, tc.form)
		}
		if env.Key() != (Key{Session: "s", Seq: 7, Epoch: 1, Worker: "w"}) {
			t.Errorf("%s: key %+v", tc.body, env.Key())
		}
	}
	env, err := ParseEnvelope([]byte(head + `"data_b64":"!!"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := env.Payload(); err == nil {
		t.Error("bad base64: no error")
	}
}
