package envconfig

import (
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/netguard"
	"github.com/wsfleet/wsfleet/shared/schema"
	streamer "github.com/wsfleet/wsfleet/workers/streamer"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/session"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/registry"
)

// environ is m as KEY=VALUE pairs (os.Environ's form).
func environ(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

func TestDefaultIsValid(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.TableName != schema.DefaultTableName || c.Sink.Kind != registry.Stdout || !c.Sink.Batching || c.QueueWait != 10*time.Second {
		t.Fatalf("defaults %+v", c)
	}
}

// The kinesis sink needs its stream, and batch bounds are checked against
// the chosen sink's limits (sqs: 10 entries; kinesis: 500); an unbatched
// sqs sink ignores them.
func TestSinkSettingsAreValidated(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want []string // "" = valid
	}{
		{map[string]string{schema.EnvSink: "kinesis"}, []string{"WSFLEET_SINK=kinesis needs WSFLEET_OUTPUT_STREAM"}},
		{map[string]string{schema.EnvSink: "sqs"}, []string{"WSFLEET_SINK=sqs needs WSFLEET_OUTPUT_QUEUE_URL"}},
		{map[string]string{schema.EnvSink: "kinesis", schema.EnvOutputStream: "s", schema.EnvSinkMaxBatch: "500"}, nil},
		{map[string]string{schema.EnvSink: "kinesis", schema.EnvOutputStream: "s", schema.EnvSinkKinesisAggregateBytes: "0"}, nil},
		{map[string]string{schema.EnvSink: "kinesis", schema.EnvOutputStream: "s", schema.EnvSinkKinesisHashBuckets: "0"}, nil},
		{map[string]string{schema.EnvSink: "kinesis", schema.EnvOutputStream: "s", schema.EnvSinkKinesisAggregateBytes: "1048577", schema.EnvSinkKinesisHashBuckets: "2048", schema.EnvSinkMaxBatch: "501"},
			[]string{"(WSFLEET_SINK_KINESIS_AGGREGATE_BYTES): kinesis aggregated record bound 1048577 bytes", "(WSFLEET_SINK_KINESIS_HASH_BUCKETS): kinesis hash buckets 2048", "batch max count 501"}},
		{map[string]string{schema.EnvSink: "sqs", schema.EnvOutputQueueURL: "q", schema.EnvSinkMaxBatch: "11", schema.EnvSinkBufferBytes: "10"},
			[]string{"WSFLEET_SINK=sqs (WSFLEET_SINK_MAX_BATCH, WSFLEET_SINK_MAX_BATCH_BYTES, WSFLEET_SINK_MAX_DELAY, WSFLEET_SINK_PACK_WAIT, WSFLEET_SINK_IN_FLIGHT, WSFLEET_SINK_BUFFER_BYTES): ",
				"batch max count 11", "session buffer 10 bytes"}},
		{map[string]string{schema.EnvSink: "sqs", schema.EnvOutputQueueURL: "q", schema.EnvSinkBatching: "false", schema.EnvSinkMaxBatch: "11"}, nil},
		{map[string]string{schema.EnvSink: "firehose"}, []string{`WSFLEET_SINK="firehose": want stdout, sqs, kinesis or discard`}},
		{map[string]string{schema.EnvSink: "discard"}, nil},
	} {
		c, err := FromEnv(environ(tc.env))
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

func TestFromEnv(t *testing.T) {
	c, err := FromEnv(environ(map[string]string{
		schema.EnvWorkerID: "w-7", schema.EnvLeaseTTL: "6s", schema.EnvHeartbeatEvery: "500ms", schema.EnvCheckpointEvery: "30s",
		schema.EnvSafetyMargin: "1s", schema.EnvReconcileEvery: "2s", schema.EnvAuditEvery: "10s", schema.EnvMaxSessions: "42", schema.EnvClaimsPerSecond: "12.5",
		schema.EnvShutdownDeadline: "20s", schema.EnvShutdownInFlight: "4", schema.EnvAdminAddr: "0.0.0.0:9000", schema.EnvAdminToken: "fleet-admin-token-0123", schema.EnvSink: "sqs",
		schema.EnvOutputQueueURL: "https://q/out.fifo", schema.EnvTableName: "t", schema.EnvQueueURL: "https://q/work",
		schema.EnvLogLevel: "DEBUG", schema.EnvMetricsNS: "ns", schema.EnvEnvironment: "prod",
		schema.EnvDialTimeout: "3s", schema.EnvPingEvery: "20s", schema.EnvPingTimeout: "5s", schema.EnvCloseGrace: "2s", schema.EnvReconnectMin: "50ms",
		schema.EnvReconnectMax: "1m", schema.EnvReadLimit: "65536", schema.EnvMetricsEvery: "30s", schema.EnvQueueWait: "15s", schema.EnvSinkAttempts: "5",
		schema.EnvStoreRPCTimeout: "1500ms", schema.EnvMaxDialFailures: "7", schema.EnvDialsPerHost: "2.5", schema.EnvDialLimits: "stream.binance.com=300/5m", schema.EnvHandshakesInFlight: "8", schema.EnvHandshakesPerHost: "4", schema.EnvSwitchBufferBudget: "8388608", schema.EnvLargeFrameBudget: "4194304", schema.EnvRepoRoot: "/repo", "OTHER_SETTING": "x",
		schema.EnvSinkMaxDelay: "20ms", schema.EnvSinkPackWait: "60ms", schema.EnvSinkMaxBatch: "5", schema.EnvSinkMaxBatchBytes: "1048576",
		schema.EnvSinkInFlight: "8", schema.EnvSinkBufferBytes: "2097152", schema.EnvAdminPprof: "true", schema.EnvMaxConcurrentWrites: "512",
		schema.EnvRebalanceEvery: "20s", schema.EnvMinHold: "2m", schema.EnvRebalanceMoves: "3", schema.EnvAdvertiseAddr: "10.0.0.1:9000",
		schema.EnvAllowedHosts: "a.example, *.b.example", schema.EnvSinkRequestTimeout: "400ms", schema.EnvSinkPermanentAttempts: "2", schema.EnvSinkRepeatFailures: "5", schema.EnvSinkSQSPackBytes: "200000",
		schema.EnvSinkKinesisAggregateBytes: "100000", schema.EnvSinkKinesisHashBuckets: "64",
		schema.EnvSinkBufferBudget: "33554432", schema.EnvSecretCacheTTL: "90s",
		schema.EnvTenureHeader: "X-Tenure", schema.EnvZone: "eu-west-1a", schema.EnvStandbyCheckEvery: "45s", schema.EnvExtraCAFile: "/etc/ca.pem", schema.EnvTLSResumption: "false",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Worker = streamer.Config{
		WorkerID: "w-7", LeaseTTL: 6 * time.Second, HeartbeatEvery: 500 * time.Millisecond, CheckpointEvery: 30 * time.Second,
		MaxConcurrentWrites: 512, SafetyMargin: time.Second, RebalanceEvery: 20 * time.Second, MinHold: 2 * time.Minute, RebalanceMaxMoves: 3,
		StoreTimeout: 1500 * time.Millisecond, ReconcileEvery: 2 * time.Second, AuditEvery: 10 * time.Second, MaxSessions: 42,
		ClaimsPerSecond: 12.5, DialTimeout: 3 * time.Second, PingEvery: 20 * time.Second,
		PingTimeout: 5 * time.Second, CloseGrace: 2 * time.Second, ReconnectMin: 50 * time.Millisecond, ReconnectMax: time.Minute,
		ReadLimit: 65536, SinkAttempts: 5, MaxDialFailures: 7, DialsPerHost: 2.5, DialLimits: []session.DialLimit{{Pattern: "stream.binance.com", Max: 300, Per: 5 * time.Minute}}, HandshakesInFlight: 8, HandshakesPerHost: 4, SwitchBufferBudget: 8 << 20, LargeFrameBudget: 4 << 20, SecretCacheTTL: 90 * time.Second, AllowPrivateIPs: netguard.None,
		AllowedHosts: []string{"a.example", "*.b.example"}, SinkRequestTimeout: 400 * time.Millisecond,
		ShutdownDeadline: 20 * time.Second, ShutdownInFlight: 4, AdminAddr: "0.0.0.0:9000", AdvertiseAddr: "10.0.0.1:9000", AdminPprof: true, AdminToken: "fleet-admin-token-0123",
		MetricsEvery: 30 * time.Second, MetricsNamespace: "ns", Environment: "prod", LogLevel: "DEBUG",
		TenureHeader: "X-Tenure", Zone: "eu-west-1a", StandbyCheckEvery: 45 * time.Second, ExtraCAFile: "/etc/ca.pem", NoTLSResumption: true,
	}
	want.TableName, want.QueueURL, want.QueueWait = "t", "https://q/work", 15*time.Second
	want.Sink.Kind, want.Sink.OutputQueueURL = "sqs", "https://q/out.fifo"
	b := &want.Sink.Batch
	b.MaxDelay, b.MaxCount, b.MaxBytes, b.MaxInFlight, b.SessionBufferBytes = 20*time.Millisecond, 5, 1<<20, 8, 2<<20
	b.PackWait = 60 * time.Millisecond
	b.PermanentAttempts, b.RepeatFailures, b.BufferBudget = 2, 5, 32<<20
	want.Sink.SQS.PackBytes = 200000
	want.Sink.Kinesis.AggregateBytes, want.Sink.Kinesis.HashBuckets = 100000, 64
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got  %+v\nwant %+v", c, want)
	}
	if lc := c.Worker.LeaseConfig(); lc.MaxConcurrentWrites != 512 {
		t.Fatalf("lease config %+v", lc)
	}
	if r := c.Resolved(); r.Sink.Batch.RequestTimeout != 400*time.Millisecond {
		t.Fatalf("the batches' request timeout %s, want the worker's", r.Sink.Batch.RequestTimeout)
	}
}

// A WSFLEET_ variable the worker does not read is a Validate error naming
// the closest known one; every such variable is reported at once, with the
// other problems, never with its value; tool variables and a binary's own
// (accept) are no error.
func TestUnknownVariablesAreValidateErrors(t *testing.T) {
	env := map[string]string{"WSFLEET_LEASE_TT": "6s", "WSFLEET_SINKK": "secret-value", schema.EnvSigningSecret: "x",
		schema.EnvMaxSessions: "0", schema.EnvRepoRoot: "/r", schema.EnvAPI: "http://x"}
	c, err := FromEnv(environ(env))
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
	if err != nil && strings.Count(err.Error(), "worker config") != 1 {
		t.Errorf("the problems are not one list: %v", err)
	}
	offset := []string{"WSFLEET_TEST_CLOCK_OFFSET=1s"}
	if c, _ := FromEnv(offset); c.Validate() == nil {
		t.Error("a chaos-build variable accepted without accept")
	}
	if c, _ := FromEnv(offset, "WSFLEET_TEST_CLOCK_OFFSET"); c.Validate() != nil {
		t.Errorf("an accepted variable refused: %v", c.Validate())
	}
}

func TestFromEnvReportsEveryBadValue(t *testing.T) {
	_, err := FromEnv(environ(map[string]string{schema.EnvLeaseTTL: "ten", schema.EnvMaxSessions: "many", schema.EnvClaimsPerSecond: "fast",
		schema.EnvAdminPprof: "maybe"}))
	if err == nil {
		t.Fatal("no error")
	}
	for _, name := range []string{schema.EnvLeaseTTL, schema.EnvMaxSessions, schema.EnvClaimsPerSecond, schema.EnvAdminPprof} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
}

func TestEmptyValuesKeepDefaults(t *testing.T) {
	c, err := FromEnv(environ(map[string]string{schema.EnvLeaseTTL: "  ", schema.EnvSink: ""}))
	if err != nil || c.Worker.LeaseTTL != 10*time.Second || c.Sink.Kind != registry.Stdout {
		t.Fatalf("%v %+v", err, c)
	}
}

// TestEmptyAdminAddrDisablesTheAdminServer: WSFLEET_ADMIN_ADDR set to ""
// turns the admin server off (unset keeps the default), as documented.
func TestEmptyAdminAddrDisablesTheAdminServer(t *testing.T) {
	c, err := FromEnv(environ(map[string]string{schema.EnvAdminAddr: ""}))
	if err != nil || c.Worker.AdminAddr != "" {
		t.Fatalf("empty: %v %q", err, c.Worker.AdminAddr)
	}
	c, err = FromEnv(environ(map[string]string{}))
	if err != nil || c.Worker.AdminAddr != streamer.DefaultConfig().AdminAddr || c.Worker.AdminAddr == "" {
		t.Fatalf("unset: %v %q", err, c.Worker.AdminAddr)
	}
}

func TestValidateRejects(t *testing.T) {
	cases := map[string]func(*Config){
		schema.EnvQueueWait:      func(c *Config) { c.QueueWait = 30 * time.Second },
		schema.EnvSink:           func(c *Config) { c.Sink.Kind = "kafka" },
		schema.EnvOutputQueueURL: func(c *Config) { c.Sink.Kind = registry.SQS },
		schema.EnvTableName:      func(c *Config) { c.TableName = "" },
		"a worker setting":       func(c *Config) { c.Worker.MaxSessions = 0 },
	}
	for name, mod := range cases {
		c := Default()
		mod(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestAddressPolicyFromEnv(t *testing.T) {
	c, err := FromEnv(environ(map[string]string{schema.EnvAllowPrivateIPs: "Loopback"}))
	if err != nil || c.Worker.AllowPrivateIPs != netguard.Loopback {
		t.Fatalf("loopback: %v %v", c.Worker.AllowPrivateIPs, err)
	}
	if _, err := FromEnv(environ(map[string]string{schema.EnvAllowPrivateIPs: "everything"})); err == nil || !strings.Contains(err.Error(), schema.EnvAllowPrivateIPs) {
		t.Fatalf("a bad policy was accepted: %v", err)
	}
}

// WSFLEET_SECRET_HOSTS is parsed by the one definition ingest uses
// (shared/secretref.Bindings); a malformed value is a FromEnv error naming
// every problem.
func TestSecretHostsFromEnv(t *testing.T) {
	c, err := FromEnv(environ(map[string]string{schema.EnvSecretHosts: "wsfleet/prod/=Stream.Example.com:443"}))
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("wss://stream.example.com/v1")
	if !c.Worker.SecretHosts.Allows("wsfleet/prod/feed", u) || c.Worker.SecretHosts.Allows("wsfleet/dev/feed", u) {
		t.Errorf("bindings %v: want wsfleet/prod/ bound to stream.example.com:443 only", c.Worker.SecretHosts.Keys())
	}
	_, err = FromEnv(environ(map[string]string{schema.EnvSecretHosts: "wsfleet/prod/=*.example.com;wsfleet/dev/"}))
	if err == nil || !strings.Contains(err.Error(), `rule 1: key "wsfleet/prod/": host "*.example.com"`) || !strings.Contains(err.Error(), `rule 2: "wsfleet/dev/" is not KEY=HOST`) {
		t.Fatalf("a malformed binding: %v", err)
	}
}

// Issue 22: the sink request timeout defaults to half the safety margin and
// may not exceed it; the sink buffer budget defaults to a quarter of the
// memory limit; the sessions + the budgets must fit the limit.
func TestSinkBoundsAreDerivedAndChecked(t *testing.T) {
	c, err := FromEnv([]string{schema.EnvSafetyMargin + "=2s", schema.EnvMaxSessions + "=300"})
	if err != nil {
		t.Fatal(err)
	}
	c.MemoryLimit = 1 << 30
	r := c.Resolved()
	if r.Sink.Batch.RequestTimeout != time.Second || r.Worker.SinkRequestTimeout != time.Second || r.Sink.Batch.BufferBudget != 256<<20 {
		t.Fatalf("derived request timeout %s (the worker's %s), budget %d", r.Sink.Batch.RequestTimeout, r.Worker.SinkRequestTimeout, r.Sink.Batch.BufferBudget)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.MemoryLimit = 0
	if got := c.Resolved().Sink.Batch.BufferBudget; got != DefaultBufferBudget {
		t.Fatalf("budget with no known limit %d", got)
	}
	bad, err := FromEnv([]string{schema.EnvSafetyMargin + "=2s", schema.EnvSinkRequestTimeout + "=1500ms",
		schema.EnvMaxSessions + "=10000", schema.EnvSinkPermanentAttempts + "=0", schema.EnvSink + "=sqs", schema.EnvOutputQueueURL + "=https://q/out"})
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
	neg := Default()
	neg.Sink.Batch.BufferBudget = -1
	if err := neg.Validate(); err == nil || !strings.Contains(err.Error(), schema.EnvSinkBufferBudget+" -1 must not be negative") {
		t.Errorf("a negative budget: %v", err)
	}
}

// Issue 35: the planned reconnects' switch budget defaults to a sixteenth
// of the memory limit, and the memory check counts it with the sessions
// and the other budgets.
func TestSwitchBudgetIsDerivedAndCounted(t *testing.T) {
	c, err := FromEnv([]string{schema.EnvMaxSessions + "=300"})
	if err != nil {
		t.Fatal(err)
	}
	c.MemoryLimit = 1 << 30
	if got := c.Resolved().Worker.SwitchBufferBudget; got != 64<<20 {
		t.Fatalf("switch budget at a 1 GiB limit %d, want 64 MiB", got)
	}
	c.MemoryLimit = 0
	if got := c.Resolved().Worker.SwitchBufferBudget; got != DefaultSwitchBufferBudget {
		t.Fatalf("switch budget with no known limit %d, want %d", got, DefaultSwitchBufferBudget)
	}
	// 300 × 64 KiB + 64 MiB + 128 MiB + 32 MiB fits 512 MiB; with a switch
	// budget of 400 MiB it does not.
	c.MemoryLimit = 512 << 20
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.Worker.SwitchBufferBudget = 400 << 20
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), schema.EnvSwitchBufferBudget) || !strings.Contains(err.Error(), "exceeds the memory limit") {
		t.Fatalf("a switch budget beyond the memory left: %v", err)
	}
	c.Worker.SwitchBufferBudget = -1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), schema.EnvSwitchBufferBudget+" must not be negative") {
		t.Fatalf("a negative switch budget: %v", err)
	}
}

// The defaults are the library's and lease's where they overlap.
func TestDefaultsAreTheLibrarys(t *testing.T) {
	c := Default()
	lib := streamer.DefaultConfig()
	c.Worker.WorkerID, lib.WorkerID = "", "" // random per call
	if !reflect.DeepEqual(c.Worker, lib) {
		t.Fatalf("worker defaults %+v, the library's %+v", c.Worker, lib)
	}
	if got, want := c.Worker.LeaseConfig().MaxConcurrentWrites, lease.DefaultConfig("x").MaxConcurrentWrites; got != want {
		t.Fatalf("checkpoints in flight %d, want the lease default %d", got, want)
	}
	b := batch.DefaultConfig()
	b.RequestTimeout, b.BufferBudget = 0, 0
	if !reflect.DeepEqual(c.Sink.Batch, b) {
		t.Fatalf("batch defaults %+v", c.Sink.Batch)
	}
}

// Issue 37: the memory check counts what a session holds, measured
// (schema.SessionMemory), plus the large-frame budget (an eighth of the
// memory limit by default, at least the read limit), not MaxSessions × the
// read limit: 2,000 sessions fit a 1 GiB limit (2,000 × 1 MiB did not).
func TestWorkerPackedByMeasuredMemory(t *testing.T) {
	c, err := FromEnv([]string{schema.EnvMaxSessions + "=2000"})
	if err != nil {
		t.Fatal(err)
	}
	c.MemoryLimit = 1 << 30
	if err := c.Validate(); err != nil {
		t.Fatalf("2,000 sessions at a 1 GiB limit: %v", err)
	}
	if got := c.Resolved().Worker.LargeFrameBudget; got != 128<<20 {
		t.Fatalf("large-frame budget at a 1 GiB limit %d, want 128 MiB", got)
	}
	c.MemoryLimit = 0
	if got := c.Resolved().Worker.LargeFrameBudget; got != DefaultLargeFrameBudget {
		t.Fatalf("large-frame budget with no known limit %d, want %d", got, DefaultLargeFrameBudget)
	}
	// A read limit above the derived budget raises the budget to it: one
	// message of the read limit always fits.
	c.MemoryLimit, c.Worker.ReadLimit = 64<<20, 16<<20
	if got := c.Resolved().Worker.LargeFrameBudget; got != 16<<20 {
		t.Fatalf("large-frame budget with a 16 MiB read limit at a 64 MiB memory limit %d, want the read limit", got)
	}
	// 1 GiB holds (1 GiB - 128 - 256 - 64 MiB) ÷ 64 KiB = 9,216 sessions
	// at the derived budgets, and no more.
	c, err = FromEnv([]string{schema.EnvMaxSessions + "=9216"})
	if err != nil {
		t.Fatal(err)
	}
	c.MemoryLimit = 1 << 30
	if err := c.Validate(); err != nil {
		t.Fatalf("9,216 sessions at a 1 GiB limit: %v", err)
	}
	c.Worker.MaxSessions++
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "exceeds the memory limit") || !strings.Contains(err.Error(), schema.EnvLargeFrameBudget) {
		t.Fatalf("9,217 sessions at a 1 GiB limit: %v", err)
	}
	// Every problem at once: a budget below the read limit, and one that
	// is negative.
	c.Worker.MaxSessions = 100
	c.Worker.LargeFrameBudget = c.Worker.ReadLimit - 1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), schema.EnvLargeFrameBudget+" (1048575) must be at least "+schema.EnvReadLimit) {
		t.Fatalf("a large-frame budget below the read limit: %v", err)
	}
	c.Worker.LargeFrameBudget = -1
	c.Worker.SwitchBufferBudget = -1
	err = c.Validate()
	for _, want := range []string{schema.EnvLargeFrameBudget + " must not be negative", schema.EnvSwitchBufferBudget + " must not be negative"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q missing from %v", want, err)
		}
	}
}
