package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/secrets"
)

// secretResolver is the worker's Deps.Secrets: the Secrets Manager
// resolver (internal/secrets) over the process's AWS configuration, cached
// for WSFLEET_SECRET_CACHE_TTL on the worker's clock. The SDK client takes
// its endpoint from that configuration, so AWS_ENDPOINT_URL_SECRETS_MANAGER
// points it at the local stack's stand-in. It is built at the first
// reference a dial resolves: a worker whose sessions hold none never needs
// the configuration for it (and a test on other backends never loads it).
type secretResolver struct {
	load func() (aws.Config, error)
	cfg  secrets.Config

	once sync.Once
	r    *secrets.Resolver
	err  error
}

func newSecretResolver(load func() (aws.Config, error), ttl time.Duration, clk clock.Clock) *secretResolver {
	return &secretResolver{load: load, cfg: secrets.Config{TTL: ttl, Clock: clk}}
}

// Resolve is the Resolver's, once it is built. Without an AWS
// configuration no reference can be resolved, however often the dial is
// retried: that is permanent.
func (s *secretResolver) Resolve(ctx context.Context, name string) (string, error) {
	s.once.Do(func() {
		ac, err := s.load()
		if err != nil {
			s.err = err
			return
		}
		s.r = secrets.NewResolver(secretsmanager.NewFromConfig(ac), s.cfg)
	})
	if s.err != nil {
		return "", &secrets.Error{Name: name, Reason: fmt.Sprintf("no Secrets Manager client: %v", s.err), Permanent: true}
	}
	return s.r.Resolve(ctx, name)
}
