// Tests of the outputs (report, timeline, saved evidence).

package chaos

import (
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The outputs: the report names every fault kind and check, and the SVG is
// well-formed XML with a row per session.
func TestOutputs(t *testing.T) {
	s := newScenario()
	s.ev.Faults = append(s.ev.Faults, Fault{N: 2, Kind: KindDynamoDown, Start: at(12), End: at(14)})
	res := s.judge()
	dir := t.TempDir()
	if err := WriteOutputs(dir, res, s.ev); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range append([]string{"## Recovery time per fault kind", "## Checks", "## Violations", "timeline.svg"}, checkNames()...) {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	f, err := os.Open(filepath.Join(dir, TimelineFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	texts := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("timeline.svg is not well-formed: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "text" {
			texts++
		}
	}
	if texts < 10 {
		t.Fatalf("%d text elements", texts)
	}
	if _, err := os.Stat(filepath.Join(dir, ResultFile)); err != nil {
		t.Fatal(err)
	}
	// The saved evidence judges the same way again.
	path := filepath.Join(dir, EvidenceFile)
	if err := SaveEvidence(path, Saved{Settings: s.set, Plan: Plan{Seed: 1}, Evidence: s.ev}); err != nil {
		t.Fatal(err)
	}
	saved, err := LoadEvidence(path)
	if err != nil {
		t.Fatal(err)
	}
	again := Analyze(saved.Evidence, saved.Settings, saved.Plan)
	if again.Totals != res.Totals || len(again.Violations) != len(res.Violations) {
		t.Fatalf("re-judged %+v, judged %+v", again.Totals, res.Totals)
	}
}

func checkNames() []string {
	var out []string
	for _, c := range checkRules {
		out = append(out, c.name)
	}
	return out
}
