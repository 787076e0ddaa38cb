package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/wsfleet/wsfleet/shared/awsconfig"
	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/testkit/secretsmanager"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/secrets"
)

// The worker's resolver is built from the process's AWS configuration: the
// SDK takes AWS_ENDPOINT_URL_SECRETS_MANAGER from the environment (the
// local stack's stand-in), and values are cached for the TTL given.
func TestSecretResolverHonoursTheSecretsManagerEndpointVariable(t *testing.T) {
	sms := secretsmanager.Start(t)
	sms.Put("wsfleet/local/demo", `{"token":"demo-token"}`)
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL_SECRETS_MANAGER": sms.Endpoint(), "AWS_REGION": "us-east-1",
		"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local", "AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none,
	} {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	loads := 0
	r := newSecretResolver(func() (aws.Config, error) { loads++; return awsconfig.Load(ctx, 3) }, time.Minute, clock.NewFake(time.Now()))
	for range 2 {
		v, err := r.Resolve(ctx, "wsfleet/local/demo")
		if err != nil || v != `{"token":"demo-token"}` {
			t.Fatalf("Resolve = %q, %v", v, err)
		}
	}
	if n := sms.Calls(secretsmanager.OpGetSecretValue); n != 1 || loads != 1 {
		t.Fatalf("%d GetSecretValue calls, %d configuration loads: want 1 each (cached)", n, loads)
	}
}

// Without an AWS configuration no reference resolves: a permanent error
// naming the secret.
func TestSecretResolverWithoutAWSConfigurationIsPermanent(t *testing.T) {
	r := newSecretResolver(func() (aws.Config, error) { return aws.Config{}, errors.New("load aws config: no region") }, time.Minute, nil)
	_, err := r.Resolve(context.Background(), "wsfleet/local/demo")
	if !errors.Is(err, secrets.ErrPermanent) || !strings.Contains(err.Error(), `"wsfleet/local/demo"`) || !strings.Contains(err.Error(), "no region") {
		t.Fatalf("Resolve = %v, want a permanent error naming the secret and the cause", err)
	}
}
