package api

import (
	"strings"
	"testing"
)

// Secret references ({{secret:NAME#key}}) in header values and open
// messages: a deployment without a secret prefix takes none; one with a
// prefix takes names under it only, stores the reference as written and
// shows it (never a value) in secret_refs; a refusal names the field and
// never quotes the value.
func TestSecretReferencesFollowTheDeploymentsPrefix(t *testing.T) {
	body := `{"ws_url":"wss://stream.example.com/","headers":{"X-Api-Key":"{{secret:wsfleet/prod/feed#api_key}}"},` +
		`"open_messages":[{"text":"{\"op\":\"auth\",\"token\":\"{{secret:wsfleet/prod/feed#token}}\"}"}]}`
	wantReject(t, body, publicPolicy, CodeInvalidHeader, "no secret prefix")

	prod := publicPolicy
	prod.SecretPrefix = "wsfleet/prod/"
	d := mustDecode(t, body, prod)
	if d.Headers["X-Api-Key"] != "{{secret:wsfleet/prod/feed#api_key}}" || !strings.Contains(*d.OpenMessages[0].Text, "{{secret:wsfleet/prod/feed#token}}") {
		t.Fatalf("the references are not stored as written: %+v", d.Spec)
	}
	v := d.Spec.View()
	if strings.Join(v.SecretRefs, " ") != "{{secret:wsfleet/prod/feed#api_key}} {{secret:wsfleet/prod/feed#token}}" {
		t.Fatalf("secret_refs %v", v.SecretRefs)
	}

	other := `{"ws_url":"wss://stream.example.com/","open_messages":[{"text":"{{secret:wsfleet/dev/feed}}"}]}`
	wantReject(t, other, prod, CodeInvalidOpenMessages, "open_messages[0].text")
	wantReject(t, other, prod, CodeInvalidOpenMessages, "prefix")
	malformed := `{"ws_url":"wss://stream.example.com/","headers":{"Authorization":"Bearer {{secret:wsfleet/prod/x sk_live_9}}"}}`
	_, e := DecodeStart([]byte(malformed), prod)
	if e == nil || e.code != CodeInvalidHeader || strings.Contains(e.message, "sk_live") {
		t.Fatalf("a malformed reference in a header: %v", e)
	}
}
