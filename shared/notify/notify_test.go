package notify

import (
	"errors"
	"testing"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, n := range []Notification{
		{Type: "start", ConnectionID: "meeting-1:abc", Generation: 3, SentAtMs: 1700},
		{Type: "start", ConnectionID: "meeting-1:abc", SentAtMs: 1700, PrevOwner: "w-7", PrevEpoch: 4},
	} {
		body, err := Encode(n)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(body)
		if err != nil || got != n {
			t.Fatalf("round trip: %+v, %v", got, err)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, body := range []string{
		``, `not json`, `{"type":"restart","connection_id":"a"}`,
		`{"type":"start","connection_id":""}`, `{"type":"stop","connection_id":"has space"}`,
		`{"type":"start","connection_id":"a","prev_owner":"w-1"}`, `{"type":"start","connection_id":"a","prev_epoch":2}`,
		`{"type":"start","connection_id":"a","prev_owner":"w-1","prev_epoch":-1}`, `{"type":"stop","connection_id":"a","prev_owner":"w-1","prev_epoch":2}`,
	} {
		if _, err := Decode(body); !errors.Is(err, ErrMalformed) {
			t.Errorf("Decode(%q) = %v, want ErrMalformed", body, err)
		}
	}
}
