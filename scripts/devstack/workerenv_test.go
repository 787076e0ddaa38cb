package devstack

import (
	"slices"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
)

// The stack's SecretCacheTTL reaches every worker as WSFLEET_SECRET_CACHE_TTL
// (devstack's --secret-cache-ttl), and zero leaves the worker's default.
func TestWorkerEnvSecretCacheTTL(t *testing.T) {
	env := func(ttl time.Duration) []string {
		cfg := DefaultConfig()
		cfg.Worker.SecretCacheTTL = ttl
		s := &Stack{cfg: cfg, Dynamo: &enginetest.Process{Port: 1}, SQS: &enginetest.Process{Port: 2}}
		return s.workerEnv("worker-1", "127.0.0.1:3")
	}
	if got := env(2 * time.Second); !slices.Contains(got, schema.EnvSecretCacheTTL+"=2s") {
		t.Fatalf("SecretCacheTTL 2s: %s=2s not in the worker's environment", schema.EnvSecretCacheTTL)
	}
	for _, kv := range env(0) {
		if len(kv) > len(schema.EnvSecretCacheTTL) && kv[:len(schema.EnvSecretCacheTTL)+1] == schema.EnvSecretCacheTTL+"=" {
			t.Fatalf("SecretCacheTTL 0: the worker's environment sets %s, want the worker's default", kv)
		}
	}
}
