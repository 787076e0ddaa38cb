package notify

import (
	"errors"
	"testing"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	n := Notification{Type: "start", ConnectionID: "meeting-1:abc", Generation: 3, SentAtMs: 1700}
	body, err := Encode(n)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(body)
	if err != nil || got != n {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, body := range []string{
		``, `not json`, `{"type":"restart","connection_id":"a"}`,
		`{"type":"start","connection_id":""}`, `{"type":"stop","connection_id":"has space"}`,
	} {
		if _, err := Decode(body); !errors.Is(err, ErrMalformed) {
			t.Errorf("Decode(%q) = %v, want ErrMalformed", body, err)
		}
	}
}
