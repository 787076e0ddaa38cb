package streamer

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/netguard"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/secrets"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/session"
)

func TestDefaultConfigIsValid(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if lc := c.LeaseConfig(); lc.HeartbeatEvery != time.Second || lc.CheckpointEvery != time.Minute || lc.TTL != 10*time.Second || lc.Owner != c.WorkerID ||
		lc.Pid != os.Getpid() || lc.Host != hostname {
		t.Fatalf("lease config %+v (the worker's record names its process: pid %d, host %q)", lc, os.Getpid(), hostname)
	}
	if c.DialsPerHost != 5 {
		t.Fatalf("default dials per host %v, want 5 (issue 15: a failover must not get the fleet banned)", c.DialsPerHost)
	}
	if c.HandshakesInFlight != DefaultHandshakesInFlight {
		t.Fatalf("default handshakes in flight %d, want %d", c.HandshakesInFlight, DefaultHandshakesInFlight)
	}
	if c.HandshakesPerHost != DefaultHandshakesPerHost || c.HandshakesPerHost >= c.HandshakesInFlight {
		t.Fatalf("default handshakes per host %d, want %d, a share of the %d in flight", c.HandshakesPerHost, DefaultHandshakesPerHost, c.HandshakesInFlight)
	}
	if c.SecretCacheTTL != secrets.DefaultTTL {
		t.Fatalf("default secret cache TTL %s, want the resolver's %s", c.SecretCacheTTL, secrets.DefaultTTL)
	}
	if c.WorkerID == DefaultConfig().WorkerID {
		t.Fatal("two default worker ids are equal: a restart would reuse its predecessor's owner id")
	}
	if c.AdminPprof {
		t.Fatal("pprof must be off by default")
	}
	if got, want := c.LeaseConfig().MaxConcurrentWrites, lease.DefaultConfig("x").MaxConcurrentWrites; got != want {
		t.Fatalf("checkpoints in flight by default: %d, want the lease default %d", got, want)
	}
	c.MaxConcurrentWrites = -1
	if c.Validate() == nil {
		t.Fatal("MaxConcurrentWrites -1 accepted")
	}
}

func TestValidateRejects(t *testing.T) {
	cases := map[string]func(*Config){
		"lease timings":                func(c *Config) { c.LeaseTTL, c.HeartbeatEvery = 2*time.Second, 2*time.Second },
		"checkpoint interval":          func(c *Config) { c.CheckpointEvery = 0 },
		"concurrent writes":            func(c *Config) { c.MaxConcurrentWrites = 0 },
		"margin":                       func(c *Config) { c.SafetyMargin = 0 },
		schema.EnvReconcileEvery:       func(c *Config) { c.ReconcileEvery = 0 },
		schema.EnvAuditEvery:           func(c *Config) { c.AuditEvery = -time.Second },
		schema.EnvMaxSessions:          func(c *Config) { c.MaxSessions = 0 },
		schema.EnvClaimsPerSecond:      func(c *Config) { c.ClaimsPerSecond = 0 },
		schema.EnvDialsPerHost:         func(c *Config) { c.DialsPerHost = -1 },
		schema.EnvFleetClaimsPerSecond: func(c *Config) { c.FleetClaimsPerSecond = -1 },
		schema.EnvDialLimits: func(c *Config) {
			c.DialLimits = []session.DialLimit{{Pattern: "src.example", Max: 0, Per: time.Minute}}
		},
		schema.EnvHandshakesInFlight:  func(c *Config) { c.HandshakesInFlight = -1 },
		schema.EnvHandshakesPerHost:   func(c *Config) { c.HandshakesPerHost = -1 },
		"per host beyond in flight":   func(c *Config) { c.HandshakesInFlight, c.HandshakesPerHost = 4, 5 },
		schema.EnvSwitchBufferBudget:  func(c *Config) { c.SwitchBufferBudget = -1 },
		schema.EnvLargeFrameBudget:    func(c *Config) { c.LargeFrameBudget = -1 },
		"frames below ReadLimit":      func(c *Config) { c.LargeFrameBudget = c.ReadLimit - 1 },
		schema.EnvSecretCacheTTL:      func(c *Config) { c.SecretCacheTTL = 0 },
		"secret cache TTL over 1h":    func(c *Config) { c.SecretCacheTTL = MaxSecretCacheTTL + time.Second },
		"dial timeout over the max":   func(c *Config) { c.DialTimeout = session.MaxDialTimeout + time.Second },
		schema.EnvShutdownDeadline:    func(c *Config) { c.ShutdownDeadline = time.Second },
		schema.EnvShutdownInFlight:    func(c *Config) { c.ShutdownInFlight = 0 },
		schema.EnvPingTimeout:         func(c *Config) { c.PingTimeout = c.PingEvery },
		"ReadLimit":                   func(c *Config) { c.ReadLimit = 10 },
		"backoff":                     func(c *Config) { c.ReconnectMin, c.ReconnectMax = time.Second, time.Millisecond },
		schema.EnvLogLevel:            func(c *Config) { c.LogLevel = "loud" },
		schema.EnvMetricsEvery:        func(c *Config) { c.MetricsEvery = 0 },
		"worker id":                   func(c *Config) { c.WorkerID = "" },
		schema.EnvMaxDialFailures:     func(c *Config) { c.MaxDialFailures = -1 },
		schema.EnvSinkRequestTimeout:  func(c *Config) { c.SinkRequestTimeout = c.SafetyMargin },
		"admin token beyond loopback": func(c *Config) { c.AdminAddr = "0.0.0.0:8081" },
		"short admin token":           func(c *Config) { c.AdminToken = "short" },
	}
	for name, mod := range cases {
		c := DefaultConfig()
		mod(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// The admin token: required beyond loopback, named when missing.
	c := DefaultConfig()
	c.AdminAddr = "0.0.0.0:8081"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), schema.EnvAdminToken) {
		t.Errorf("admin server on 0.0.0.0 without a token: %v", err)
	}
	c.AdminToken = strings.Repeat("t", MinAdminTokenLen)
	if err := c.Validate(); err != nil {
		t.Errorf("admin server on 0.0.0.0 with a token: %v", err)
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:8081", "localhost:8081", ""} {
		c := DefaultConfig()
		c.AdminAddr = addr
		if err := c.Validate(); err != nil {
			t.Errorf("admin server on %q without a token: %v", addr, err)
		}
	}
}

func TestTheDefaultAddressPolicyIsPublicOnly(t *testing.T) {
	if DefaultConfig().AllowPrivateIPs != netguard.None {
		t.Fatal("the default must refuse private and loopback addresses")
	}
}

// Issue 22: the sink request timeout defaults to half the safety margin
// (the sessions' sink timeout) and may not exceed it.
func TestSinkRequestTimeoutIsDerivedAndChecked(t *testing.T) {
	c := DefaultConfig()
	c.SafetyMargin = 2 * time.Second
	if r := c.Resolved(); r.SinkRequestTimeout != time.Second || r.sessionConfig().SinkTimeout != time.Second {
		t.Fatalf("derived request timeout %s, the sessions' %s", r.SinkRequestTimeout, r.sessionConfig().SinkTimeout)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.SinkRequestTimeout = 1500 * time.Millisecond
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), schema.EnvSinkRequestTimeout+" 1.5s must be at most half of "+schema.EnvSafetyMargin) {
		t.Fatalf("a request timeout over half the margin: %v", err)
	}
}
