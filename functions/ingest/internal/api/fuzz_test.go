package api

import (
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/functions/ingest/internal/config"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/source"
	"github.com/wsfleet/wsfleet/shared/spec"
)

// knownCodes are the codes a refused start may carry, derived so that a new
// field or code can't be left out: every Code constant this package declares
// (read from its source), and the code of a refusal naming each field of a
// start body (source.FieldCode: no field's code is a constant).
var knownCodes = func() map[string]bool {
	m := declaredCodes()
	for f := range startFields {
		m[source.FieldCode(f)] = true
	}
	return m
}()

// declaredCodes are the values of the string constants named Code… in this
// package's non-test files.
func declaredCodes() map[string]bool {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		panic(err)
	}
	m := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			panic(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, sp := range g.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Code") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, err := strconv.Unquote(lit.Value)
						if err != nil {
							panic(err)
						}
						m[v] = true
					}
				}
			}
		}
	}
	return m
}

// Every field of a start body that a spec check can refuse gets a code the
// fuzzer knows (finding 11 of issue 35: the hand-kept list lacked the newer
// fields, so a valid refusal failed the fuzzer): the refusal carries its
// field's derived code, which knownCodes holds with the decoder's own.
func TestKnownCodesCoverTheNewerFields(t *testing.T) {
	for body, field := range map[string]string{
		`{"ws_url":"wss://a.example.com/","max_connection_age":"soon"}`:                          "max_connection_age",
		`{"ws_url":"wss://a.example.com/","switch_timeout":"soon"}`:                              "switch_timeout",
		`{"ws_url":"wss://a.example.com/","reconnect_on":{"match":{"path":""}}}`:                 "reconnect_on",
		`{"ws_url":"wss://a.example.com/","on_sink_refusal":"maybe"}`:                            "on_sink_refusal",
		`{"ws_url":"wss://a.example.com/","standby":{"enabled":true,"window":"1s"}}`:             "standby",
		`{"ws_url":"wss://a.example.com/","headers":{"Host":"h"}}`:                               "headers",
		`{"connection_id":"a b","ws_url":"wss://a.example.com/"}`:                                "connection_id",
		`{"ws_url":"wss://a.example.com/","keepalive_reply":{"match":{"path":"t"},"reply":"r"}}`: "keepalive_reply",
	} {
		_, e := DecodeStart([]byte(body), URLPolicy{PrivateIPs: config.PrivateIPsNone})
		if e == nil || e.status != http.StatusBadRequest || e.code != source.FieldCode(field) || !knownCodes[e.code] {
			t.Errorf("%s: refusal %v, not a 400 with %s's known code %s", body, e, field, source.FieldCode(field))
		}
	}
	for _, c := range []string{CodeUnknownField, CodeInvalidJSON, CodeInvalidType} {
		if !knownCodes[c] {
			t.Errorf("knownCodes lacks %q", c)
		}
	}
}

// FuzzDecodeStart: decoding never panics; whatever it accepts satisfies every
// rule again (so a stored item is always valid), and whatever it refuses is a
// 400 with a known code whose message quotes no header value.
func FuzzDecodeStart(f *testing.F) {
	// Seeds beyond testdata/fuzz/FuzzDecodeStart.
	f.Add([]byte(`{"ws_url":"wss://a.example.com/f?t=1","headers":{"Authorization":"Bearer x"}}`), uint8(0))
	f.Add([]byte(`{"connection_id":"c1","ws_url":"ws://127.0.0.1:9000/","seq_field":"s","resume_query_param":"from"}`), uint8(1))
	f.Add([]byte(`{"ws_url":"wss://[::ffff:10.0.0.1]/"}`), uint8(2))
	f.Add([]byte(`{"ws_url":"wss://a.example.com/","checkpoint_every":"90s"}`), uint8(3))
	f.Add([]byte(`{"ws_url":"wss://a.example.com/","seq_path":"data.u","on_missing_seq":"deliver","resume":{"query_param":"from","value":"last"},`+
		`"open_messages":[{"text":"{\"op\":\"subscribe\",\"from\":\"{{resume_from}}\"}","wait_for":{"path":"event","equals":"subscribed","timeout":"2s"}},{"binary_b64":"AAE="}],`+
		`"app_ping":{"message":"ping","every":"20s","pong":"pong"},"idle_timeout":"1m",`+
		`"keepalive_reply":{"match":{"path":"msg_type","equals":"KEEP_ALIVE_REQ"},"reply":"{\"msg_type\":\"KEEP_ALIVE_RESP\"}"}}`), uint8(0))
	f.Add([]byte(`{"ws_url":"wss://a.example.com/","seq_mode":"none","open_messages":[{"text":"{{token}}"}]}`), uint8(0))
	for _, k := range []string{"max_connection_age", "switch_timeout", "on_sink_refusal"} {
		f.Add([]byte(`{"ws_url":"wss://a.example.com/","`+k+`":"x"}`), uint8(0))
	}
	f.Add([]byte(`{"ws_url":"wss://a.example.com/","reconnect_on":{"match":{"path":""}}}`), uint8(0))
	f.Add([]byte(`{"ws_url":"wss://a.example.com/","standby":{"enabled":true,"window":"45s","window_bytes":65536}}`), uint8(0))
	f.Add([]byte(`{"ws_url":"wss://a.example.com/","standby":{"enabled":false,"window":"4s"}}`), uint8(0))
	// Every start field, from the field list (a new field needs no seed
	// here): a number and a string, which the fuzzer mutates into the
	// field's own type and bounds.
	for _, field := range slices.Sorted(maps.Keys(startFields)) {
		for _, v := range []string{`1`, `"1s"`} {
			f.Add([]byte(`{"ws_url":"wss://a.example.com/","`+field+`":`+v+`}`), uint8(0))
		}
	}
	policies := []URLPolicy{
		{PrivateIPs: config.PrivateIPsNone},
		{PrivateIPs: config.PrivateIPsLoopback},
		{PrivateIPs: config.PrivateIPsAll},
		{PrivateIPs: config.PrivateIPsNone, AllowedHosts: []string{"a.example.com", "*.example.net"}},
	}
	f.Fuzz(func(t *testing.T, body []byte, which uint8) {
		p := policies[int(which)%len(policies)]
		d, e := DecodeStart(body, p)
		if e != nil {
			if e.status != http.StatusBadRequest || !knownCodes[e.code] || e.message == "" {
				t.Fatalf("refusal %d %q %q", e.status, e.code, e.message)
			}
			var raw struct {
				Headers map[string]any `json:"headers"`
			}
			var doc any
			if json.Unmarshal(body, &raw) == nil && json.Unmarshal(body, &doc) == nil {
				// Names are not secret and messages quote them (a header's,
				// an unknown field's, a field's dotted path): a value that
				// happens to be part of a name the body holds is not a leak.
				msg := e.message
				for k := range raw.Headers {
					msg = strings.ReplaceAll(msg, spec.QuoteName(k), "")
				}
				for _, k := range objectKeys(doc) {
					msg = strings.ReplaceAll(msg, k, "")
					if q := strconv.Quote(k); len(q) > 2 {
						msg = strings.ReplaceAll(msg, q[1:len(q)-1], "")
					}
				}
				for _, v := range raw.Headers {
					if s, ok := v.(string); ok && len(s) >= 8 && strings.Contains(msg, s) {
						t.Fatalf("message %q quotes a header value", e.message)
					}
				}
			}
			return
		}
		if !notify.ValidConnectionID(d.ConnectionID) {
			t.Fatalf("accepted connection_id %q", d.ConnectionID)
		}
		sp := d.Spec
		if iv := sp.CheckpointInterval(); sp.CheckpointEvery != "" && (iv < spec.MinCheckpointEvery || iv > spec.MaxCheckpointEvery) {
			t.Fatalf("accepted checkpoint_every %q", sp.CheckpointEvery)
		}
		if age, bytes := sp.StandbyWindow(); age < spec.MinStandbyWindow || age > spec.MaxStandbyWindow ||
			bytes < spec.MinStandbyWindowBytes || bytes > spec.MaxStandbyWindowBytes || (sp.Standby != nil && !sp.StandbyEnabled()) {
			t.Fatalf("accepted standby %+v", sp.Standby)
		}
		if e := p.CheckWSURL(sp.WSURL); e != nil {
			t.Fatalf("accepted ws_url %q fails re-check: %v", sp.WSURL, e)
		}
		u, err := url.Parse(sp.WSURL)
		if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.User != nil || u.Host == "" || len(sp.WSURL) > MaxWSURLLen {
			t.Fatalf("accepted ws_url %q", sp.WSURL)
		}
		for k, v := range sp.Headers {
			if strings.ContainsAny(k+v, "\r\n\x00") {
				t.Fatalf("accepted header %q", k)
			}
		}
		if _, err := source.ParsePath(sp.Seq()); err != nil {
			t.Fatalf("accepted seq path %q", sp.Seq())
		}
		// What is stored decodes back to the same spec (the run rules are within
		// admission's), and checks again.
		enc, err := sp.Encode()
		if err != nil {
			t.Fatal(err)
		}
		back, err := spec.Decode(enc)
		if err != nil {
			t.Fatalf("accepted spec %q does not decode back: %v", enc, err)
		}
		if again, _ := back.Encode(); again != enc {
			t.Fatalf("accepted spec %q re-encodes as %q", enc, again)
		}
		if fe := back.Check(nil); fe != nil {
			t.Fatalf("accepted spec %q does not check again: %v", enc, fe)
		}
		// Redaction keeps no query value: every element it shows is empty
		// (as in "?&"), a bare REDACTED or a key with the value REDACTED.
		if r := spec.RedactURL(sp.WSURL); u.RawQuery != "" {
			ru, err := url.Parse(r)
			if err != nil {
				t.Fatalf("redacted %q does not parse: %q", sp.WSURL, r)
			}
			for _, kv := range strings.Split(ru.RawQuery, "&") {
				if kv != "" && kv != spec.Redacted && !strings.HasSuffix(kv, "="+spec.Redacted) {
					t.Fatalf("redaction of %q kept the query element %q: %q", sp.WSURL, kv, r)
				}
			}
		}
	})
}

// FuzzRequest drives the whole handler (fake store and queue) as Lambda runs
// it, API Gateway events through httpadapter, with arbitrary methods, paths,
// query strings, content types and bodies: it never panics or errors, always
// answers JSON, and only ever 2xx or a 4xx with a known code.
func FuzzRequest(f *testing.F) {
	f.Add("POST", "/sessions", "", "application/json", `{"ws_url":"wss://a.example.com"}`, false)
	f.Add("POST", "/sessions/abc/stop", "", "", ``, false)
	f.Add("GET", "/sessions/abc", "", "", ``, false)
	f.Add("GET", "/sessions", "state=STOPPED&limit=3&next=eyJ9", "", ``, false)
	f.Add("GET", "/prod/sessions", "limit=0", "", ``, true)
	f.Add("PUT", "/sessions/%2F", "", "text/plain", `x`, true)
	fx := newFixture(f, nil)
	fx.h.log, fx.h.meter.out = zerolog.Nop(), io.Discard // millions of runs: keep nothing
	lambda := fx.h.Lambda()
	f.Fuzz(func(t *testing.T, method, path, query, contentType, body string, b64 bool) {
		req := event(method, path, body)
		req.RawQueryString = query
		req.Headers["content-type"] = contentType
		req.IsBase64Encoded = b64
		if b64 {
			req.RequestContext.Stage = "prod"
		}
		resp, err := lambda(context.Background(), req)
		if err != nil {
			t.Fatalf("Lambda handler error: %v", err)
		}
		var out map[string]any
		if err := json.Unmarshal([]byte(resp.Body), &out); err != nil {
			t.Fatalf("body %q: %v", resp.Body, err)
		}
		switch {
		case resp.StatusCode == 200 || resp.StatusCode == 202:
		case resp.StatusCode >= 400 && resp.StatusCode < 500:
			e, _ := out["error"].(map[string]any)
			if code, _ := e["code"].(string); !knownCodes[code] {
				t.Fatalf("%d with code %v", resp.StatusCode, e)
			}
		default:
			t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
		}
	})
}

// objectKeys is every object key in a decoded JSON document, at any depth
// (empty keys left out).
func objectKeys(v any) []string {
	var keys []string
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k != "" {
				keys = append(keys, k)
			}
			keys = append(keys, objectKeys(e)...)
		}
	case []any:
		for _, e := range x {
			keys = append(keys, objectKeys(e)...)
		}
	}
	return keys
}
