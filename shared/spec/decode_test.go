package spec

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// Decode applies the run rules, never the admission limits: a spec stored
// under an older, looser rule (a limit raised or lowered since, a rule
// between fields added since, an alias an older ingest kept) decodes, made
// canonical, while Check refuses it as a start.
func TestDecodeRunsWhatAnOlderRuleStored(t *testing.T) {
	many := map[string]string{}
	for i := range MaxHeaders + 1 {
		many["X-H"+strings.Repeat("a", i)] = "v"
	}
	manyJSON, _ := json.Marshal(many)
	for _, tc := range []struct {
		name, stored string
		admitted     bool // Check accepts it as a start body too
		check        func(Spec) bool
	}{
		{"checkpoint_every below the minimum", `{"ws_url":"wss://x/","checkpoint_every":"500ms"}`, false,
			func(s Spec) bool { return s.CheckpointInterval().Milliseconds() == 500 }},
		{"follow_redirects above the maximum", `{"ws_url":"wss://x/","follow_redirects":9}`, false,
			func(s Spec) bool { return s.FollowRedirects == 9 }},
		{"more headers than the maximum", `{"ws_url":"wss://x/","headers":` + string(manyJSON) + `}`, false,
			func(s Spec) bool { return len(s.Headers) == MaxHeaders+1 }},
		{"idle_timeout below the minimum", `{"ws_url":"wss://x/","idle_timeout":"200ms"}`, false,
			func(s Spec) bool { return s.IdleTimeout == "200ms" }},
		{"resume under seq_mode none", `{"ws_url":"wss://x/","seq_mode":"none","resume":{"value":"last"}}`, false,
			func(s Spec) bool { return s.ResumesLast() }},
		{"a seq_field alias kept", `{"ws_url":"wss://x/","seq_field":"data.u","resume_query_param":"from","seq_mode":"field"}`, true,
			func(s Spec) bool {
				return s.Seq() == "data.u" && s.SeqField == "" && s.ResumeParam() == "from" && s.ResumeQueryParam == "" && s.SeqMode == ""
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, fe := parse(t, tc.stored); (fe == nil) != tc.admitted {
				t.Fatalf("Check as a start: %v, want admitted %v", fe, tc.admitted)
			}
			s, err := Decode(tc.stored)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !tc.check(s) {
				t.Fatalf("decoded %+v", s)
			}
			enc, err := s.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if again, err := Decode(enc); err != nil {
				t.Fatalf("canonical form %s: %v", enc, err)
			} else if re, _ := again.Encode(); re != enc {
				t.Fatalf("canonical form %s decodes and encodes to %s", enc, re)
			}
		})
	}
}

// Decode refuses what a worker cannot run at all, naming the field and
// quoting no value.
func TestDecodeRefusesWhatCannotRun(t *testing.T) {
	for _, tc := range []struct{ stored, field string }{
		{``, "empty"},
		{`not json`, "not valid JSON"},
		{`[1]`, "not valid JSON"},
		{`{"ws_url":"wss://x/","ws_url":"wss://y/"}`, "not valid JSON"},
		{`{"ws_url":5}`, "not valid JSON"},
		{`{"seq_mode":"none"}`, "(ws_url)"},
		{`{"ws_url":"wss://x/","seq_mode":"sometimes"}`, "(seq_mode)"},
		{`{"ws_url":"wss://x/","on_sink_refusal":"retry"}`, "(on_sink_refusal)"},
		{`{"ws_url":"wss://x/","resume":{"value":"first"}}`, "(resume)"},
		{`{"ws_url":"wss://x/","seq_field":"a","seq_path":"b"}`, "(seq_path)"},
		{`{"ws_url":"wss://x/","seq_path":"a..b"}`, "(seq_path)"},
		{`{"ws_url":"wss://x/","headers":{"Host":"s3cret-host"}}`, "(headers)"},
		{`{"ws_url":"wss://x/","headers":{"X-K":"s3cret\u0001"}}`, "(headers)"},
		{`{"ws_url":"wss://x/","subprotocols":["s3cret proto"]}`, "(subprotocols)"},
		{`{"ws_url":"wss://x/","follow_redirects":-1}`, "(follow_redirects)"},
		{`{"ws_url":"wss://x/","connect_timeout_ms":-5}`, "(connect_timeout_ms)"},
		{`{"ws_url":"wss://x/","checkpoint_every":"s3cret"}`, "(checkpoint_every)"},
		{`{"ws_url":"wss://x/","idle_timeout":"0s"}`, "(idle_timeout)"},
		{`{"ws_url":"wss://x/","open_messages":[{}]}`, "(open_messages)"},
		{`{"ws_url":"wss://x/","open_messages":[{"text":"{{s3cret-token}}"}]}`, "(open_messages)"},
		{`{"ws_url":"wss://x/","open_messages":[{"binary_b64":"s3cret!"}]}`, "(open_messages)"},
		{`{"ws_url":"wss://x/","open_messages":[{"text":"hi","wait_for":{"path":"a..b","equals":"s3cret"}}]}`, "(open_messages)"},
		{`{"ws_url":"wss://x/","app_ping":{"message":"ping","every":"0s"}}`, "(app_ping)"},
		{`{"ws_url":"wss://x/","keepalive_reply":{"match":{"path":"","equals":1},"reply":"r"}}`, "(keepalive_reply)"},
		{`{"ws_url":"wss://x/","reconnect_on":{"match":{"path":"e"}}}`, "(reconnect_on)"},
		{`{"ws_url":"wss://x/","standby":{"enabled":true,"window":"-1s"}}`, "(standby)"},
	} {
		_, err := Decode(tc.stored)
		if err == nil {
			t.Errorf("Decode(%s) accepted", tc.stored)
			continue
		}
		if !strings.Contains(err.Error(), tc.field) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Decode(%s): %v, want it to name %s and quote no value", tc.stored, err, tc.field)
		}
	}
}

// A stored field this build does not know, at any depth, is refused
// (ErrUnknownField, the rollout rule: workers first), naming its path; the
// spec is still returned as decoded, for a view.
func TestDecodeRefusesAnUnknownField(t *testing.T) {
	// The key is spectest.NewerField (spectest imports this package):
	// one no field will ever be named.
	for stored, path := range map[string]string{
		`{"ws_url":"wss://x/","from_a_newer_ingest":5000}`:                                         `"from_a_newer_ingest"`,
		`{"ws_url":"wss://x/","standby":{"enabled":true,"from_a_newer_ingest":1}}`:                 `"standby.from_a_newer_ingest"`,
		`{"ws_url":"wss://x/","app_ping":{"message":"p","every":"5s","from_a_newer_ingest":"1s"}}`: `"app_ping.from_a_newer_ingest"`,
	} {
		s, err := Decode(stored)
		if !errors.Is(err, ErrUnknownField) || !strings.Contains(err.Error(), path) {
			t.Errorf("Decode(%s): %v, want ErrUnknownField naming %s", stored, err, path)
		}
		if s.WSURL != "wss://x/" {
			t.Errorf("Decode(%s) returned %+v, want the spec as decoded", stored, s)
		}
	}
}
