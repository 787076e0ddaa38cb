package devstack

import (
	"fmt"
	"os"
	"path/filepath"
)

// Fresh forgets every session of the state folder dir (--fresh): it deletes
// the data folder but for its run counter, so the next run takes new worker
// ids, and the sink files, so no old line mixes with the new ones. Take the
// folder's Lock first.
func Fresh(dir string) error {
	data := filepath.Join(dir, "data")
	entries, err := os.ReadDir(data)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("fresh: %w", err)
	}
	for _, e := range entries {
		if e.Name() == runFile {
			continue
		}
		if err := os.RemoveAll(filepath.Join(data, e.Name())); err != nil {
			return fmt.Errorf("fresh: %w", err)
		}
	}
	sinks, err := filepath.Glob(filepath.Join(dir, "logs", "worker-*.sink.jsonl"))
	if err != nil {
		return fmt.Errorf("fresh: %w", err)
	}
	for _, p := range sinks {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("fresh: %w", err)
		}
	}
	return nil
}
