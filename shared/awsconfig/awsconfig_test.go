package awsconfig

import (
	"context"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

func TestLoadKeepsAnIdlePoolSizedForAWorker(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	cfg, err := Load(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := cfg.HTTPClient.(*awshttp.BuildableClient)
	if !ok {
		t.Fatalf("HTTP client %T, want the SDK's buildable client", cfg.HTTPClient)
	}
	tr := c.GetTransport()
	if tr.MaxIdleConnsPerHost != MaxIdleConnsPerHost || tr.MaxIdleConns < MaxIdleConnsPerHost {
		t.Fatalf("idle pool %d per host, %d in all; want %d per host", tr.MaxIdleConnsPerHost, tr.MaxIdleConns, MaxIdleConnsPerHost)
	}
	if cfg.Retryer().MaxAttempts() != 2 {
		t.Fatalf("max attempts %d, want 2", cfg.Retryer().MaxAttempts())
	}
}
