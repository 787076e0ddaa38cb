package spec

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/source"
)

// bounds are a field's limits as its fieldCases row gives them: the lowest
// and highest value a start accepts, written as docs/api.md's row quotes
// them, and what an explicit zero means. The value's kind comes from the
// field's Go type: a whole number (the field's unit), a Go duration, or a
// list (the bounds are its length).
type bounds struct {
	lowest, highest string
	zero            zeroRule
}

// zeroRule is what a body's explicit zero value (0, "", []) means: the
// field's documented rule for it.
type zeroRule int

const (
	// zeroIsDefault: accepted, and the same configuration as leaving the
	// field out (it encodes the same).
	zeroIsDefault zeroRule = iota
	// zeroRefused: refused with the field's code ("omit it for the
	// default").
	zeroRefused
)

func within(lowest, highest string, zero zeroRule) *bounds {
	return &bounds{lowest: lowest, highest: highest, zero: zero}
}

// A setting's limits are checked from its one row: every setting has
// bounds in fieldCases; a start accepts its lowest and highest value (and
// the worker runs what was stored), refuses the value one below the lowest
// and one above the highest (the unit's step: 1, 1 ns, one item) with
// invalid_<field>, treats an explicit zero as the row says, and the field's
// row in docs/api.md quotes both bounds. The worker runs those refused
// values when stored (a limit tightened later fails no session), all but a
// negative number.
func TestEverySettingKeepsItsBounds(t *testing.T) {
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	types := fieldTypes(reflect.TypeFor[Spec]())
	settings := map[string]bool{}
	for _, f := range FieldNames(reflect.TypeFor[Settings]()) {
		settings[f] = true
	}
	omitted := encoded(t, `{"ws_url":"wss://x/"}`)
	for _, c := range fieldCases {
		if c.bounds == nil {
			if settings[c.field] {
				t.Errorf("%s is a setting: give its fieldCases row its bounds (within)", c.field)
			}
			continue
		}
		t.Run(c.field, func(t *testing.T) {
			b := c.bounds
			k := kindOf(t, types[c.field])
			body := func(v string) string { return fmt.Sprintf(`{"ws_url":"wss://x/",%q:%s}`, c.field, v) }
			accepts := func(what, v string) {
				t.Helper()
				s, fe := parse(t, body(v))
				if fe != nil {
					t.Errorf("%s %s: refused: %v", what, v, fe)
					return
				}
				enc, err := s.Encode()
				if err != nil {
					t.Fatal(err)
				}
				if _, err := Decode(enc); err != nil {
					t.Errorf("%s %s: admitted, but stored as %s the worker refuses it: %v", what, v, enc, err)
				}
			}
			refuses := func(what, v string) {
				t.Helper()
				_, fe := parse(t, body(v))
				switch {
				case fe == nil:
					t.Errorf("%s %s: accepted", what, v)
				case fe.Field != c.field || fe.Code() != source.FieldCode(c.field):
					t.Errorf("%s %s: refused as %s %s (%v), want %s", what, v, fe.Field, fe.Code(), fe, source.FieldCode(c.field))
				}
			}

			accepts("the lowest", k.step(t, b.lowest, 0))
			accepts("the highest", k.step(t, b.highest, 0))
			if below, ok := k.below(t, b.lowest); ok {
				refuses("one below the lowest", below)
			}
			above := k.step(t, b.highest, +1)
			refuses("one above the highest", above)
			// The run rule is not the admission: a value stored under a
			// looser limit runs (docs/guides/start-field.md, "A run rule
			// that re-admits"), unless a worker cannot run it at all.
			runs := func(what, v string) {
				t.Helper()
				if _, err := Decode(body(v)); err != nil {
					t.Errorf("%s %s, stored under a looser limit: the worker refuses it: %v", what, v, err)
				}
			}
			runs("one above the highest", above)
			if below, ok := k.below(t, b.lowest); ok && !strings.HasPrefix(below, "-") {
				runs("one below the lowest", below)
			}
			switch b.zero {
			case zeroIsDefault:
				if got := encoded(t, body(k.zero)); got != omitted {
					t.Errorf("an explicit %s is stored as %s, not as the default (%s)", k.zero, got, omitted)
				}
			case zeroRefused:
				refuses("an explicit zero", k.zero)
			}

			row := docRow(t, string(doc), c.field)
			for _, v := range []string{b.lowest, b.highest} {
				if !strings.Contains(row, "`"+v+"`") {
					t.Errorf("docs/api.md's row of %s does not quote its bound `%s`: %s", c.field, v, row)
				}
			}
		})
	}
}

// boundKind is how a field's bounds become JSON values, by its Go type.
type boundKind struct {
	zero string // the explicit zero value
	// step is the value v (as a row writes it) moved by d steps, in JSON.
	step func(t *testing.T, v string, d int) string
	// allowsBelow: the value one below the lowest exists (a list has no
	// length below 0).
	allowsBelow func(lowest string) bool
}

func (k boundKind) below(t *testing.T, lowest string) (string, bool) {
	if !k.allowsBelow(lowest) {
		return "", false
	}
	return k.step(t, lowest, -1), true
}

// kindOf is the bound kind of a field of Go type ft.
func kindOf(t *testing.T, ft reflect.Type) boundKind {
	t.Helper()
	switch ft.Kind() {
	case reflect.Int, reflect.Int32, reflect.Int64:
		return boundKind{zero: "0", step: func(t *testing.T, v string, d int) string {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("bound %q of a number: %v", v, err)
			}
			return strconv.FormatInt(n+int64(d), 10)
		}, allowsBelow: func(string) bool { return true }}
	case reflect.String:
		return boundKind{zero: `""`, step: func(t *testing.T, v string, d int) string {
			n, err := time.ParseDuration(v)
			if err != nil {
				t.Fatalf("bound %q of a string field: a Go duration expected: %v", v, err)
			}
			return strconv.Quote((n + time.Duration(d)).String())
		}, allowsBelow: func(string) bool { return true }}
	case reflect.Slice:
		if ft.Elem().Kind() != reflect.String {
			break
		}
		return boundKind{zero: "[]", step: func(t *testing.T, v string, d int) string {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("bound %q of a list: its length expected: %v", v, err)
			}
			items := make([]string, n+d)
			for i := range items {
				items[i] = "v" + strconv.Itoa(i)
			}
			j, _ := json.Marshal(items)
			return string(j)
		}, allowsBelow: func(lowest string) bool { return lowest != "0" }}
	}
	t.Fatalf("bounds of a %s field: teach kindOf its kind", ft)
	return boundKind{}
}

// docRow is the row of the start field table in doc whose first cell names
// field.
func docRow(t *testing.T, doc, field string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "| Field | Required | Meaning |\n")
	if !ok {
		t.Fatal("docs/api.md has no start field table")
	}
	for _, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if cells := strings.Split(line, "|"); len(cells) > 2 && strings.Contains(cells[1], "`"+field+"`") {
			return line
		}
	}
	t.Fatalf("docs/api.md's start field table has no row for %s", field)
	return ""
}
