package secretsmanager

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// NewClient is the real SDK client (secretsmanager.NewFromConfig) pointed
// at endpoint (a stand-in's Endpoint): region us-east-1, static test
// credentials (the stand-in does not check signatures), and the SDK's
// default retryer unless opts change it.
func NewClient(endpoint string, opts ...func(*sm.Options)) *sm.Client {
	creds := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: "AKIDSTANDIN", SecretAccessKey: "standin", Source: "testkit/secretsmanager"}, nil
	})
	cfg := aws.Config{Region: Region, Credentials: aws.NewCredentialsCache(creds)}
	base := func(o *sm.Options) { o.BaseEndpoint = aws.String(endpoint) }
	return sm.NewFromConfig(cfg, append([]func(*sm.Options){base}, opts...)...)
}
