package secretref

import (
	"strings"
	"testing"
)

// FuzzExpand: Expand never panics; when every lookup succeeds its output
// holds no "{{secret:"; it agrees with Validate on what is malformed; and a
// string without references comes back unchanged.
func FuzzExpand(f *testing.F) {
	for _, s := range []string{
		"", "plain", "{{secret:a}}", "{{secret:a#k}}", "{{secret:", "{{secret:}}", "{{{{secret:a}}",
		"{{secret:a#}}", "x{{secret:a/b+c=d.e@f-g}}y{{secret:a#k}}", "{{secret:{{secret:a}}}}", "{{last_seq}}{{secret:a}",
	} {
		f.Add(s, "v", `{"k":"w"}`)
	}
	f.Add("{{{{secret:a}}", "secret:a}}", "{")
	f.Fuzz(func(t *testing.T, s, plain, obj string) {
		lookup := func(r Ref) (string, error) {
			if r.Key != "" {
				return obj, nil
			}
			return plain, nil
		}
		out, err := Expand(s, lookup)
		if err == nil && strings.Contains(out, Open) {
			t.Fatalf("Expand(%q) = %q: holds %q", s, out, Open)
		}
		if err == nil && !Contains(s) && out != s {
			t.Fatalf("Expand(%q) = %q: changed a string without references", s, out)
		}
		if Validate(s, "a") != nil && Validate(s, "") == nil {
			t.Fatalf("Validate(%q) passes without a prefix but not with one", s)
		}
		if malformed := validSyntax(s) != nil; malformed && err == nil {
			t.Fatalf("Expand(%q) accepted what Validate calls malformed", s)
		}
	})
}

// validSyntax is Validate without the prefix rule.
func validSyntax(s string) error {
	for _, sp := range scan(s) {
		if sp.bad != "" {
			return &Error{N: sp.n, Offset: sp.start, Reason: sp.bad}
		}
	}
	return nil
}
