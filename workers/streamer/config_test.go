package streamer

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/netguard"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
)

// The kinesis sink needs its stream, and batch bounds are checked against
// the chosen sink's limits (sqs: 10 entries; kinesis: 500); an unbatched
// sqs sink ignores them.
func TestSinkSettingsAreValidated(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want []string // "" = valid
	}{
		{map[string]string{schema.EnvSink: "kinesis"}, []string{"WSFLEET_SINK=kinesis needs WSFLEET_OUTPUT_STREAM"}},
		{map[string]string{schema.EnvSink: "kinesis", schema.EnvOutputStream: "s", schema.EnvSinkMaxBatch: "500"}, nil},
		{map[string]string{schema.EnvSink: "sqs", schema.EnvOutputQueueURL: "q", schema.EnvSinkMaxBatch: "11", schema.EnvSinkBufferBytes: "10"},
			[]string{"batch max count 11", "session buffer 10 bytes"}},
		{map[string]string{schema.EnvSink: "sqs", schema.EnvOutputQueueURL: "q", schema.EnvSinkBatching: "false", schema.EnvSinkMaxBatch: "11"}, nil},
		{map[string]string{schema.EnvSink: "firehose"}, []string{"want stdout, sqs, kinesis or discard"}},
	} {
		c, err := ConfigFromEnv(environ(tc.env))
		if err != nil {
			t.Fatal(err)
		}
		err = c.Validate()
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%v: %v", tc.env, err)
			}
			continue
		}
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %v lacks %q", tc.env, err, w)
			}
		}
	}
}

// environ is m as KEY=VALUE pairs (os.Environ's form).
func environ(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

func TestDefaultConfigIsValid(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if lc := c.LeaseConfig(); lc.HeartbeatEvery != time.Second || lc.CheckpointEvery != time.Minute || lc.TTL != 10*time.Second || lc.Owner != c.WorkerID {
		t.Fatalf("lease config %+v", lc)
	}
	if c.DialsPerHost != 5 {
		t.Fatalf("default dials per host %v, want 5 (issue 15: a failover must not get the fleet banned)", c.DialsPerHost)
	}
	if c.WorkerID == DefaultConfig().WorkerID {
		t.Fatal("two default worker ids are equal: a restart would reuse its predecessor's owner id")
	}
}

func TestConfigFromEnv(t *testing.T) {
	c, err := ConfigFromEnv(environ(map[string]string{
		schema.EnvWorkerID: "w-7", schema.EnvLeaseTTL: "6s", schema.EnvHeartbeatEvery: "500ms", schema.EnvCheckpointEvery: "30s",
		schema.EnvSafetyMargin: "1s", schema.EnvReconcileEvery: "2s", schema.EnvMaxSessions: "42", schema.EnvClaimsPerSecond: "12.5",
		schema.EnvShutdownDeadline: "20s", schema.EnvShutdownInFlight: "4", schema.EnvAdminAddr: "0.0.0.0:9000", schema.EnvSink: "sqs",
		schema.EnvOutputQueueURL: "https://q/out.fifo", schema.EnvTableName: "t", schema.EnvQueueURL: "https://q/work",
		schema.EnvLogLevel: "DEBUG", schema.EnvMetricsNS: "ns", schema.EnvEnvironment: "prod",
		EnvDialTimeout: "3s", EnvPingEvery: "20s", EnvPingTimeout: "5s", EnvCloseGrace: "2s", EnvReconnectMin: "50ms",
		EnvReconnectMax: "1m", EnvReadLimit: "65536", EnvMetricsEvery: "30s", EnvQueueWait: "15s", EnvSinkAttempts: "5",
		EnvStoreRPCTimeout: "1500ms", EnvMaxDialFailures: "7", schema.EnvDialsPerHost: "2.5", schema.EnvRepoRoot: "/repo", "OTHER_SETTING": "x",
		schema.EnvSinkMaxDelay: "20ms", schema.EnvSinkMaxBatch: "5", schema.EnvSinkMaxBatchBytes: "1048576",
		schema.EnvSinkInFlight: "8", schema.EnvSinkBufferBytes: "2097152",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	want := Config{
		WorkerID: "w-7", LeaseTTL: 6 * time.Second, HeartbeatEvery: 500 * time.Millisecond, CheckpointEvery: 30 * time.Second,
		MaxConcurrentWrites: 64, SafetyMargin: time.Second, RebalanceEvery: 10 * time.Second, MinHold: time.Minute, StoreTimeout: 1500 * time.Millisecond, ReconcileEvery: 2 * time.Second, MaxSessions: 42,
		ClaimsPerSecond: 12.5, QueueWait: 15 * time.Second, DialTimeout: 3 * time.Second, PingEvery: 20 * time.Second,
		PingTimeout: 5 * time.Second, CloseGrace: 2 * time.Second, ReconnectMin: 50 * time.Millisecond, ReconnectMax: time.Minute,
		ReadLimit: 65536, SinkAttempts: 5, MaxDialFailures: 7, DialsPerHost: 2.5, ShutdownDeadline: 20 * time.Second, ShutdownInFlight: 4, AdminAddr: "0.0.0.0:9000", MetricsEvery: 30 * time.Second,
		MetricsNamespace: "ns", Environment: "prod", LogLevel: "DEBUG", Sink: "sqs", TableName: "t", QueueURL: "https://q/work",
		OutputQueueURL: "https://q/out.fifo", AllowPrivateIPs: netguard.None, SinkBatching: true, Batch: batch.DefaultConfig(),
	}
	want.Batch.MaxDelay, want.Batch.MaxCount, want.Batch.MaxBytes, want.Batch.MaxInFlight, want.Batch.SessionBufferBytes = 20*time.Millisecond, 5, 1<<20, 8, 2<<20
	want.Batch.RequestTimeout, want.Batch.BufferBudget = 0, 0 // derived (Resolved)
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got  %+v\nwant %+v", c, want)
	}
}

// A WSFLEET_ variable the worker does not read is a Validate error naming
// the closest known one; every such variable is reported at once, with the
// other problems, never with its value; tool variables and a binary's own
// (accept) are no error.
func TestUnknownVariablesAreValidateErrors(t *testing.T) {
	env := map[string]string{"WSFLEET_LEASE_TT": "6s", "WSFLEET_SINKK": "secret-value", schema.EnvSigningSecret: "x",
		schema.EnvMaxSessions: "0", schema.EnvRepoRoot: "/r", schema.EnvAPI: "http://x"}
	c, err := ConfigFromEnv(environ(env))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate()
	for _, want := range []string{
		"unknown variable WSFLEET_LEASE_TT (did you mean WSFLEET_LEASE_TTL?)",
		"unknown variable WSFLEET_SINKK (did you mean WSFLEET_SINK?)",
		"unknown variable " + schema.EnvSigningSecret + "\n", // ingest's, far from every worker name
		schema.EnvMaxSessions + " must be at least 1",
	} {
		if err == nil || !strings.Contains(err.Error()+"\n", want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if err != nil && (strings.Contains(err.Error(), "secret-value") || strings.Contains(err.Error(), schema.EnvRepoRoot)) {
		t.Errorf("a value or a tool variable in the error: %v", err)
	}
	offset := []string{"WSFLEET_TEST_CLOCK_OFFSET=1s"}
	if c, _ := ConfigFromEnv(offset); c.Validate() == nil {
		t.Error("a chaos-build variable accepted without accept")
	}
	if c, _ := ConfigFromEnv(offset, "WSFLEET_TEST_CLOCK_OFFSET"); c.Validate() != nil {
		t.Errorf("an accepted variable refused: %v", c.Validate())
	}
}

func TestConfigFromEnvReportsEveryBadValue(t *testing.T) {
	_, err := ConfigFromEnv(environ(map[string]string{schema.EnvLeaseTTL: "ten", schema.EnvMaxSessions: "many", schema.EnvClaimsPerSecond: "fast"}))
	if err == nil {
		t.Fatal("no error")
	}
	for _, name := range []string{schema.EnvLeaseTTL, schema.EnvMaxSessions, schema.EnvClaimsPerSecond} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
}

func TestConfigEmptyValuesKeepDefaults(t *testing.T) {
	c, err := ConfigFromEnv(environ(map[string]string{schema.EnvLeaseTTL: "  ", schema.EnvSink: ""}))
	if err != nil || c.LeaseTTL != 10*time.Second || c.Sink != SinkStdout {
		t.Fatalf("%v %+v", err, c)
	}
}

// TestEmptyAdminAddrDisablesTheAdminServer: WSFLEET_ADMIN_ADDR set to ""
// turns the admin server off (unset keeps the default), as documented.
func TestEmptyAdminAddrDisablesTheAdminServer(t *testing.T) {
	c, err := ConfigFromEnv(environ(map[string]string{schema.EnvAdminAddr: ""}))
	if err != nil || c.AdminAddr != "" {
		t.Fatalf("empty: %v %q", err, c.AdminAddr)
	}
	c, err = ConfigFromEnv(environ(map[string]string{}))
	if err != nil || c.AdminAddr != DefaultConfig().AdminAddr || c.AdminAddr == "" {
		t.Fatalf("unset: %v %q", err, c.AdminAddr)
	}
}

func TestValidateRejects(t *testing.T) {
	cases := map[string]func(*Config){
		"lease timings":            func(c *Config) { c.LeaseTTL, c.HeartbeatEvery = 2*time.Second, 2*time.Second },
		"checkpoint interval":      func(c *Config) { c.CheckpointEvery = 0 },
		"concurrent writes":        func(c *Config) { c.MaxConcurrentWrites = 0 },
		"margin":                   func(c *Config) { c.SafetyMargin = 0 },
		schema.EnvReconcileEvery:   func(c *Config) { c.ReconcileEvery = 0 },
		schema.EnvMaxSessions:      func(c *Config) { c.MaxSessions = 0 },
		schema.EnvClaimsPerSecond:  func(c *Config) { c.ClaimsPerSecond = 0 },
		schema.EnvDialsPerHost:     func(c *Config) { c.DialsPerHost = -1 },
		schema.EnvShutdownDeadline: func(c *Config) { c.ShutdownDeadline = time.Second },
		schema.EnvShutdownInFlight: func(c *Config) { c.ShutdownInFlight = 0 },
		EnvQueueWait:               func(c *Config) { c.QueueWait = 30 * time.Second },
		EnvPingTimeout:             func(c *Config) { c.PingTimeout = c.PingEvery },
		"ReadLimit":                func(c *Config) { c.ReadLimit = 10 },
		"backoff":                  func(c *Config) { c.ReconnectMin, c.ReconnectMax = time.Second, time.Millisecond },
		schema.EnvLogLevel:         func(c *Config) { c.LogLevel = "loud" },
		schema.EnvSink:             func(c *Config) { c.Sink = "kafka" },
		schema.EnvOutputQueueURL:   func(c *Config) { c.Sink = SinkSQS },
		schema.EnvTableName:        func(c *Config) { c.TableName = "" },
		EnvMetricsEvery:            func(c *Config) { c.MetricsEvery = 0 },
		"worker id":                func(c *Config) { c.WorkerID = "" },
		EnvMaxDialFailures:         func(c *Config) { c.MaxDialFailures = -1 },
	}
	for name, mod := range cases {
		c := DefaultConfig()
		mod(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestAddressPolicyFromEnv(t *testing.T) {
	if DefaultConfig().AllowPrivateIPs != netguard.None {
		t.Fatal("the default must refuse private and loopback addresses")
	}
	c, err := ConfigFromEnv(environ(map[string]string{schema.EnvAllowPrivateIPs: "Loopback"}))
	if err != nil || c.AllowPrivateIPs != netguard.Loopback {
		t.Fatalf("loopback: %v %v", c.AllowPrivateIPs, err)
	}
	if _, err := ConfigFromEnv(environ(map[string]string{schema.EnvAllowPrivateIPs: "everything"})); err == nil || !strings.Contains(err.Error(), schema.EnvAllowPrivateIPs) {
		t.Fatalf("a bad policy was accepted: %v", err)
	}
}

// Issue 22: the sink request timeout defaults to half the safety margin and
// may not exceed it; the sink buffer budget defaults to a quarter of the
// memory limit; MaxSessions × ReadLimit + the budget must fit the limit.
func TestSinkBoundsAreDerivedAndChecked(t *testing.T) {
	c, err := ConfigFromEnv([]string{schema.EnvSafetyMargin + "=2s", schema.EnvMaxSessions + "=300"})
	if err != nil {
		t.Fatal(err)
	}
	c.MemoryLimit = 1 << 30
	r := c.Resolved()
	if r.Batch.RequestTimeout != time.Second || r.Batch.BufferBudget != 256<<20 || r.sessionConfig().SinkTimeout != time.Second {
		t.Fatalf("derived request timeout %s, budget %d", r.Batch.RequestTimeout, r.Batch.BufferBudget)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.MemoryLimit = 0
	if got := c.Resolved().Batch.BufferBudget; got != DefaultBufferBudget {
		t.Fatalf("budget with no known limit %d", got)
	}
	bad, err := ConfigFromEnv([]string{schema.EnvSafetyMargin + "=2s", schema.EnvSinkRequestTimeout + "=1500ms",
		schema.EnvMaxSessions + "=1000", schema.EnvSinkPermanentAttempts + "=0", schema.EnvSink + "=sqs", schema.EnvOutputQueueURL + "=https://q/out"})
	if err != nil {
		t.Fatal(err)
	}
	bad.MemoryLimit = 512 << 20
	err = bad.Validate()
	for _, want := range []string{schema.EnvSinkRequestTimeout, "exceeds the memory limit", "permanent attempts"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q missing from %v", want, err)
		}
	}
}
