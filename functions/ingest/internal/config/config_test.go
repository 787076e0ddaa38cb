package config

import (
	"strings"
	"testing"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// env is m as KEY=VALUE pairs (os.Environ's form).
func env(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

func TestDefaults(t *testing.T) {
	c := Default()
	if c.TableName != schema.DefaultTableName || c.MetricsNamespace != schema.DefaultMetricsNamespace || c.Environment != DefaultEnvironment ||
		c.AllowPrivateIPs != PrivateIPsNone || c.MaxBodyBytes != 256<<10 || c.SignatureWindow.Minutes() != 5 || c.SigningSecret != "" || len(c.AllowedHosts) != 0 {
		t.Fatalf("defaults %+v", c)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), schema.EnvQueueURL) {
		t.Fatalf("a queue URL must be required: %v", err)
	}
	c.QueueURL = "http://127.0.0.1:9324/000000000000/q"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestFromEnv(t *testing.T) {
	c := FromEnv(env(map[string]string{
		schema.EnvTableName:       " t1 ",
		schema.EnvQueueURL:        "https://sqs.us-east-1.amazonaws.com/1/q",
		schema.EnvAllowedHosts:    " Stream.Example.com., *.feeds.example.net ,, ",
		schema.EnvAllowPrivateIPs: "LOOPBACK",
		schema.EnvSigningSecret:   " a secret with spaces ",
		schema.EnvMetricsNS:       "ns",
		schema.EnvEnvironment:     "prod",
	}))
	if c.TableName != "t1" || c.QueueURL != "https://sqs.us-east-1.amazonaws.com/1/q" || c.AllowPrivateIPs != PrivateIPsLoopback ||
		c.SigningSecret != " a secret with spaces " || c.MetricsNamespace != "ns" || c.Environment != "prod" ||
		strings.Join(c.AllowedHosts, "|") != "stream.example.com|*.feeds.example.net" {
		t.Fatalf("%+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	// Blank values keep the defaults.
	c = FromEnv(env(map[string]string{schema.EnvTableName: "  ", schema.EnvEnvironment: ""}))
	if c.TableName != schema.DefaultTableName || c.Environment != DefaultEnvironment {
		t.Fatalf("%+v", c)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := FromEnv(env(map[string]string{
		schema.EnvQueueURL:        "sqs://nope",
		schema.EnvAllowPrivateIPs: "some",
		schema.EnvAllowedHosts:    "a.*.example.com,ex ample.com",
		schema.EnvSigningSecret:   "short",
	}))
	c.TableName = ""
	err := c.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{schema.EnvTableName, schema.EnvQueueURL, schema.EnvAllowPrivateIPs, "a.*.example.com", "ex ample.com", schema.EnvSigningSecret} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "short") && strings.Contains(err.Error(), `"short"`) {
		t.Error("the secret is quoted in the error")
	}
}

// A WSFLEET_ variable ingest does not read is a Validate error naming the
// closest known one; all of them are reported at once, with the other
// problems, and never with their values; tool variables are no error.
func TestUnknownVariablesAreValidateErrors(t *testing.T) {
	ok := []string{schema.EnvQueueURL + "=https://sqs.us-east-1.amazonaws.com/1/q", schema.EnvRepoRoot + "=/r", schema.EnvAPI + "=http://x", "PATH=/bin"}
	if err := FromEnv(ok).Validate(); err != nil {
		t.Fatalf("known and tool variables: %v", err)
	}
	err := FromEnv(append(ok, "WSFLEET_SIGNING_SECERT=0123456789abcdef-x", "WSFLEET_TABEL=t",
		schema.EnvLeaseTTL+"=10s", schema.EnvAllowPrivateIPs+"=some")).Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error() + "\n"
	for _, want := range []string{
		"unknown variable WSFLEET_SIGNING_SECERT (did you mean WSFLEET_SIGNING_SECRET?)",
		"unknown variable WSFLEET_TABEL (did you mean WSFLEET_TABLE?)",
		"unknown variable " + schema.EnvLeaseTTL + "\n", // the worker's, far from every ingest name
		schema.EnvAllowPrivateIPs + ": \"some\"",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if strings.Contains(msg, "0123456789abcdef") {
		t.Errorf("a value in the error: %v", err)
	}
	if FromEnv(ok).UnknownEnv() != nil || FromEnv(append(ok, "WSFLEET_TABEL=t")).UnknownEnv() == nil {
		t.Error("UnknownEnv disagrees with Validate")
	}
}

// WSFLEET_SECRET_HOSTS is read once into the shared Bindings; Validate
// reports each of its problems with the rest, and a key outside
// WSFLEET_SECRET_PREFIX (which no reference can name).
func TestSecretHostsAreParsedAndChecked(t *testing.T) {
	base := map[string]string{schema.EnvQueueURL: "https://sqs.us-east-1.amazonaws.com/1/q", schema.EnvSecretPrefix: "wsfleet/prod/"}
	with := func(hosts string) Config {
		m := map[string]string{schema.EnvSecretHosts: hosts}
		for k, v := range base {
			m[k] = v
		}
		return FromEnv(env(m))
	}
	c := with("wsfleet/prod/=stream.example.com;wsfleet/prod/bank=api.bank.example:443")
	if err := c.Validate(); err != nil || strings.Join(c.SecretHosts.Keys(), " ") != "wsfleet/prod/bank wsfleet/prod/" {
		t.Fatalf("keys %q, %v", c.SecretHosts.Keys(), err)
	}
	err := with("wsfleet/dev/=a.example;wsfleet/prod/=*.example.com").Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{`rule 2: key "wsfleet/prod/": host "*.example.com"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	err = with("wsfleet/dev/=a.example").Validate()
	if err == nil || !strings.Contains(err.Error(), `WSFLEET_SECRET_HOSTS: key "wsfleet/dev/" is not under WSFLEET_SECRET_PREFIX "wsfleet/prod/"`) {
		t.Errorf("a key outside the prefix: %v", err)
	}
}
