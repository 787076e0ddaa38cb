package api

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/functions/ingest/internal/config"
	"github.com/wsfleet/wsfleet/shared/source"
	"github.com/wsfleet/wsfleet/shared/spec"
)

var publicPolicy = URLPolicy{PrivateIPs: config.PrivateIPsNone}

// decoded is an accepted start: the connection id and the checked spec,
// with the seq path, the resume parameter and the checkpoint interval as
// the worker reads them.
type decoded struct {
	ConnectionID string
	spec.Spec
	SeqField          string // the seq path
	ResumeQueryParam  string
	CheckpointEveryMs int64
}

func mustDecode(t *testing.T, body string, p URLPolicy) decoded {
	t.Helper()
	d, e := DecodeStart([]byte(body), p)
	if e != nil {
		t.Fatalf("DecodeStart(%s): unexpected %v", body, e)
	}
	return decoded{ConnectionID: d.ConnectionID, Spec: d.Spec, SeqField: d.Spec.Seq(), ResumeQueryParam: d.Spec.ResumeParam(),
		CheckpointEveryMs: d.Spec.CheckpointInterval().Milliseconds()}
}

func wantReject(t *testing.T, body string, p URLPolicy, code, msgPart string) {
	t.Helper()
	_, e := DecodeStart([]byte(body), p)
	if e == nil {
		t.Fatalf("DecodeStart(%.200s): accepted, want %s", body, code)
	}
	if e.status != http.StatusBadRequest || e.code != code {
		t.Fatalf("DecodeStart(%.200s): got %d %s (%s), want 400 %s", body, e.status, e.code, e.message, code)
	}
	if msgPart != "" && !strings.Contains(e.message, msgPart) {
		t.Fatalf("DecodeStart(%.200s): message %q lacks %q", body, e.message, msgPart)
	}
}

func TestDecodeStartAcceptsAndDefaults(t *testing.T) {
	d := mustDecode(t, `{"ws_url":"wss://stream.example.com/feed?token=abc"}`, publicPolicy)
	if !strings.HasPrefix(d.WSURL, "wss://stream.example.com") || d.SeqField != "seq" || d.ResumeQueryParam != "" || d.Headers != nil {
		t.Fatalf("defaults: %+v", d)
	}
	if CheckConnectionID(d.ConnectionID) != nil || len(d.ConnectionID) != 36 {
		t.Fatalf("generated connection_id %q", d.ConnectionID)
	}
	d2 := mustDecode(t, `{"ws_url":"wss://stream.example.com/feed"}`, publicPolicy)
	if d2.ConnectionID == d.ConnectionID {
		t.Fatal("generated connection ids repeat")
	}
	full := mustDecode(t, `{"connection_id":"meet:1.a_b-C","ws_url":"ws://h.example.com:8080/x",
		"headers":{"Authorization":"Bearer s3cret","X-Trace":""},"seq_field":"sequence.no","resume_query_param":"from_seq"}`, publicPolicy)
	if full.ConnectionID != "meet:1.a_b-C" || full.SeqField != "sequence.no" || full.ResumeQueryParam != "from_seq" ||
		full.Headers["Authorization"] != "Bearer s3cret" || len(full.Headers) != 2 {
		t.Fatalf("full: %+v", full)
	}
	// null is "absent".
	n := mustDecode(t, `{"connection_id":null,"ws_url":"wss://a.example.com","headers":null,"seq_field":null,"resume_query_param":null}`, publicPolicy)
	if n.ConnectionID == "" || n.SeqField != "seq" || n.Headers != nil {
		t.Fatalf("nulls: %+v", n)
	}
	// empty headers object stores nothing
	if e := mustDecode(t, `{"ws_url":"wss://a.example.com","headers":{}}`, publicPolicy); e.Headers != nil {
		t.Fatalf("empty headers kept: %+v", e.Headers)
	}
}

func TestDecodeStartJSONRules(t *testing.T) {
	cases := []struct{ name, body, code, msg string }{
		{"empty body", ``, CodeInvalidJSON, "required"},
		{"blank body", "  \n", CodeInvalidJSON, "required"},
		{"not json", `ws_url=wss://x`, CodeInvalidJSON, "JSON object"},
		{"array", `[{"ws_url":"wss://a.example.com"}]`, CodeInvalidJSON, "JSON object"},
		{"null", `null`, CodeInvalidJSON, "JSON object"},
		{"string", `"wss://a.example.com"`, CodeInvalidJSON, "JSON object"},
		{"truncated", `{"ws_url":"wss://a.example.com"`, CodeInvalidJSON, "not valid JSON"},
		{"trailing object", `{"ws_url":"wss://a.example.com"}{}`, CodeInvalidJSON, "exactly one"},
		{"trailing garbage", `{"ws_url":"wss://a.example.com"} x`, CodeInvalidJSON, ""},
		{"invalid utf8", "{\"ws_url\":\"wss://a.example.com\",\"seq_field\":\"\xff\"}", CodeInvalidJSON, "UTF-8"},
		{"duplicate key", `{"ws_url":"wss://a.example.com","ws_url":"wss://b.example.com"}`, CodeInvalidJSON, "duplicate key"},
		{"duplicate header key", `{"ws_url":"wss://a.example.com","headers":{"A":"1","A":"2"}}`, CodeInvalidJSON, "duplicate key"},
		{"too deep", `{"ws_url":"wss://a.example.com","headers":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`, CodeInvalidJSON, "deeply"},
		{"unknown field", `{"ws_url":"wss://a.example.com","wsurl":"x"}`, CodeUnknownField, `"wsurl"`},
		{"unknown field case", `{"WS_URL":"wss://a.example.com"}`, CodeUnknownField, ""},
		{"ws_url number", `{"ws_url":42}`, CodeInvalidType, `"ws_url"`},
		{"headers array", `{"ws_url":"wss://a.example.com","headers":["a"]}`, CodeInvalidType, `"headers"`},
		{"header value number", `{"ws_url":"wss://a.example.com","headers":{"X-A":1}}`, CodeInvalidType, `"headers"`},
		{"connection_id number", `{"connection_id":7,"ws_url":"wss://a.example.com"}`, CodeInvalidType, `"connection_id"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantReject(t, c.body, publicPolicy, c.code, c.msg) })
	}
}

func TestDecodeStartConnectionID(t *testing.T) {
	for _, id := range []string{"", " ", "a b", "a/b", "a%2Fb", "é", strings.Repeat("a", 129), "a\nb", "a?b", "a#b", ".", ".."} {
		body, _ := json.Marshal(map[string]string{"connection_id": id, "ws_url": "wss://a.example.com"})
		wantReject(t, string(body), publicPolicy, source.FieldCode("connection_id"), "connection_id must match")
	}
	for _, id := range []string{"a", strings.Repeat("Z", 128), "x.y:z_w-9", "...", ".a", "a.."} {
		body, _ := json.Marshal(map[string]string{"connection_id": id, "ws_url": "wss://a.example.com"})
		if d := mustDecode(t, string(body), publicPolicy); d.ConnectionID != id {
			t.Fatalf("id %q became %q", id, d.ConnectionID)
		}
	}
}

func TestDecodeStartSubprotocols(t *testing.T) {
	d := mustDecode(t, `{"ws_url":"wss://a.example.com","subprotocols":["v2.json","v1.json"]}`, publicPolicy)
	if !slices.Equal(d.Subprotocols, []string{"v2.json", "v1.json"}) {
		t.Fatalf("subprotocols %v", d.Subprotocols)
	}
	if d := mustDecode(t, `{"ws_url":"wss://a.example.com","subprotocols":[]}`, publicPolicy); d.Subprotocols != nil {
		t.Fatalf("empty list kept: %v", d.Subprotocols)
	}
	nine := `["a","b","c","d","e","f","g","h","i"]`
	for body, msg := range map[string]string{
		`{"ws_url":"wss://a.example.com","subprotocols":["v1 json"]}`:                         "subprotocols[0] must match",
		`{"ws_url":"wss://a.example.com","subprotocols":["a",""]}`:                            "subprotocols[1] must match",
		`{"ws_url":"wss://a.example.com","subprotocols":["a","a"]}`:                           "given twice",
		`{"ws_url":"wss://a.example.com","subprotocols":` + nine + `}`:                        "at most 8",
		`{"ws_url":"wss://a.example.com","subprotocols":["` + strings.Repeat("x", 65) + `"]}`: "must match",
	} {
		wantReject(t, body, publicPolicy, source.FieldCode("subprotocols"), msg)
	}
	wantReject(t, `{"ws_url":"wss://a.example.com","subprotocols":"v1"}`, publicPolicy, CodeInvalidType, "subprotocols")
}

func TestDecodeStartFollowRedirects(t *testing.T) {
	if d := mustDecode(t, `{"ws_url":"wss://a.example.com"}`, publicPolicy); d.FollowRedirects != 0 {
		t.Fatalf("default follow_redirects %d, want 0 (refused)", d.FollowRedirects)
	}
	if d := mustDecode(t, `{"ws_url":"wss://a.example.com","follow_redirects":5}`, publicPolicy); d.FollowRedirects != 5 {
		t.Fatalf("follow_redirects %d", d.FollowRedirects)
	}
	for _, v := range []string{"-1", "6", "100"} {
		wantReject(t, `{"ws_url":"wss://a.example.com","follow_redirects":`+v+`}`, publicPolicy, source.FieldCode("follow_redirects"), "0..5")
	}
	wantReject(t, `{"ws_url":"wss://a.example.com","follow_redirects":"2"}`, publicPolicy, CodeInvalidType, "follow_redirects")
	wantReject(t, `{"ws_url":"wss://a.example.com","follow_redirects":1.5}`, publicPolicy, CodeInvalidType, "follow_redirects")
}

func TestDecodeStartCheckpointEvery(t *testing.T) {
	if d := mustDecode(t, `{"ws_url":"wss://a.example.com"}`, publicPolicy); d.CheckpointEveryMs != 0 {
		t.Fatalf("default checkpoint_every %d ms, want 0 (the worker's default)", d.CheckpointEveryMs)
	}
	for v, ms := range map[string]int64{"1s": 1_000, "30s": 30_000, "1.5s": 1_500, "2m": 120_000, "10m": 600_000, "9m59s": 599_000} {
		if d := mustDecode(t, `{"ws_url":"wss://a.example.com","checkpoint_every":"`+v+`"}`, publicPolicy); d.CheckpointEveryMs != ms {
			t.Fatalf("checkpoint_every %s: %d ms, want %d", v, d.CheckpointEveryMs, ms)
		}
	}
	for _, v := range []string{"", "0s", "999ms", "10m1s", "1h", "-5s", "30", "soon", strings.Repeat("1", 40) + "s"} {
		wantReject(t, `{"ws_url":"wss://a.example.com","checkpoint_every":"`+v+`"}`, publicPolicy, source.FieldCode("checkpoint_every"), "checkpoint_every must be a duration from 1s to 10m")
	}
	wantReject(t, `{"ws_url":"wss://a.example.com","checkpoint_every":30}`, publicPolicy, CodeInvalidType, "checkpoint_every")
}

func startWith(url string) string {
	b, _ := json.Marshal(map[string]string{"ws_url": url})
	return string(b)
}

func TestDecodeStartWSURLSyntax(t *testing.T) {
	long := "wss://a.example.com/" + strings.Repeat("p", MaxWSURLLen-len("wss://a.example.com/"))
	mustDecode(t, startWith(long), publicPolicy) // exactly at the limit
	cases := []struct{ name, url, msg string }{
		{"missing", "", "required"},
		{"too long", long + "p", "longer than 2048"},
		{"http scheme", "http://a.example.com/", "ws or wss"},
		{"https scheme", "https://a.example.com/", "ws or wss"},
		{"no scheme", "a.example.com/feed", "ws or wss"},
		{"relative", "/feed", "ws or wss"},
		{"opaque", "ws:a.example.com", "absolute"},
		{"no host", "wss:///feed", "absolute"},
		{"userinfo", "wss://user:pass@a.example.com/", "user info"},
		{"fragment", "wss://a.example.com/#frag", "fragment"},
		{"space", "wss://a.example.com/a b", "printable ASCII"},
		{"control", "wss://a.example.com/\x01", "printable ASCII"},
		{"non-ascii", "wss://bücher.example/", "printable ASCII"},
		{"bad port", "wss://a.example.com:99999/", "port"},
		{"port zero", "wss://a.example.com:0/", "port"},
		{"empty port", "wss://a.example.com:/", "port"},
		{"bad label", "wss://-a.example.com/", "label"},
		{"empty label", "wss://a..example.com/", "label"},
		{"bad char", "wss://a!b.example.com/", "letters, digits"},
		{"decimal ip", "wss://2130706433/", "non-canonical IP"},
		{"hex ip", "wss://0x7f.1/", "non-canonical IP"},
		{"short ip", "wss://127.1/", "non-canonical IP"},
		{"ipv6 zone", "wss://[fe80::1%25eth0]/", "zones"},
		{"bad escape", "wss://a.example.com/%zz", "valid URL"},
		{"v4 in brackets", "wss://[1.2.3.4]/", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantReject(t, startWith(c.url), publicPolicy, source.FieldCode("ws_url"), c.msg) })
	}
}

func TestDecodeStartWSURLAddressPolicy(t *testing.T) {
	refusedByDefault := map[string]string{
		"wss://127.0.0.1/":                "loopback",
		"wss://127.9.9.9:9000/":           "loopback",
		"wss://[::1]/":                    "loopback",
		"wss://localhost:8080/":           "loopback",
		"wss://api.localhost/":            "loopback",
		"wss://10.1.2.3/":                 "private",
		"wss://172.16.0.1/":               "private",
		"wss://172.31.255.255/":           "private",
		"wss://192.168.1.1/":              "private",
		"wss://100.64.0.1/":               "private",
		"wss://[fd12::1]/":                "private",
		"wss://169.254.1.1/":              "link-local",
		"wss://[fe80::1]/":                "link-local",
		"wss://169.254.169.254/":          "cloud agent",
		"wss://169.254.170.2/":            "cloud agent",
		"wss://[fd00:ec2::254]/":          "cloud agent",
		"wss://100.100.100.200/":          "cloud agent",
		"wss://0.0.0.0/":                  "unspecified",
		"wss://[::]/":                     "unspecified",
		"wss://224.0.0.1/":                "multicast",
		"wss://[ff02::1]/":                "multicast",
		"wss://255.255.255.255/":          "broadcast",
		"wss://[::ffff:127.0.0.1]/":       "loopback",
		"wss://[::ffff:10.0.0.1]/":        "private",
		"wss://[::ffff:169.254.169.254]/": "cloud agent",
		"wss://[64:ff9b::a00:1]/":         "private",
		"wss://[2002:a00:1::]/":           "private",
		"wss://[::10.0.0.1]/":             "private",
	}
	for u, class := range refusedByDefault {
		wantReject(t, startWith(u), publicPolicy, CodeAddressNotAllowed, class)
	}
	public := []string{"wss://8.8.8.8/", "wss://[2606:4700::1111]/", "ws://93.184.216.34:80/x", "wss://stream.example.com/"}
	for _, u := range public {
		mustDecode(t, startWith(u), publicPolicy)
	}

	loop := URLPolicy{PrivateIPs: config.PrivateIPsLoopback}
	for _, u := range []string{"ws://127.0.0.1:9000/", "ws://[::1]:9000/", "ws://localhost:9000/", "ws://[::ffff:127.0.0.1]/"} {
		mustDecode(t, startWith(u), loop)
	}
	for _, u := range []string{"ws://10.0.0.1/", "ws://169.254.169.254/", "ws://192.168.0.1/", "ws://[fe80::1]/"} {
		wantReject(t, startWith(u), loop, CodeAddressNotAllowed, "")
	}

	all := URLPolicy{PrivateIPs: config.PrivateIPsAll}
	for _, u := range []string{"ws://10.0.0.1/", "ws://192.168.0.1/", "ws://127.0.0.1/", "ws://[fe80::1]/"} {
		mustDecode(t, startWith(u), all)
	}
	for _, u := range []string{"ws://169.254.169.254/latest/meta-data", "ws://[fd00:ec2::254]/", "ws://169.254.170.2/"} {
		wantReject(t, startWith(u), all, CodeAddressNotAllowed, "cloud agent")
	}
}

func TestDecodeStartAllowedHosts(t *testing.T) {
	p := URLPolicy{AllowedHosts: []string{"stream.example.com", "*.feeds.example.net", "8.8.4.4", "[2606:4700::1111]"}, PrivateIPs: config.PrivateIPsNone}
	for _, u := range []string{"wss://stream.example.com/x", "wss://STREAM.example.com./x", "wss://a.feeds.example.net/", "wss://a.b.feeds.example.net:443/", "wss://8.8.4.4/", "wss://[2606:4700::1111]/"} {
		mustDecode(t, startWith(u), p)
	}
	for _, u := range []string{"wss://example.com/", "wss://evil-stream.example.com/", "wss://feeds.example.net/", "wss://stream.example.com.evil.net/", "wss://afeeds.example.net/", "wss://8.8.4.5/", "wss://8.8.8.8/"} {
		wantReject(t, startWith(u), p, CodeHostNotAllowed, "allowed hosts")
	}
	// The address policy applies before the allowlist: an allowlisted private IP is still refused.
	wantReject(t, startWith("wss://10.0.0.1/"), URLPolicy{AllowedHosts: []string{"10.0.0.1"}, PrivateIPs: config.PrivateIPsNone}, CodeAddressNotAllowed, "private")
}

func TestDecodeStartHeaders(t *testing.T) {
	hdr := func(h map[string]string) string {
		b, _ := json.Marshal(map[string]any{"ws_url": "wss://a.example.com", "headers": h})
		return string(b)
	}
	many := map[string]string{}
	for i := 0; i <= spec.MaxHeaders; i++ {
		many["X-H"+strings.Repeat("a", i)] = "v"
	}
	cases := []struct {
		name string
		h    map[string]string
		msg  string
	}{
		{"too many", many, "at most 32"},
		{"empty name", map[string]string{"": "v"}, "1..128"},
		{"long name", map[string]string{strings.Repeat("a", 129): "v"}, "1..128"},
		{"space in name", map[string]string{"X A": "v"}, "HTTP token"},
		{"colon in name", map[string]string{"X:A": "v"}, "HTTP token"},
		{"non-ascii name", map[string]string{"X-Ä": "v"}, "HTTP token"},
		{"host", map[string]string{"Host": "evil"}, "handshake"},
		{"connection", map[string]string{"connection": "close"}, "handshake"},
		{"upgrade", map[string]string{"UPGRADE": "h2c"}, "handshake"},
		{"sec-websocket-key", map[string]string{"Sec-WebSocket-Key": "x"}, "handshake"},
		{"sec-websocket-version", map[string]string{"sec-websocket-version": "8"}, "handshake"},
		{"sec-websocket-protocol", map[string]string{"sec-websocket-protocol": "v1.stream"}, "subprotocols field"},
		{"content-length", map[string]string{"Content-Length": "1"}, "handshake"},
		{"transfer-encoding", map[string]string{"Transfer-Encoding": "chunked"}, "handshake"},
		{"case duplicate", map[string]string{"X-Token": "a", "x-token": "b"}, "twice"},
		{"CR in value", map[string]string{"X-A": "a\rb"}, "control"},
		{"LF in value", map[string]string{"X-A": "a\nInjected: 1"}, "control"},
		{"NUL in value", map[string]string{"X-A": "a\x00"}, "control"},
		{"DEL in value", map[string]string{"X-A": "a\x7f"}, "control"},
		{"non-ascii value", map[string]string{"X-A": "é"}, "non-ASCII"},
		{"long value", map[string]string{"X-A": strings.Repeat("v", spec.MaxHeaderValueLen+1)}, "longer than 4096"},
		{"leading space", map[string]string{"X-A": " v"}, "whitespace"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantReject(t, hdr(c.h), publicPolicy, source.FieldCode("headers"), c.msg)
			// A value never appears in a message.
			_, e := DecodeStart([]byte(hdr(c.h)), publicPolicy)
			for _, v := range c.h {
				if len(v) > 2 && strings.Contains(e.message, v) {
					t.Fatalf("message %q quotes a header value", e.message)
				}
			}
		})
	}
	ok := map[string]string{"Authorization": "Bearer x", "X-A": "a\tb", "Cookie": "k=v", "X-Empty": ""}
	if d := mustDecode(t, hdr(ok), publicPolicy); len(d.Headers) != len(ok) {
		t.Fatalf("headers: %v", d.Headers)
	}
	at := map[string]string{}
	for i := 0; i < spec.MaxHeaders; i++ {
		at["X-H"+strings.Repeat("a", i)] = strings.Repeat("v", 100)
	}
	mustDecode(t, hdr(at), publicPolicy)
}

func TestDecodeStartSeqFieldAndResumeParam(t *testing.T) {
	for _, v := range []string{"", "a b", "a/b", "é", strings.Repeat("a", 65), "a\"b"} {
		b, _ := json.Marshal(map[string]string{"ws_url": "wss://a.example.com", "seq_field": v})
		wantReject(t, string(b), publicPolicy, source.FieldCode("seq_field"), "seq_field must match")
		b, _ = json.Marshal(map[string]string{"ws_url": "wss://a.example.com", "resume_query_param": v})
		wantReject(t, string(b), publicPolicy, source.FieldCode("resume_query_param"), "resume_query_param must match")
	}
	for _, v := range []string{"a&b", "a=b", "a?b"} {
		b, _ := json.Marshal(map[string]string{"ws_url": "wss://a.example.com", "resume_query_param": v})
		wantReject(t, string(b), publicPolicy, source.FieldCode("resume_query_param"), "")
	}
	d := mustDecode(t, `{"ws_url":"wss://a.example.com","seq_field":"data.seq_no","resume_query_param":"from~seq"}`, publicPolicy)
	if d.SeqField != "data.seq_no" || d.ResumeQueryParam != "from~seq" {
		t.Fatalf("%+v", d)
	}
}

func TestDecodeStop(t *testing.T) {
	for _, ok := range []string{"", "  ", "{}", " { } "} {
		if e := DecodeStop([]byte(ok)); e != nil {
			t.Fatalf("DecodeStop(%q): %v", ok, e)
		}
	}
	for body, code := range map[string]string{`{"reason":"x"}`: CodeUnknownField, `[]`: CodeInvalidJSON, `{`: CodeInvalidJSON, `{}{}`: CodeInvalidJSON} {
		if e := DecodeStop([]byte(body)); e == nil || e.code != code {
			t.Fatalf("DecodeStop(%q) = %v, want %s", body, e, code)
		}
	}
}

func TestDecodeStartSourceProtocol(t *testing.T) {
	const u = `"ws_url":"wss://stream.example.com/ws"`
	d := mustDecode(t, `{`+u+`,"seq_path":"data.u","resume":{"query_param":"cursor","value":"last"},"on_missing_seq":"deliver","on_sink_refusal":"skip",
		"open_messages":[{"text":"{\"op\":\"auth\",\"sig\":\"s3cret\"}","wait_for":{"path":"event","equals":"login","timeout":"3s"}},
		{"text":"{\"op\":\"subscribe\",\"from\":\"{{resume_from}}\",\"id\":\"{{connection_id}}\"}"},{"binary_b64":"AAEC"}],
		"app_ping":{"message":"ping","every":"20s","pong":"pong"},"idle_timeout":"45s",
		"keepalive_reply":{"match":{"path":"msg_type","equals":"KEEP_ALIVE_REQ"},"reply":"{\"msg_type\":\"KEEP_ALIVE_RESP\"}"}}`, publicPolicy)
	if d.SeqField != "data.u" || d.ResumeQueryParam != "cursor" {
		t.Fatalf("seq path / resume: %+v", d)
	}
	c := d.Config
	if len(c.OpenMessages) != 3 || !d.ResumesLast() || c.OnMissingSeq != source.MissingDeliver ||
		c.AppPing.Every != "20s" || c.KeepaliveReply.Reply == "" || c.IdleTimeout != "45s" || c.OnSinkRefusal != source.RefusalSkip {
		t.Fatalf("source protocol: %+v", c)
	}
	// Defaults spelled out are dropped; seq_field is seq_path's alias.
	d = mustDecode(t, `{`+u+`,"seq_mode":"field","on_missing_seq":"drop","on_sink_refusal":"fail","resume":{"query_param":"from","value":"next"},"seq_field":"n","seq_path":"n"}`, publicPolicy)
	if !reflect.DeepEqual(d.Config, source.Config{}) || d.SeqField != "n" || d.ResumeQueryParam != "from" || d.Resume.Value != "" {
		t.Fatalf("defaults: %+v", d)
	}
	// Planned reconnects (Binance-style: a day's connection, a shutdown notice).
	d = mustDecode(t, `{`+u+`,"max_connection_age":"1380m","reconnect_on":{"match":{"path":"e","equals":"serverShutdown"}},"switch_timeout":"30s"}`, publicPolicy)
	if d.MaxConnectionAge != "23h0m0s" || d.ReconnectOn == nil || d.ReconnectOn.Match.Path != "e" || d.SwitchTimeout != "" {
		t.Fatalf("planned reconnects: %+v", d.Config)
	}
	d = mustDecode(t, `{`+u+`,"seq_mode":"none","idle_timeout":"10s"}`, publicPolicy)
	if d.SeqMode != source.SeqNone {
		t.Fatalf("none: %+v", d.Config)
	}

	for _, c := range []struct{ body, code, msg string }{
		{`"open_messages":[{"text":"{{token}}"}]`, source.FieldCode("open_messages"), "unknown placeholder"},
		{`"open_messages":[` + strings.Repeat(`{"text":"x"},`, 16) + `{"text":"x"}]`, source.FieldCode("open_messages"), "at most 16"},
		{`"open_messages":[{"binary_b64":"%%%"}]`, source.FieldCode("open_messages"), "base64"},
		{`"open_messages":[{"text":"a","binary_b64":"YQ=="}]`, source.FieldCode("open_messages"), "exactly one"},
		{`"open_messages":[{"text":"a","extra":1}]`, CodeUnknownField, "extra"},
		{`"open_messages":[{"text":5}]`, CodeInvalidType, "open_messages"},
		{`"open_messages":[{"text":"a","wait_for":{"path":"a..b","equals":1}}]`, source.FieldCode("open_messages"), "empty segment"},
		{`"seq_path":"data..u"`, source.FieldCode("seq_path"), "empty segment"},
		{`"seq_path":""`, source.FieldCode("seq_path"), "required"},
		{`"seq_path":"a","seq_field":"b"`, source.FieldCode("seq_path"), "differ"},
		{`"seq_field":"a..b"`, source.FieldCode("seq_field"), "empty segment"},
		{`"seq_mode":"none","seq_path":"a"`, source.FieldCode("seq_path"), "field"},
		{`"seq_mode":"none","resume_query_param":"from"`, source.FieldCode("resume"), "field"},
		{`"seq_mode":"none","on_missing_seq":"deliver"`, source.FieldCode("on_missing_seq"), "field"},
		{`"seq_mode":"none","open_messages":[{"text":"{{last_seq}}"}]`, source.FieldCode("open_messages"), "seq_mode"},
		{`"seq_mode":"sometimes"`, source.FieldCode("seq_mode"), "field"},
		{`"on_missing_seq":"keep"`, source.FieldCode("on_missing_seq"), "deliver"},
		{`"resume":{"query_param":"from","value":"first"}`, source.FieldCode("resume"), "next"},
		{`"resume":{"query_param":"a b"}`, source.FieldCode("resume"), "query_param"},
		{`"resume":{"query_param":"a"},"resume_query_param":"b"`, source.FieldCode("resume"), "differ"},
		{`"app_ping":{"message":"ping","every":"500ms"}`, source.FieldCode("app_ping"), "every"},
		{`"app_ping":{"message":"","every":"5s"}`, source.FieldCode("app_ping"), "message"},
		{`"keepalive_reply":{"match":{"path":"t","equals":{}},"reply":"r"}`, source.FieldCode("keepalive_reply"), "equals"},
		{`"keepalive_reply":{"match":{"path":"t","equals":"x"}}`, source.FieldCode("keepalive_reply"), "reply"},
		{`"idle_timeout":"never"`, source.FieldCode("idle_timeout"), "duration"},
		{`"idle_timeout":""`, source.FieldCode("idle_timeout"), "duration"},
		{`"on_sink_refusal":"ignore"`, source.FieldCode("on_sink_refusal"), "skip"},
		{`"on_sink_refusal":""`, source.FieldCode("on_sink_refusal"), "skip"},
		{`"on_sink_refusal":true`, CodeInvalidType, "on_sink_refusal"},
		{`"max_connection_age":"1 day"`, source.FieldCode("max_connection_age"), "duration from 1s"},
		{`"max_connection_age":""`, source.FieldCode("max_connection_age"), "omit it"},
		{`"reconnect_on":{"match":{"path":"e"}}`, source.FieldCode("reconnect_on"), "equals is required"},
		{`"reconnect_on":{"match":{"path":"e","equals":"x"},"deliver":1}`, CodeInvalidType, "reconnect_on"},
		{`"switch_timeout":"10s"`, source.FieldCode("switch_timeout"), "max_connection_age or reconnect_on"},
		{`"max_connection_age":"23h","switch_timeout":"1h"`, source.FieldCode("switch_timeout"), "duration"},
	} {
		wantReject(t, `{`+u+`,`+c.body+`}`, publicPolicy, c.code, c.msg)
	}
	big := strings.Repeat("x", source.MaxOpenMessageBytes+1)
	wantReject(t, `{`+u+`,"open_messages":[{"text":"`+big+`"}]}`, publicPolicy, source.FieldCode("open_messages"), "bytes")
}

// TestRefusalsSayWhatWasMeant: an unknown field names the nearest known
// one, invalid JSON says where it stops being JSON.
func TestRefusalsSayWhatWasMeant(t *testing.T) {
	for _, c := range []struct{ body, code, msg string }{
		{`{"wsurl":"wss://a.example.com/"}`, CodeUnknownField, `unknown field "wsurl" (did you mean "ws_url"?)`},
		{`{"connectionId":"c1","ws_url":"wss://a.example.com/"}`, CodeUnknownField, `(did you mean "connection_id"?)`},
		{`{"ws_url":"wss://a.example.com/","header":{}}`, CodeUnknownField, `(did you mean "headers"?)`},
		{`{"ws_url":"wss://a.example.com/","open_message":[]}`, CodeUnknownField, `(did you mean "open_messages"?)`},
		{`{"ws_url":"wss://a.example.com/","completely_else":1}`, CodeUnknownField, `unknown field "completely_else"`},
		{`{"ws_url":"wss://a.example.com/",}`, CodeInvalidJSON, "at byte 33"}, // the "}" at offset 33
		{`{"ws_url":"wss://a.example.com/"`, CodeInvalidJSON, "ends early"},
		{`{"ws_url" "x"}`, CodeInvalidJSON, "at byte 10"}, // the second string, where ":" belongs
	} {
		wantReject(t, c.body, publicPolicy, c.code, c.msg)
	}
	_, e := DecodeStart([]byte(`{"ws_url":"wss://a.example.com/","completely_else":1}`), publicPolicy)
	if strings.Contains(e.message, "did you mean") {
		t.Errorf("a field far from every known one got a suggestion: %s", e.message)
	}
}

// An unknown key as long as a body may be gets its refusal without a
// search for the field it might have meant: no "did you mean", and no
// edit-distance table per field (finding 9 of issue 35: ~0.8 s of CPU per
// request). The work is counted in allocations, not timed.
func TestHugeUnknownKeyIsRefusedWithoutASearch(t *testing.T) {
	key := strings.Repeat("k", config.DefaultMaxBodyBytes-64)
	var e *apiError
	allocs := testing.AllocsPerRun(1, func() { _, e = DecodeStart([]byte(`{"`+key+`":1}`), publicPolicy) })
	if e == nil || e.code != CodeUnknownField || strings.Contains(e.message, "did you mean") {
		t.Fatalf("refusal %v", e)
	}
	if allocs > 1000 {
		t.Fatalf("refusing a %d-byte unknown key made %.0f allocations", len(key), allocs)
	}
}

// TestDecodeStartStandby: the hot standby's field is accepted with its
// defaults, {"enabled": false} is no standby, and each problem is a 400
// invalid_standby naming the key (or invalid_type, unknown_field for the
// JSON's shape).
func TestDecodeStartStandby(t *testing.T) {
	const u = `"ws_url":"wss://stream.example.com/ws"`
	d := mustDecode(t, `{`+u+`,"standby":{"enabled":true}}`, publicPolicy)
	if age, bytes := d.StandbyWindow(); !d.StandbyEnabled() || age != spec.DefaultStandbyWindow || bytes != spec.DefaultStandbyWindowBytes {
		t.Fatalf("standby with defaults: %v %v %d", d.StandbyEnabled(), age, bytes)
	}
	d = mustDecode(t, `{`+u+`,"seq_mode":"none","standby":{"enabled":true,"window":"2m","window_bytes":4194304}}`, publicPolicy)
	if age, bytes := d.StandbyWindow(); !d.StandbyEnabled() || age != 2*time.Minute || bytes != 4<<20 {
		t.Fatalf("standby: %v %v %d", d.StandbyEnabled(), age, bytes)
	}
	for _, b := range []string{`{` + u + `,"standby":{"enabled":false}}`, `{` + u + `,"standby":null}`} {
		if d := mustDecode(t, b, publicPolicy); d.Standby != nil || d.StandbyEnabled() {
			t.Fatalf("%s: standby %+v", b, d.Standby)
		}
	}
	for _, c := range []struct{ standby, code, msg string }{
		{`{}`, source.FieldCode("standby"), "standby.enabled: is required"},
		{`{"window":"1m"}`, source.FieldCode("standby"), "standby.enabled: is required"},
		{`{"enabled":true,"window":"4s"}`, source.FieldCode("standby"), "standby.window: must be a duration from 5s to 10m0s"},
		{`{"enabled":true,"window":"11m"}`, source.FieldCode("standby"), "standby.window: must be a duration from 5s to 10m0s"},
		{`{"enabled":true,"window":""}`, source.FieldCode("standby"), "standby.window: must be a duration"},
		{`{"enabled":true,"window_bytes":1024}`, source.FieldCode("standby"), "standby.window_bytes: must be 65536..16777216"},
		{`{"enabled":true,"window_bytes":33554432}`, source.FieldCode("standby"), "standby.window_bytes: must be 65536..16777216"},
		{`{"enabled":"yes"}`, CodeInvalidType, `field "standby.enabled" must be a boolean`},
		{`{"enabled":true,"window":30}`, CodeInvalidType, `field "standby.window" must be a string`},
		{`{"enabled":true,"window_bytes":65536.5}`, CodeInvalidType, `field "standby.window_bytes" must be a number`},
		{`true`, CodeInvalidType, `field "standby" must be a JSON object`},
		{`{"enabled":true,"windows":"1m"}`, CodeUnknownField, `unknown field "standby.windows" (did you mean "standby.window"?)`},
		{`{"enabled":true,"az":"b"}`, CodeUnknownField, `unknown field "standby.az"`},
		{`{"enabled":true,"enabled":false}`, CodeInvalidJSON, `duplicate key "standby.enabled"`},
	} {
		wantReject(t, `{`+u+`,"standby":`+c.standby+`}`, publicPolicy, c.code, c.msg)
	}
}
