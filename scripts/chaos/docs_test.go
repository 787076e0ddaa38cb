// The docs against the code: the make demo summary pasted in
// docs/local-stack.md against PrintSummary; docs/chaos.md's check table
// against checkRules.

package chaos

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

var docNumber = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)

// numbersOut is s with every number N and every run of spaces one space:
// a line's form, its figures aside.
func numbersOut(s string) string {
	return docNumber.ReplaceAllString(strings.Join(strings.Fields(s), " "), "N")
}

// fieldStarts are the offsets (in runes) where the space-separated fields of
// a line start.
func fieldStarts(s string) []int { return starts(s, 1) }

// cellStarts are the offsets (in runes) of the cells of a fixed-width row:
// the fields after at least two spaces (a cell such as "222 ms" has one).
func cellStarts(s string) []int { return starts(s, 2) }

func starts(s string, gap int) []int {
	var out []int
	spaces := gap
	for i, r := range []rune(s) {
		if r != ' ' && spaces >= gap {
			out = append(out, i)
		}
		if r == ' ' {
			spaces++
		} else {
			spaces = 0
		}
	}
	return out
}

// summaryParts splits a printed summary, from its "=== wsfleet chaos" line
// to its RESULT line, into the title, the fault-kind table (header, rows),
// the check lines and the RESULT line ("fault kinds not injected" is left
// out: a real demo injects every kind of its plan).
func summaryParts(lines []string) (title, header string, rows, checks []string, result string) {
	part := 0
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "=== wsfleet chaos"):
			title, part = l, 1
		case strings.HasPrefix(l, "RESULT:"):
			result = l
		case strings.HasPrefix(l, "fault kinds not injected"), part == 0:
		case l == "":
			if part == 1 || part == 2 {
				part = 3
			}
		case part == 1:
			header, part = l, 2
		case part == 2:
			rows = append(rows, l)
		case part == 3:
			checks = append(checks, l)
		}
	}
	return title, header, rows, checks, result
}

// TestDocsShowTheDemoSummary keeps the make demo summary pasted in
// docs/local-stack.md (a real run) the summary PrintSummary prints. It
// renders the summary of a fixed, passing run of the demo plan (the check
// tests' scenario) and checks the doc's block: the title line, numbers
// aside (the duration and the count of faults change per run); the
// fault-kind table's header as printed, one row per kind of the demo plan
// in its order, each row's fields at the rendered row's columns and of its
// form (numbers aside: the recovery times change per run); one line per
// check, every check in report order, "ok" and the figures at the rendered
// columns (the figures themselves change per run and are not compared);
// and the RESULT line of a passing run.
func TestDocsShowTheDemoSummary(t *testing.T) {
	b, err := os.ReadFile("../../docs/local-stack.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "\n=== wsfleet chaos: the demo plan")
	j := strings.Index(doc[max(i, 0):], "\nRESULT: ")
	if i < 0 || j < 0 {
		t.Fatal("docs/local-stack.md shows no make demo summary (=== wsfleet chaos: the demo plan … RESULT: …)")
	}
	end := i + j + 1 + strings.Index(doc[i+j+1:], "\n")
	docTitle, docHeader, docRows, docChecks, docResult := summaryParts(strings.Split(doc[i+1:end], "\n"))

	s := newScenario()
	res := Analyze(s.ev, s.set, Plan{Name: PlanDemo, Seed: 1})
	if !res.OK() {
		t.Fatalf("the fixed run fails: %v", res.Violations)
	}
	var out strings.Builder
	PrintSummary(&out, res)
	title, header, rows, checks, result := summaryParts(strings.Split(out.String(), "\n"))

	if numbersOut(docTitle) != numbersOut(title) {
		t.Errorf("title\n%s\nPrintSummary prints (numbers aside)\n%s", docTitle, title)
	}
	if docHeader != header {
		t.Errorf("fault-kind table header\n%s\nPrintSummary prints\n%s", docHeader, header)
	}
	kinds := func(rows []string) []string {
		var out []string
		for _, r := range rows {
			out = append(out, strings.Fields(r)[0])
		}
		return out
	}
	if !reflect.DeepEqual(kinds(docRows), kinds(rows)) {
		t.Errorf("fault kinds %q, the demo plan's %q", kinds(docRows), kinds(rows))
	}
	// The forms of a row, kind aside: with recovery times, or "–" without.
	forms := map[string][]int{}
	for _, r := range rows {
		_, rest, _ := strings.Cut(r, " ")
		forms[numbersOut(rest)] = cellStarts(r)
	}
	for _, r := range docRows {
		_, rest, _ := strings.Cut(r, " ")
		at, ok := forms[numbersOut(rest)]
		if !ok {
			t.Errorf("fault-kind row %q: none of PrintSummary's forms %q", r, reflect.ValueOf(forms).MapKeys())
		} else if got := cellStarts(r); !reflect.DeepEqual(got, at) {
			t.Errorf("fault-kind row %q: cells at columns %v, PrintSummary's at %v", r, got, at)
		}
	}
	names := func(lines []string) []string {
		var out []string
		for _, l := range lines {
			out = append(out, strings.Fields(l)[0])
		}
		return out
	}
	if !reflect.DeepEqual(names(docChecks), names(checks)) {
		t.Errorf("checks %q, PrintSummary prints %q", names(docChecks), names(checks))
	}
	want := fieldStarts(checks[0])[:3]
	for _, l := range docChecks {
		f := strings.Fields(l)
		if len(f) < 3 || f[1] != "ok" || !reflect.DeepEqual(fieldStarts(l)[:3], want) {
			t.Errorf("check line %q: want the name, ok and the figures at columns %v", l, want)
		}
	}
	if docResult != result {
		t.Errorf("result line %q, PrintSummary prints %q", docResult, result)
	}
}

// TestDocsTableEveryCheck: docs/chaos.md's check table ("## The checks")
// has a row for every check in checkRules (a row may name several), and
// names no other.
func TestDocsTableEveryCheck(t *testing.T) {
	b, err := os.ReadFile("../../docs/chaos.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## The checks\n")
	if !ok {
		t.Fatal(`docs/chaos.md has no "## The checks" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	documented := map[string]bool{}
	for _, l := range strings.Split(section, "\n") {
		cells := strings.Split(l, " | ")
		if !strings.HasPrefix(l, "| ") || len(cells) < 2 || l == "| check | holds |" {
			continue
		}
		for _, name := range strings.Split(strings.TrimPrefix(cells[0], "| "), ", ") {
			documented[name] = true
		}
	}
	known := map[string]bool{}
	for _, c := range checkRules {
		known[c.name] = true
		if !documented[c.name] {
			t.Errorf("docs/chaos.md's check table has no row for %q", c.name)
		}
	}
	for name := range documented {
		if !known[name] {
			t.Errorf("docs/chaos.md's check table has a row for %q, no check in checkRules", name)
		}
	}
}
