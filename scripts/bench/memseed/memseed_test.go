package memseed

import (
	"os"
	"path/filepath"
	"testing"
)

func TestStoreBytesIsReadFromTheSeededLine(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	log := write("w.log", `not json
{"level":"info","message":"worker started"}
{"level":"info","sessions":3,"`+StoreBytesField+`":123456,"message":"`+SeededMsg+`"}
`)
	n, found, err := StoreBytes(log)
	if err != nil || !found || n != 123456 {
		t.Fatalf("%d %v %v", n, found, err)
	}
	// A worker that never said it: not found (the bench then fails the run).
	if _, found, err := StoreBytes(write("none.log", `{"message":"`+SeededMsg+`"}`+"\n")); err != nil || found {
		t.Fatalf("found %v, err %v", found, err)
	}
	if _, _, err := StoreBytes(filepath.Join(dir, "missing.log")); err == nil {
		t.Fatal("no error for a missing log")
	}
}
