package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestVerifySignature(t *testing.T) {
	secret := []byte("0123456789abcdef-secret")
	now := time.Unix(1_800_000_000, 0)
	v := NewVerifier(secret, 5*time.Minute)
	ts := strconv.FormatInt(now.Unix(), 10)
	base := SignedRequest{Timestamp: ts, Nonce: "n-0123456789abcdef", Method: "POST", Path: "/sessions",
		Query: "", Body: []byte(`{"ws_url":"wss://a.example.com"}`)}
	sig := Sign(secret, base)
	if !strings.HasPrefix(sig, "v1=") || len(sig) != 3+64 {
		t.Fatalf("signature shape %q", sig)
	}
	until, e := v.Verify(now, sig, base)
	if e != nil {
		t.Fatalf("valid signature refused: %v", e)
	}
	if !until.Equal(now.Add(5 * time.Minute)) {
		t.Fatalf("nonce kept until %v, want the end of the window", until)
	}
	lower := base
	lower.Method = "post"
	if _, e := v.Verify(now, sig, lower); e != nil {
		t.Fatalf("method case: %v", e)
	}
	// At the edges of the window (both directions) it is still valid.
	for _, d := range []time.Duration{5 * time.Minute, -5 * time.Minute} {
		if _, e := v.Verify(now.Add(d), sig, base); e != nil {
			t.Fatalf("at %v: %v", d, e)
		}
	}
	with := func(f func(*SignedRequest)) SignedRequest {
		r := base
		f(&r)
		return r
	}
	other := Sign([]byte("another-secret-0123456789"), base)
	cases := []struct {
		name string
		at   time.Time
		sig  string
		req  SignedRequest
		code string
	}{
		{"missing everything", now, "", with(func(r *SignedRequest) { r.Timestamp, r.Nonce = "", "" }), CodeMissingSignature},
		{"missing signature", now, "", base, CodeMissingSignature},
		{"missing timestamp", now, sig, with(func(r *SignedRequest) { r.Timestamp = "" }), CodeMissingSignature},
		{"missing nonce", now, sig, with(func(r *SignedRequest) { r.Nonce = "" }), CodeMissingSignature},
		{"stale", now.Add(5*time.Minute + time.Second), sig, base, CodeStaleTimestamp},
		{"future", now.Add(-5*time.Minute - time.Second), sig, base, CodeStaleTimestamp},
		{"timestamp not a number", now, sig, with(func(r *SignedRequest) { r.Timestamp = "17e8" }), CodeStaleTimestamp},
		{"timestamp in ms", now, sig, with(func(r *SignedRequest) { r.Timestamp = strconv.FormatInt(now.UnixMilli(), 10) }), CodeStaleTimestamp},
		{"negative timestamp", now, sig, with(func(r *SignedRequest) { r.Timestamp = "-5" }), CodeStaleTimestamp},
		{"short nonce", now, sig, with(func(r *SignedRequest) { r.Nonce = "abc" }), CodeBadNonce},
		{"nonce with a slash", now, sig, with(func(r *SignedRequest) { r.Nonce = "0123456789abcdef/x" }), CodeBadNonce},
		{"other secret", now, other, base, CodeBadSignature},
		{"body changed", now, sig, with(func(r *SignedRequest) { r.Body = []byte(`{"ws_url":"wss://b.example.com"}`) }), CodeBadSignature},
		{"body extended", now, sig, with(func(r *SignedRequest) { r.Body = append(append([]byte{}, base.Body...), ' ') }), CodeBadSignature},
		{"path changed (replay on another session)", now, sig, with(func(r *SignedRequest) { r.Path = "/sessions/x/stop" }), CodeBadSignature},
		{"query added", now, sig, with(func(r *SignedRequest) { r.Query = "state=STOPPED" }), CodeBadSignature},
		{"nonce changed", now, sig, with(func(r *SignedRequest) { r.Nonce = "n-0123456789abcdeX" }), CodeBadSignature},
		{"method changed", now, sig, with(func(r *SignedRequest) { r.Method = "GET" }), CodeBadSignature},
		{"timestamp changed", now, sig, with(func(r *SignedRequest) { r.Timestamp = strconv.FormatInt(now.Unix()+1, 10) }), CodeBadSignature},
		{"no prefix", now, strings.TrimPrefix(sig, "v1="), base, CodeBadSignature},
		{"not hex", now, "v1=" + strings.Repeat("z", 64), base, CodeBadSignature},
		{"truncated", now, sig[:len(sig)-2], base, CodeBadSignature},
		{"prefix of mac", now, sig[:3+32], base, CodeBadSignature},
		{"extended", now, sig + "00", base, CodeBadSignature},
		{"empty mac", now, "v1=", base, CodeBadSignature},
		{"upper-case hex of another mac", now, strings.ToUpper(other), base, CodeBadSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, e := v.Verify(c.at, c.sig, c.req)
			if e == nil || e.status != http.StatusUnauthorized || e.code != c.code {
				t.Fatalf("got %v, want 401 %s", e, c.code)
			}
			if strings.Contains(e.message, string(secret)) {
				t.Fatal("message leaks the secret")
			}
		})
	}
	// Upper-case hex of the right MAC is the same MAC.
	if _, e := v.Verify(now, "v1="+strings.ToUpper(strings.TrimPrefix(sig, "v1=")), base); e != nil {
		t.Fatalf("upper-case hex: %v", e)
	}
}

// TestStringToSignSeparatesFields pins the canonical string: the worked
// example in docs/api.md is this string.
func TestStringToSignSeparatesFields(t *testing.T) {
	a := StringToSign(SignedRequest{Timestamp: "1", Nonce: "n", Method: "post", Path: "/sessions", Query: "a=1&b=2", Body: []byte("x")})
	if string(a) != "1\nn\nPOST\n/sessions\na=1&b=2\nx" {
		t.Fatalf("%q", a)
	}
}

// TestDocumentedSigningExample is the worked example of docs/api.md.
func TestDocumentedSigningExample(t *testing.T) {
	r := SignedRequest{Timestamp: "1800000000", Nonce: "3f9c2a7e-5b1d-4c8e-9a60-2d4f8b7c1e05", Method: "POST", Path: "/sessions",
		Body: []byte(`{"connection_id":"meeting-43","ws_url":"wss://media.example.com/s"}`)}
	const want = "v1=09b823852608127f397df1e1db1026c2d1f41e204dbf2b2b7111df1296656288"
	if got := Sign([]byte("local-dev-signing-secret"), r); got != want {
		t.Fatalf("Sign = %s, docs/api.md says %s", got, want)
	}
}

// TestVerifyComparesInConstantTime checks the source of Verify: the MAC is
// compared with hmac.Equal (or subtle.ConstantTimeCompare) and never with
// ==, bytes.Equal or strings.EqualFold, whose running time depends on the
// length of the matching prefix. Timing itself is too noisy to assert here.
func TestVerifyComparesInConstantTime(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "sign.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var verify *ast.FuncDecl
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "Verify" {
			verify = fd
		}
	}
	if verify == nil {
		t.Fatal("Verify not found in sign.go")
	}
	constantTime := 0
	ast.Inspect(verify, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.CallExpr:
			if sel, ok := x.Fun.(*ast.SelectorExpr); ok {
				pkg, _ := sel.X.(*ast.Ident)
				name := ""
				if pkg != nil {
					name = pkg.Name + "." + sel.Sel.Name
				}
				switch name {
				case "hmac.Equal", "subtle.ConstantTimeCompare":
					constantTime++
				case "bytes.Equal", "strings.EqualFold", "bytes.Compare", "strings.Compare", "reflect.DeepEqual":
					t.Errorf("%s: Verify compares with %s", fset.Position(x.Pos()), name)
				}
			}
		case *ast.BinaryExpr:
			_, litX := x.X.(*ast.BasicLit)
			_, litY := x.Y.(*ast.BasicLit)
			if (x.Op == token.EQL || x.Op == token.NEQ) && !litX && !litY { // == "" is a presence check
				for _, side := range []ast.Expr{x.X, x.Y} {
					if id, ok := side.(*ast.Ident); ok && (id.Name == "got" || id.Name == "hexSig" || id.Name == "signature") {
						t.Errorf("%s: Verify compares %s with %s", fset.Position(x.Pos()), id.Name, x.Op)
					}
				}
			}
		}
		return true
	})
	if constantTime != 1 {
		t.Fatalf("Verify makes %d constant-time comparisons, want 1", constantTime)
	}
}
