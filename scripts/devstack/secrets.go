package devstack

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/wsfleet/wsfleet/testkit/proc"
)

// The local Secrets Manager: testkit/secretsmanager's stand-in
// (bin/secretsmanager; no Secrets Manager engine is served by the package
// registries this project can reach), with Config.SecretsManager. Ingest
// then takes secret references under SecretPrefix, the workers resolve
// them against the stand-in (AWS_ENDPOINT_URL_SECRETS_MANAGER, in
// EngineEnv), and DemoSecret is seeded with DemoSecretValue. SecretHosts
// (WSFLEET_SECRET_HOSTS, for ingest and the workers) binds the secrets
// under SecretPrefix to the local sources' hosts only.
const (
	SecretPrefix    = "wsfleet/local/"
	SecretHosts     = SecretPrefix + "=127.0.0.1,localhost"
	DemoSecret      = SecretPrefix + "demo"
	DemoSecretValue = `{"token":"demo-token"}`
)

// SecretsManagerEndpoint is the stand-in's URL ("" when it does not run).
func (s *Stack) SecretsManagerEndpoint() string {
	if s.Secrets == nil {
		return ""
	}
	return "http://127.0.0.1:" + strconv.Itoa(s.cfg.Ports.SecretsManager)
}

// startSecrets starts the stand-in on Ports.SecretsManager (a free one when
// 0), seeded with the demo secret, and waits until it serves it.
func (s *Stack) startSecrets(ctx context.Context) error {
	c := &s.cfg
	if err := pickPort(&c.Ports.SecretsManager, "secrets manager"); err != nil {
		return err
	}
	s.Secrets = &proc.Proc{
		Name: "secretsmanager",
		Argv: []string{c.Bin.SecretsManager, "-addr", "127.0.0.1:" + strconv.Itoa(c.Ports.SecretsManager),
			"-secret", DemoSecret + "=" + DemoSecretValue},
		Env: baseEnv(), Dir: c.Root, LogPath: filepath.Join(s.LogDir(), "secretsmanager.log"), OnExit: c.OnExit,
	}
	if err := s.Secrets.Start(); err != nil {
		return err
	}
	return s.Secrets.WaitReady(ctx, c.StartTimeout, secretServed(s.SecretsManagerEndpoint(), DemoSecret))
}

// secretServed probes the stand-in with a GetSecretValue of name in its
// JSON 1.1 protocol (the stand-in wants an Authorization header, not a
// valid signature).
func secretServed(endpoint, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		body := fmt.Sprintf(`{"SecretId":%q}`, name)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+"/", strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		req.Header.Set("X-Amz-Target", "secretsmanager.GetSecretValue")
		req.Header.Set("Authorization", "local")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GetSecretValue %s: HTTP %d", name, resp.StatusCode)
		}
		return nil
	}
}
