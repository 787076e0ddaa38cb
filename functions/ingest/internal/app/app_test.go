package app

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/functions/ingest/internal/config"
)

type fakeSM struct {
	calls  int
	secret *string
	err    error
}

func (f *fakeSM) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	f.calls++
	if aws.ToString(in.SecretId) != "arn:aws:secretsmanager:us-east-1:1:secret:s" {
		return nil, errors.New("wrong secret id")
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: f.secret}, f.err
}

func TestResolveSecret(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default()
	sm := &fakeSM{secret: aws.String(" from-secrets-manager-0123 \n")}
	// Nothing named: no call.
	if got, err := ResolveSecret(ctx, cfg, sm); err != nil || got.SigningSecret != "" || sm.calls != 0 {
		t.Fatalf("%+v %v %d", got, err, sm.calls)
	}
	cfg.SigningSecretARN = "arn:aws:secretsmanager:us-east-1:1:secret:s"
	got, err := ResolveSecret(ctx, cfg, sm)
	if err != nil || got.SigningSecret != "from-secrets-manager-0123" || sm.calls != 1 {
		t.Fatalf("%+v %v", got, err)
	}
	// An explicit secret wins and makes no call.
	cfg.SigningSecret = "explicit-secret-0123456"
	if got, err := ResolveSecret(ctx, cfg, sm); err != nil || got.SigningSecret != "explicit-secret-0123456" || sm.calls != 1 {
		t.Fatalf("%+v %v", got, err)
	}
	// Fails closed.
	cfg.SigningSecret = ""
	for _, f := range []*fakeSM{{err: errors.New("denied")}, {secret: aws.String("  ")}, {}} {
		if _, err := ResolveSecret(ctx, cfg, f); err == nil {
			t.Fatalf("accepted %+v", f)
		}
	}
}

func TestBuildValidates(t *testing.T) {
	if _, err := Build(config.Default(), aws.Config{}, zerolog.New(&bytes.Buffer{}), nil); err == nil || !strings.Contains(err.Error(), "WSFLEET_QUEUE_URL") {
		t.Fatalf("Build accepted an invalid config: %v", err)
	}
}
