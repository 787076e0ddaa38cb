package metrics

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

func TestFlushWritesOneEMFLine(t *testing.T) {
	r := NewRegistry("wsfleet", map[string]string{"Service": "streamer", "Environment": "dev"})
	var buf bytes.Buffer
	if n, err := r.Flush(&buf, time.Now()); n != 0 || err != nil || buf.Len() != 0 {
		t.Fatalf("empty flush wrote %d metrics, %v, %q", n, err, buf.String())
	}
	r.Add("Acquired", 1)
	r.Add("Acquired", 2)
	r.Set("OwnedSessions", 7)
	r.ObserveDuration("RenewLatencyMs", 1500*time.Microsecond)
	if n, err := r.Flush(&buf, time.UnixMilli(42)); n != 3 || err != nil {
		t.Fatalf("flush: %d, %v", n, err)
	}
	var line map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &line); err != nil {
		t.Fatalf("not one JSON line: %v: %s", err, buf.String())
	}
	if line["Acquired"] != 3.0 || line["OwnedSessions"] != 7.0 || line["Service"] != "streamer" {
		t.Fatalf("values: %v", line)
	}
	if v := line["RenewLatencyMs"].([]any); len(v) != 1 || v[0] != 1.5 {
		t.Fatalf("samples: %v", v)
	}
	aws := line["_aws"].(map[string]any)
	if aws["Timestamp"] != 42.0 {
		t.Fatalf("timestamp %v", aws["Timestamp"])
	}
	cwm := aws["CloudWatchMetrics"].([]any)[0].(map[string]any)
	if cwm["Namespace"] != "wsfleet" || len(cwm["Metrics"].([]any)) != 3 {
		t.Fatalf("directive: %v", cwm)
	}
	// Counters reset, gauges persist.
	buf.Reset()
	if n, _ := r.Flush(&buf, time.Now()); n != 1 {
		t.Fatalf("second flush wrote %d metrics, want the gauge only", n)
	}
}

func TestObserveKeepsABoundedSample(t *testing.T) {
	r := NewRegistry("wsfleet", nil)
	for i := 0; i < 10_000; i++ {
		r.Observe("RenewLatencyMs", float64(i), Milliseconds)
	}
	var buf bytes.Buffer
	if _, err := r.Flush(&buf, time.Now()); err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &line); err != nil {
		t.Fatal(err)
	}
	vs := line["RenewLatencyMs"].([]any)
	if len(vs) != MaxSamples {
		t.Fatalf("%d samples kept, want %d", len(vs), MaxSamples)
	}
	late := 0
	for _, v := range vs {
		if v.(float64) >= 5000 {
			late++
		}
	}
	if late < 20 || late > 80 { // a uniform sample has about half from the second half
		t.Fatalf("%d of %d samples from the second half: not uniform", late, MaxSamples)
	}
}
