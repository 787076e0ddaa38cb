package stacks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestEnvironmentsValidate(t *testing.T) {
	if got := strings.Join(EnvNames(), ","); got != "dev,prod" {
		t.Errorf("EnvNames = %s", got)
	}
	for _, name := range EnvNames() {
		cfg, err := ConfigFor(name)
		if err != nil {
			t.Fatalf("ConfigFor(%s): %v", name, err)
		}
		if cfg.Name != name {
			t.Errorf("ConfigFor(%s).Name = %s", name, cfg.Name)
		}
		// The worker's shutdown deadline is what stopTimeout must cover.
		if cfg.StopTimeout < cfg.ShutdownDeadline+stopTimeoutHeadroom {
			t.Errorf("%s: StopTimeout %v < ShutdownDeadline %v + %v", name, cfg.StopTimeout, cfg.ShutdownDeadline, stopTimeoutHeadroom)
		}
	}
	prod, _ := ConfigFor(EnvProd)
	dev, _ := ConfigFor(EnvDev)
	if !prod.Retain || dev.Retain {
		t.Errorf("Retain: prod=%v dev=%v, want true/false", prod.Retain, dev.Retain)
	}
	if prod.ShutdownDeadline != 30*time.Second || dev.ShutdownDeadline != 30*time.Second {
		t.Errorf("ShutdownDeadline prod=%v dev=%v, want 30s (the worker's default)", prod.ShutdownDeadline, dev.ShutdownDeadline)
	}
}

func TestConfigForUnknown(t *testing.T) {
	for _, name := range []string{"", "staging", "Prod", "dev "} {
		if _, err := ConfigFor(name); err == nil || !strings.Contains(err.Error(), "unknown environment") {
			t.Errorf("ConfigFor(%q) err = %v", name, err)
		}
	}
}

func TestValidateRejects(t *testing.T) {
	base, err := ConfigFor(EnvDev)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		mutate func(*EnvConfig)
		want   string
	}{
		"stop timeout below deadline": {func(c *EnvConfig) { c.StopTimeout = c.ShutdownDeadline }, "StopTimeout"},
		"stop timeout above fargate":  {func(c *EnvConfig) { c.StopTimeout, c.ShutdownDeadline = 121*time.Second, 60*time.Second }, "Fargate maximum"},
		"renew too slow":              {func(c *EnvConfig) { c.RenewEvery = c.LeaseTTL - c.SafetyMargin }, "no room for a renewal"},
		"skew too large":              {func(c *EnvConfig) { c.MaxSkew = c.LeaseTTL }, "MaxSkew"},
		"min above max":               {func(c *EnvConfig) { c.MinTasks, c.MaxTasks = 3, 2 }, "MaxTasks"},
		"no tasks":                    {func(c *EnvConfig) { c.MinTasks = 0 }, "MinTasks"},
		"bad memory":                  {func(c *EnvConfig) { c.TaskMemoryMiB = 300 }, "TaskMemoryMiB"},
		"bad cpu":                     {func(c *EnvConfig) { c.TaskCPU = 300 }, "TaskCPU"},
		"bad retention":               {func(c *EnvConfig) { c.LogRetentionDays = 10 }, "LogRetentionDays"},
		"bad sink":                    {func(c *EnvConfig) { c.Sink = "kafka" }, "Sink"},
		"target 100":                  {func(c *EnvConfig) { c.TargetUtilization = 100 }, "TargetUtilization"},
		"renew budget":                {func(c *EnvConfig) { c.MaxTasks = 100 }, "above the index budget of 6400/s"},
		"lambda timeout":              {func(c *EnvConfig) { c.IngestTimeout = 30 * time.Second }, "IngestTimeout"},
	} {
		c := base
		tc.mutate(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want an error about %s", name, err, tc.want)
		}
	}
}

func TestOptionsFromContext(t *testing.T) {
	get := func(m map[string]any) func(string) any { return func(k string) any { return m[k] } }
	o, err := OptionsFromContext(get(map[string]any{CtxEnv: "prod", CtxOutputFIFO: true, CtxSink: "sqs"}))
	if err != nil || o.Env != EnvProd || o.Auth != AuthIAM || !o.OutputFIFO || o.Sink != SinkSQS {
		t.Errorf("options = %+v, %v", o, err)
	}
	cfg, err := o.Resolve()
	if err != nil || cfg.Sink != SinkSQS {
		t.Errorf("Resolve = %+v, %v", cfg, err)
	}
	o, err = OptionsFromContext(get(map[string]any{CtxEnv: "dev", CtxSink: "sqs"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := o.Resolve(); err != nil || cfg.Sink != SinkSQS {
		t.Errorf("sink override: %+v, %v", cfg, err)
	}
	o, err = OptionsFromContext(get(map[string]any{CtxEnv: "prod", CtxAuth: AuthNone}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Resolve(); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("prod with auth=none resolved: %v", err)
	}
	for _, bad := range []map[string]any{
		{},
		{CtxEnv: "dev", CtxAuth: "jwt"},
		{CtxEnv: "dev", CtxSink: "file"},
		{CtxEnv: "dev", CtxSigningSecretARN: "my-secret"},
		{CtxEnv: "dev", CtxAlarmEmail: "ops"},
	} {
		if _, err := OptionsFromContext(get(bad)); err == nil {
			t.Errorf("OptionsFromContext(%v) accepted", bad)
		}
	}
}

func TestFindRepoRootAndAssets(t *testing.T) {
	t.Setenv(RootEnv, "")
	dir := t.TempDir()
	deep := filepath.Join(dir, "infra", "stacks")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := FindRepoRoot(deep); err == nil {
		t.Error("FindRepoRoot found a root without cdk.json")
	}
	for _, f := range []string{"cdk.json", "go.work"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := FindRepoRoot(deep); err != nil || got != dir {
		t.Errorf("FindRepoRoot = %q, %v; want %q", got, err, dir)
	}
	err := CheckAssets(dir)
	if err == nil || !strings.Contains(err.Error(), "make infra-assets") || !strings.Contains(err.Error(), StreamerDockerfile) {
		t.Errorf("CheckAssets on an empty root = %v", err)
	}
	t.Setenv(RootEnv, deep)
	if got, _ := FindRepoRoot("/"); got != deep {
		t.Errorf("FindRepoRoot with %s = %q", RootEnv, got)
	}
}
