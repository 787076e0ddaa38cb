package spec

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wsfleet/wsfleet/shared/source"
)

// openBody is a start body with n text open messages of text each.
func openBody(t *testing.T, n int, text string) string {
	t.Helper()
	var msgs []map[string]string
	for range n {
		msgs = append(msgs, map[string]string{"text": text})
	}
	b, err := json.Marshal(map[string]any{"ws_url": "wss://feed.invalid/x", "open_messages": msgs})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The size limits hold for the stored form: open messages within the
// decoded limits (128 KiB in all) whose JSON escaping makes them six times
// larger as stored are refused, naming open_messages; the largest binary
// open messages (base64, a third larger) and HTML characters (not escaped)
// are stored, within MaxStoredBytes.
func TestLimitsApplyToTheStoredForm(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
	}{
		{"control characters", strings.Repeat("\x01", source.MaxOpenMessageBytes)},
		{"line separators", strings.Repeat("\u2028", source.MaxOpenMessageBytes/3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := openBody(t, 2, tc.text)
			_, fe := parse(t, body)
			if fe == nil {
				t.Fatalf("a %d-byte body decoding to 2 × %d bytes was accepted", len(body), len(tc.text))
			}
			if fe.Field != "open_messages" || fe.Code() != "invalid_open_messages" || !strings.Contains(fe.Message, "as stored") {
				t.Fatalf("refusal %+v (code %s)", fe, fe.Code())
			}
		})
	}

	bin := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\x00", source.MaxOpenMessageBytes)))
	b, _ := json.Marshal(map[string]any{"ws_url": "wss://feed.invalid/x",
		"open_messages": []map[string]string{{"binary_b64": bin}, {"binary_b64": bin}}})
	s, fe := parse(t, string(b))
	if fe != nil {
		t.Fatalf("the largest binary open messages: %v", fe)
	}
	enc, err := s.Encode()
	if err != nil || len(enc) > MaxStoredBytes {
		t.Fatalf("stored %d bytes (%v), at most %d", len(enc), err, MaxStoredBytes)
	}
	html := encoded(t, openBody(t, 2, strings.Repeat("<&>", source.MaxOpenMessageBytes/3)))
	if len(html) > MaxStoredBytes {
		t.Fatalf("HTML characters stored in %d bytes", len(html))
	}
}
