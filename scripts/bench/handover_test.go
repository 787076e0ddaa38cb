package bench

import (
	"os"
	"path/filepath"
	"testing"
)

func TestClaimLatencies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	log := `{"level":"info","message":"worker started"}
{"Acquired":3,"ClaimLatencyMs":[20,50.5,7],"Service":"streamer"}
{"Acquired":1,"ClaimLatencyMs":12,"Service":"streamer"}
{"Acquired":0,"Service":"streamer"}
not json "ClaimLatencyMs"
`
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := claimLatencies(path)
	if err != nil || len(got) != 4 || got[1] != 50.5 || got[3] != 12 {
		t.Fatalf("%v %v", got, err)
	}
}
