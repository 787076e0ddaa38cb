package schema

import (
	"strings"
	"testing"
)

func TestEnvListsHaveNoDuplicatesAndThePrefix(t *testing.T) {
	for name, list := range map[string][]string{"worker": WorkerEnv(), "ingest": IngestEnv(), "tools": ToolEnv()} {
		seen := map[string]bool{}
		for _, v := range list {
			if !strings.HasPrefix(v, EnvPrefix) || seen[v] {
				t.Errorf("%s: %q repeated or without the prefix", name, v)
			}
			seen[v] = true
		}
	}
}
