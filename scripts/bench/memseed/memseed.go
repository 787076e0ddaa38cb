// Package memseed is the one definition, between bin/memstreamer and the
// bench that runs it, of how the worker reports the table it seeded: the
// in-memory lease store that stands in for DynamoDB's table, whose live
// heap the bench takes out of the worker's memory per session (the shipped
// worker keeps no table in its process).
package memseed

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
)

// The worker's log line after seeding, and its field: the live heap the
// seeded table took, in bytes.
const (
	SeededMsg       = "memory store seeded"
	StoreBytesField = "store_bytes"
)

// StoreBytes reads the seeded table's live heap from the worker's log
// (zerolog JSON lines); found is false when no line reports it.
func StoreBytes(logPath string) (n int64, found bool, err error) {
	f, err := os.Open(logPath)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil || line["message"] != SeededMsg {
			continue
		}
		if b, ok := line[StoreBytesField].(float64); ok {
			return int64(b), true, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, false, fmt.Errorf("read %s: %w", logPath, err)
	}
	return 0, false, nil
}
