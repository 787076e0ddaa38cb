package secretref

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

const prefix = "wsfleet/prod/"

func TestRefs(t *testing.T) {
	long := strings.Repeat("a", MaxNameLen)
	cases := []struct {
		name string
		in   string
		want []Ref
	}{
		{"none", "Bearer abc", nil},
		{"whole", "Bearer {{secret:wsfleet/prod/api}}", []Ref{{Name: "wsfleet/prod/api"}}},
		{"key", "{{secret:wsfleet/prod/api#token}}", []Ref{{Name: "wsfleet/prod/api", Key: "token"}}},
		{"all name chars", "{{secret:aZ09/_+=.@-}}", []Ref{{Name: "aZ09/_+=.@-"}}},
		{"all key chars", "{{secret:n#aZ09_-.}}", []Ref{{Name: "n", Key: "aZ09_-."}}},
		{"two and a repeat", "{{secret:a#u}}:{{secret:a#p}} {{secret:a#u}}", []Ref{{"a", "u"}, {"a", "p"}, {"a", "u"}}},
		{"longest name", "{{secret:" + long + "}}", []Ref{{Name: long}}},
		{"malformed skipped", "{{secret:bad name}} {{secret:good}}", []Ref{{Name: "good"}}},
		{"placeholders are not refs", "{{resume_from}}{{last_seq}}{{connection_id}}{{generation}}", nil},
		{"nested opening", "{{secret:{{secret:x}}", []Ref{{Name: "x"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Refs(c.in); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Refs = %#v, want %#v", got, c.want)
			}
			for _, r := range c.want {
				if !reflect.DeepEqual(Refs(r.String()), []Ref{r}) {
					t.Fatalf("%q does not parse back to itself", r.String())
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		in     string
		prefix string
		want   string // "" = valid; else a part of the error text
	}{
		{"no refs, no prefix", "Bearer abc {{resume_from}}", "", ""},
		{"under prefix", "Bearer {{secret:wsfleet/prod/api#token}}", prefix, ""},
		{"no prefix configured", "{{secret:wsfleet/prod/api}}", "", "no secret prefix configured"},
		{"outside prefix", "{{secret:other/api}}", prefix, `not under this deployment's secret prefix "wsfleet/prod/"`},
		{"prefix itself", "{{secret:wsfleet/prod/}}", prefix, "not under"},
		{"sibling of prefix folder", "{{secret:wsfleet/production}}", prefix, "not under"},
		{"second ref is the bad one", "{{secret:wsfleet/prod/a}} {{secret:x}}", prefix, "secret reference 2 (at byte 26)"},
		{"empty name", "{{secret:}}", prefix, "empty secret name"},
		{"unclosed", "Bearer {{secret:wsfleet/prod/api", prefix, "not closed by }}"},
		{"bad name char", "{{secret:wsfleet/prod/a b}}", prefix, "not closed by }}"},
		{"arn refused", "{{secret:arn:aws:secretsmanager:us-east-1:1:secret:x}}", prefix, "not closed"},
		{"name too long", "{{secret:wsfleet/prod/" + strings.Repeat("a", MaxNameLen) + "}}", prefix, "longer than 512"},
		{"empty key", "{{secret:wsfleet/prod/a#}}", prefix, "empty JSON key"},
		{"bad key char", "{{secret:wsfleet/prod/a#k/y}}", prefix, "not closed"},
		{"key too long", "{{secret:wsfleet/prod/a#" + strings.Repeat("k", MaxKeyLen+1) + "}}", prefix, "longer than 128"},
		{"placeholder inside", "{{secret:{{generation}}}}", prefix, "empty secret name"},
		{"single brace close", "{{secret:wsfleet/prod/a}", prefix, "not closed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Validate(c.in, c.prefix)
			if c.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate = %v, want it to say %q", err, c.want)
			}
			var re *Error
			if !errors.As(err, &re) {
				t.Fatalf("Validate = %T, want *Error", err)
			}
		})
	}
}

// The error names the problem and where, never the text: a malformed
// reference may be a pasted credential.
func TestValidateDoesNotQuoteTheText(t *testing.T) {
	for _, in := range []string{
		"sk_live_SECRETVALUE {{secret:sk_live_SECRETVALUE!}}",
		"{{secret:sk_live_SECRETVALUE}}",
		"{{secret:wsfleet/prod/x#sk_live_SECRETVALUE!}}",
	} {
		err := Validate(in, prefix)
		if err == nil {
			t.Fatalf("Validate(%q) = nil", in)
		}
		if strings.Contains(err.Error(), "SECRETVALUE") {
			t.Fatalf("the error quotes the text: %v", err)
		}
	}
}

func TestCheckPrefix(t *testing.T) {
	for p, ok := range map[string]bool{"": true, "wsfleet/prod/": true, "wsfleet/prod": false, "a b/": false, "/": true} {
		if err := CheckPrefix(p); (err == nil) != ok {
			t.Errorf("CheckPrefix(%q) = %v", p, err)
		}
	}
}

func TestExpand(t *testing.T) {
	secrets := map[string]string{
		"wsfleet/prod/plain": "tok-1",
		"wsfleet/prod/json":  `{"user":"u1","pass":"p\"1","n":5,"z":null,"o":{"a":"b"}}`,
		"wsfleet/prod/tmpl":  "{{last_seq}}",
		"wsfleet/prod/nest":  "x{{secret:wsfleet/prod/plain}}",
		"wsfleet/prod/tail":  "secret:wsfleet/prod/plain}}",
	}
	cases := []struct {
		name string
		in   string
		want string
		err  string
	}{
		{"no refs", "Bearer abc", "Bearer abc", ""},
		{"whole", "Bearer {{secret:wsfleet/prod/plain}}", "Bearer tok-1", ""},
		{"keys", "{{secret:wsfleet/prod/json#user}}:{{secret:wsfleet/prod/json#pass}}", `u1:p"1`, ""},
		{"value is not templated", "{{secret:wsfleet/prod/tmpl}}", "{{last_seq}}", ""},
		{"missing key", "{{secret:wsfleet/prod/json#nope}}", "", `secret "wsfleet/prod/json" has no JSON key "nope"`},
		{"number member", "{{secret:wsfleet/prod/json#n}}", "", `JSON key "n" is not a string`},
		{"null member", "{{secret:wsfleet/prod/json#z}}", "", `JSON key "z" is not a string`},
		{"object member", "{{secret:wsfleet/prod/json#o}}", "", "not a string"},
		{"key of a non-JSON secret", "{{secret:wsfleet/prod/plain#k}}", "", "not a JSON object"},
		{"nested value", "{{secret:wsfleet/prod/nest}}", "", "references do not nest"},
		{"value joined to the text", "{{{{secret:wsfleet/prod/tail}}", "", "references do not nest"},
		{"malformed", "{{secret:wsfleet/prod/plain", "", "not closed"},
		{"lookup error", "a {{secret:wsfleet/prod/gone}}", "", `secret reference 1 (at byte 2): secret "wsfleet/prod/gone": not found`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			calls := map[string]int{}
			got, err := Expand(c.in, func(r Ref) (string, error) {
				calls[r.Name]++
				v, ok := secrets[r.Name]
				if !ok {
					return "", errNotFound
				}
				return v, nil
			})
			for n, k := range calls {
				if k != 1 {
					t.Errorf("%s looked up %d times, want once per Expand", n, k)
				}
			}
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("Expand = %q, %v; want an error saying %q", got, err, c.err)
				}
				if got != "" {
					t.Fatalf("Expand returned %q with its error", got)
				}
				for _, v := range []string{"tok-1", "u1", "p\\\"1"} {
					if strings.Contains(err.Error(), v) {
						t.Fatalf("the error holds a value: %v", err)
					}
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("Expand = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

var errNotFound = errors.New("not found")

func TestExpandWrapsTheLookupError(t *testing.T) {
	_, err := Expand("{{secret:a}}", func(Ref) (string, error) { return "", errNotFound })
	if !errors.Is(err, errNotFound) || err.Error() != `secret reference 1 (at byte 0): secret "a": not found` {
		t.Fatalf("Expand = %v, want it to wrap the lookup's error and name the secret", err)
	}
	// A lookup error that names the secret already is not prefixed again.
	_, err = Expand("{{secret:a}}", func(Ref) (string, error) { return "", fmt.Errorf(`secret "a": %w`, errNotFound) })
	if !errors.Is(err, errNotFound) || err.Error() != `secret reference 1 (at byte 0): secret "a": not found` {
		t.Fatalf("Expand = %v, want the secret named once", err)
	}
}
