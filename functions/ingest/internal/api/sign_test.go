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
	body := []byte(`{"ws_url":"wss://a.example.com"}`)
	ts := strconv.FormatInt(now.Unix(), 10)
	sig := Sign(secret, ts, "POST", "/sessions", body)
	if !strings.HasPrefix(sig, "v1=") || len(sig) != 3+64 {
		t.Fatalf("signature shape %q", sig)
	}

	if e := v.Verify(now, ts, sig, "POST", "/sessions", body); e != nil {
		t.Fatalf("valid signature refused: %v", e)
	}
	if e := v.Verify(now, ts, sig, "post", "/sessions", body); e != nil {
		t.Fatalf("method case: %v", e)
	}
	// At the edges of the window (both directions) it is still valid.
	for _, d := range []time.Duration{5 * time.Minute, -5 * time.Minute} {
		at := now.Add(d)
		if e := v.Verify(at, ts, sig, "POST", "/sessions", body); e != nil {
			t.Fatalf("at %v: %v", d, e)
		}
	}

	type tc struct {
		name                  string
		at                    time.Time
		ts, sig, method, path string
		body                  []byte
		code                  string
	}
	other := Sign([]byte("another-secret-0123456789"), ts, "POST", "/sessions", body)
	cases := []tc{
		{"missing both", now, "", "", "POST", "/sessions", body, CodeMissingSignature},
		{"missing signature", now, ts, "", "POST", "/sessions", body, CodeMissingSignature},
		{"missing timestamp", now, "", sig, "POST", "/sessions", body, CodeMissingSignature},
		{"stale", now.Add(5*time.Minute + time.Second), ts, sig, "POST", "/sessions", body, CodeStaleTimestamp},
		{"future", now.Add(-5*time.Minute - time.Second), ts, sig, "POST", "/sessions", body, CodeStaleTimestamp},
		{"timestamp not a number", now, "17e8", sig, "POST", "/sessions", body, CodeStaleTimestamp},
		{"timestamp in ms", now, strconv.FormatInt(now.UnixMilli(), 10), sig, "POST", "/sessions", body, CodeStaleTimestamp},
		{"negative timestamp", now, "-5", sig, "POST", "/sessions", body, CodeStaleTimestamp},
		{"other secret", now, ts, other, "POST", "/sessions", body, CodeBadSignature},
		{"body changed", now, ts, sig, "POST", "/sessions", []byte(`{"ws_url":"wss://b.example.com"}`), CodeBadSignature},
		{"body extended", now, ts, sig, "POST", "/sessions", append(append([]byte{}, body...), ' '), CodeBadSignature},
		{"path changed (replay on another session)", now, ts, sig, "POST", "/sessions/x/stop", body, CodeBadSignature},
		{"method changed", now, ts, sig, "GET", "/sessions", body, CodeBadSignature},
		{"timestamp changed", now, strconv.FormatInt(now.Unix()+1, 10), sig, "POST", "/sessions", body, CodeBadSignature},
		{"no prefix", now, ts, strings.TrimPrefix(sig, "v1="), "POST", "/sessions", body, CodeBadSignature},
		{"not hex", now, ts, "v1=" + strings.Repeat("z", 64), "POST", "/sessions", body, CodeBadSignature},
		{"truncated", now, ts, sig[:len(sig)-2], "POST", "/sessions", body, CodeBadSignature},
		{"prefix of mac", now, ts, sig[:3+32], "POST", "/sessions", body, CodeBadSignature},
		{"extended", now, ts, sig + "00", "POST", "/sessions", body, CodeBadSignature},
		{"empty mac", now, ts, "v1=", "POST", "/sessions", body, CodeBadSignature},
		{"upper-case hex of another mac", now, ts, strings.ToUpper(other), "POST", "/sessions", body, CodeBadSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := v.Verify(c.at, c.ts, c.sig, c.method, c.path, c.body)
			if e == nil || e.status != http.StatusUnauthorized || e.code != c.code {
				t.Fatalf("got %v, want 401 %s", e, c.code)
			}
			if strings.Contains(e.message, string(secret)) {
				t.Fatal("message leaks the secret")
			}
		})
	}
	// Upper-case hex of the right MAC is the same MAC.
	if e := v.Verify(now, ts, "v1="+strings.ToUpper(strings.TrimPrefix(sig, "v1=")), "POST", "/sessions", body); e != nil {
		t.Fatalf("upper-case hex: %v", e)
	}
}

func TestStringToSignSeparatesFields(t *testing.T) {
	a := StringToSign("1", "POST", "/sessions", []byte("x"))
	if string(a) != "1\nPOST\n/sessions\nx" {
		t.Fatalf("%q", a)
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
