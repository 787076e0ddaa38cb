package api

import (
	"strings"
	"testing"

	"github.com/wsfleet/wsfleet/shared/secretref"
	"github.com/wsfleet/wsfleet/shared/source"
)

// Secret references ({{secret:NAME#key}}) in header values and open
// messages: a deployment without a secret prefix takes none; one with a
// prefix takes names under it only, stores the reference as written and
// shows it (never a value) in secret_refs; a refusal names the field and
// never quotes the value.
func TestSecretReferencesFollowTheDeploymentsPrefix(t *testing.T) {
	body := `{"ws_url":"wss://stream.example.com/","headers":{"X-Api-Key":"{{secret:wsfleet/prod/feed#api_key}}"},` +
		`"open_messages":[{"text":"{\"op\":\"auth\",\"token\":\"{{secret:wsfleet/prod/feed#token}}\"}"}]}`
	wantReject(t, body, publicPolicy, source.FieldCode("headers"), "no secret prefix")

	prod := publicPolicy
	prod.SecretPrefix = "wsfleet/prod/"
	prod.SecretHosts = mustBindings(t, "wsfleet/prod/=stream.example.com")
	d := mustDecode(t, body, prod)
	if d.Headers["X-Api-Key"] != "{{secret:wsfleet/prod/feed#api_key}}" || !strings.Contains(*d.OpenMessages[0].Text, "{{secret:wsfleet/prod/feed#token}}") {
		t.Fatalf("the references are not stored as written: %+v", d.Spec)
	}
	v := d.Spec.View()
	if strings.Join(v.SecretRefs, " ") != "{{secret:wsfleet/prod/feed#api_key}} {{secret:wsfleet/prod/feed#token}}" {
		t.Fatalf("secret_refs %v", v.SecretRefs)
	}

	other := `{"ws_url":"wss://stream.example.com/","open_messages":[{"text":"{{secret:wsfleet/dev/feed}}"}]}`
	wantReject(t, other, prod, source.FieldCode("open_messages"), "open_messages[0].text")
	wantReject(t, other, prod, source.FieldCode("open_messages"), "prefix")
	malformed := `{"ws_url":"wss://stream.example.com/","headers":{"Authorization":"Bearer {{secret:wsfleet/prod/x sk_live_9}}"}}`
	_, e := DecodeStart([]byte(malformed), prod)
	if e == nil || e.code != source.FieldCode("headers") || strings.Contains(e.message, "sk_live") {
		t.Fatalf("a malformed reference in a header: %v", e)
	}
}

// A spec holds at most secretref.MaxRefs secret references, its header
// values and open messages together: each can stand for a whole secret
// (64 KiB) at every dial, and a body of a few KB full of one reference
// once expanded to hundreds of MiB. The refusal names the header or open
// message that passes the bound; MaxRefs is accepted.
func TestSecretReferencesPerSpecAreBounded(t *testing.T) {
	prod := publicPolicy
	prod.SecretPrefix = "wsfleet/prod/"
	prod.SecretHosts = mustBindings(t, "wsfleet/prod/=stream.example.com")
	ref := "{{secret:wsfleet/prod/feed}}"
	body := func(open ...int) string {
		var msgs []string
		for _, n := range open {
			msgs = append(msgs, `{"text":"`+strings.Repeat(ref, n)+`"}`)
		}
		return `{"ws_url":"wss://stream.example.com/","headers":{"Authorization":"Bearer ` + ref + `"},` +
			`"open_messages":[` + strings.Join(msgs, ",") + `]}`
	}
	mustDecode(t, body(5, 10), prod) // 1 + 5 + 10 = MaxRefs
	wantReject(t, body(5, 11), prod, source.FieldCode("open_messages"), "open_messages[1].text: more than 16 secret references")
	wantReject(t, body(2000), prod, source.FieldCode("open_messages"), "open_messages[0].text: more than 16 secret references")
	many := `{"ws_url":"wss://stream.example.com/","headers":{"A":"` + strings.Repeat(ref, 9) + `","B":"` + strings.Repeat(ref, 9) + `"}}`
	wantReject(t, many, prod, source.FieldCode("headers"), `header "B" value: more than 16 secret references`)
}

// mustBindings parses a WSFLEET_SECRET_HOSTS value.
func mustBindings(t *testing.T, v string) secretref.Bindings {
	t.Helper()
	b, err := secretref.ParseBindings(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A secret goes only to the hosts the deployment binds it to
// (WSFLEET_SECRET_HOSTS): a start whose ws_url names another host (the
// caller's own, to read the secret) is refused, naming the field and the
// secret; so is every reference of a deployment that binds none. The
// match is the exact host (and port, when the binding names one), never a
// suffix or a substring.
func TestSecretReferencesGoOnlyToTheirBoundHosts(t *testing.T) {
	prod := publicPolicy
	prod.SecretPrefix = "wsfleet/prod/"
	start := func(wsURL string) string {
		return `{"ws_url":"` + wsURL + `","headers":{"Authorization":"Bearer {{secret:wsfleet/prod/feed#token}}"},` +
			`"open_messages":[{"text":"{\"op\":\"auth\",\"key\":\"{{secret:wsfleet/prod/bank}}\"}"}]}`
	}
	wantReject(t, start("wss://stream.example.com/"), prod, source.FieldCode("headers"), `header "Authorization" value: secret reference 1 (at byte 7): secret "wsfleet/prod/feed": may not be sent to this host`)

	prod.SecretHosts = mustBindings(t, "wsfleet/prod/=stream.example.com;wsfleet/prod/bank=stream.example.com:443")
	mustDecode(t, start("wss://stream.example.com/v1"), prod)
	mustDecode(t, start("wss://STREAM.example.com:443/v1"), prod)
	for _, u := range []string{"wss://attacker.example/", "wss://stream.example.com.attacker.example/", "wss://attacker.example/?stream.example.com", "wss://sub.stream.example.com/"} {
		wantReject(t, start(u), prod, source.FieldCode("headers"), `secret "wsfleet/prod/feed": may not be sent to this host`)
	}
	// The bank secret's own binding names port 443: ws:// (80) and :8443 are refused.
	wantReject(t, start("wss://stream.example.com:8443/"), prod, source.FieldCode("open_messages"), `open_messages[0].text: secret reference 1 (at byte 20): secret "wsfleet/prod/bank": may not be sent`)
}
