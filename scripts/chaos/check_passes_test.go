// The registry of the judge's passes against the check names: every check
// has its rule and its passes, every pass runs after those it reads.

package chaos

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// checkConstants are the package's Check* string constants, name → value,
// read from its source (a new constant is seen without being listed).
func checkConstants(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Check") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Errorf("%s: %s is not a string literal", f, n.Name)
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out[n.Name] = v
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no Check* constants found")
	}
	return out
}

// TestEveryCheckHasItsRuleAndItsPasses: every Check* constant is in
// checkRules once and declared by exactly one pass, or by the passes
// sharedChecks names for it; every check a pass declares is in checkRules.
func TestEveryCheckHasItsRuleAndItsPasses(t *testing.T) {
	rules := map[string]int{}
	for _, r := range checkRules {
		rules[r.name]++
		if r.rule == "" {
			t.Errorf("check %q has no rule", r.name)
		}
	}
	declaring := map[string][]string{}
	for _, p := range passes {
		for _, c := range p.checks {
			if slices.Contains(declaring[c], p.name) {
				t.Errorf("pass %s declares %q twice", p.name, c)
				continue
			}
			declaring[c] = append(declaring[c], p.name)
			if rules[c] == 0 {
				t.Errorf("pass %s declares %q, a check without a rule in checkRules", p.name, c)
			}
		}
	}
	consts := checkConstants(t)
	values := map[string]bool{}
	for name, c := range consts {
		values[c] = true
		if rules[c] != 1 {
			t.Errorf("%s (%q) is in checkRules %d times, want once", name, c, rules[c])
		}
		want, shared := sharedChecks[c]
		got := declaring[c]
		switch {
		case shared && !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))):
			t.Errorf("%s (%q) is declared by the passes %v, sharedChecks says %v", name, c, got, want)
		case shared && len(want) < 2:
			t.Errorf("%s (%q) is in sharedChecks with the passes %v: a shared check has two or more", name, c, want)
		case !shared && len(got) != 1:
			t.Errorf("%s (%q) is declared by the passes %v, want exactly one (or the passes in sharedChecks)", name, c, got)
		}
	}
	for _, r := range checkRules {
		if !values[r.name] {
			t.Errorf("checkRules has %q, no Check* constant", r.name)
		}
	}
	for c := range sharedChecks {
		if !values[c] {
			t.Errorf("sharedChecks has %q, no Check* constant", c)
		}
	}
}

// TestPassesRunAfterWhatTheyRead: pass names are unique, each pass has a
// func and checks, and every pass it runs after is registered before it.
func TestPassesRunAfterWhatTheyRead(t *testing.T) {
	pos := map[string]int{}
	for i, p := range passes {
		if _, dup := pos[p.name]; dup {
			t.Errorf("pass %s registered twice", p.name)
		}
		pos[p.name] = i
		if p.run == nil || len(p.checks) == 0 {
			t.Errorf("pass %s: a pass has a func and the checks it judges", p.name)
		}
	}
	for i, p := range passes {
		for _, a := range p.after {
			j, ok := pos[a]
			switch {
			case !ok:
				t.Errorf("pass %s runs after %q, no registered pass", p.name, a)
			case j >= i:
				t.Errorf("pass %s runs after %s, registered at %d, not before it (%d)", p.name, a, j, i)
			}
		}
	}
}

// TestViolateHoldsAPassToItsChecks: under declaredOnly (every test of the
// package, TestMain), a pass filing a violation of a check it does not
// declare panics; the planted-violation tests run every pass under it.
func TestViolateHoldsAPassToItsChecks(t *testing.T) {
	if !declaredOnly {
		t.Fatal("declaredOnly is off: TestMain sets it for the package's tests")
	}
	j := &judge{pass: &pass{name: "stops", checks: []string{CheckStop}}}
	j.violate(CheckStop, "a", 0, "declared")
	if len(j.res.Violations) != 1 {
		t.Fatalf("violations %v, want the declared one", j.res.Violations)
	}
	for _, pj := range []*judge{{pass: j.pass}, {}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("pass %v: a violation of %q it does not declare did not panic", pj.pass, CheckClaim)
				}
			}()
			pj.violate(CheckClaim, "a", 0, "undeclared")
		}()
	}
}
