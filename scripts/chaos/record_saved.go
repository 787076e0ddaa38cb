// The evidence on disk (what `chaos -rejudge` reads) and the JSON files a
// run writes.

package chaos

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
)

// Saved is a run's evidence with the settings and plan it ran under: what
// `chaos -rejudge` reads to judge and draw a run again.
type Saved struct {
	Settings Settings `json:"settings"`
	Plan     Plan     `json:"plan"`
	Evidence Evidence `json:"evidence"`
}

// EvidenceFile is where Run keeps the evidence, under the stack's folder.
const EvidenceFile = "evidence.json.gz"

// SaveEvidence writes s to path as gzipped JSON.
func SaveEvidence(path string, s Saved) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("save evidence: %w", err)
	}
	zw := gzip.NewWriter(f)
	if err := json.NewEncoder(zw).Encode(s); err != nil {
		f.Close()
		return fmt.Errorf("save evidence: %w", err)
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return fmt.Errorf("save evidence: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save evidence: %w", err)
	}
	return nil
}

// LoadEvidence reads what SaveEvidence wrote.
func LoadEvidence(path string) (Saved, error) {
	var s Saved
	f, err := os.Open(path)
	if err != nil {
		return s, fmt.Errorf("load evidence: %w", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return s, fmt.Errorf("load evidence %s: %w", path, err)
	}
	defer zr.Close()
	if err := json.NewDecoder(zr).Decode(&s); err != nil {
		return s, fmt.Errorf("load evidence %s: %w", path, err)
	}
	return s, nil
}

// writeJSONFile writes v as indented JSON.
func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
