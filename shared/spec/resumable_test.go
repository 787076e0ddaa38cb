package spec

import "testing"

// Resumable is true exactly when a new connection can ask the source to
// resume from a checkpoint: a resume query parameter, or an open message
// whose text carries a seq placeholder, under seq_mode field.
func TestResumable(t *testing.T) {
	for _, c := range []struct {
		body string
		want bool
	}{
		{`{"ws_url":"wss://x/","resume":{"query_param":"from"}}`, true},
		{`{"ws_url":"wss://x/","resume_query_param":"from","seq_field":"u"}`, true},
		{`{"ws_url":"wss://x/","open_messages":[{"text":"{\"op\":\"sub\",\"from\":\"{{resume_from}}\"}"}]}`, true},
		{`{"ws_url":"wss://x/","open_messages":[{"text":"{\"op\":\"auth\"}"},{"text":"{\"op\":\"sub\",\"after\":\"{{last_seq}}\"}"}]}`, true},
		{`{"ws_url":"wss://x/"}`, false},
		{`{"ws_url":"wss://x/","resume":{"value":"last"}}`, false},
		{`{"ws_url":"wss://x/","open_messages":[{"text":"{\"op\":\"sub\",\"id\":\"{{connection_id}}\"}"}]}`, false},
		{`{"ws_url":"wss://x/","open_messages":[{"binary_b64":"e3tyZXN1bWVfZnJvbX19"}]}`, false}, // "{{resume_from}}", not templated
		{`{"ws_url":"wss://x/","seq_mode":"none"}`, false},
		{`{"ws_url":"wss://x/","seq_mode":"none","checkpoint_every":"30s"}`, false},
	} {
		s, fe := parse(t, c.body)
		if fe != nil {
			t.Fatalf("%s: %v", c.body, fe)
		}
		if got := s.Resumable(); got != c.want {
			t.Errorf("%s: Resumable() = %v, want %v", c.body, got, c.want)
		}
	}
}
