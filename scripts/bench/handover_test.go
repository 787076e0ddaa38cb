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

func TestHandoffSteps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	log := `{"level":"info","message":"lease released","release_ms":12.5,"publish_ms":1.25,"handed_off":true}
{"level":"info","message":"lease released","release_ms":3}
{"level":"warn","message":"hand-off notification (reconciliation will find the released lease)","handed_off":true}
{"level":"info","message":"lease released","release_ms":80,"publish_ms":2,"handed_off":true}
`
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	rel, pub, err := handoffSteps(path)
	if err != nil || len(rel) != 2 || rel[0] != 12.5 || rel[1] != 80 || len(pub) != 2 || pub[0] != 1.25 {
		t.Fatalf("release %v publish %v %v", rel, pub, err)
	}
}
