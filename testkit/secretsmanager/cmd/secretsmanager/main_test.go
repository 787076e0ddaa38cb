package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/wsfleet/wsfleet/testkit/secretsmanager"
)

func TestRefusesANonLoopbackAddress(t *testing.T) {
	for _, a := range []string{"0.0.0.0:0", ":0", "10.0.0.1:80", "example.com:80"} {
		if err := run(context.Background(), []string{"-addr", a}, io.Discard); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("-addr %s: %v, want a loopback refusal", a, err)
		}
	}
}

func TestServesSeededSecretsUntilCancelled(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-secret", "wsfleet/dev/a={\"k\":\"v\"}"}, w) }()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(line)
	if len(f) < 4 || strings.Join(f[:3], " ") != "secretsmanager listening at" || !strings.HasPrefix(f[3], "http://127.0.0.1:") {
		t.Fatalf("first line %q", line)
	}
	endpoint := f[3]
	c, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	g, err := secretsmanager.NewClient(endpoint).GetSecretValue(c, &sm.GetSecretValueInput{SecretId: aws.String("wsfleet/dev/a")})
	if err != nil || aws.ToString(g.SecretString) != `{"k":"v"}` {
		t.Fatalf("GetSecretValue = %+v, %v", g, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run = %v after cancel", err)
	}
	w.Close()
}
