// Package secrets owns how the worker turns a secret reference's name
// (shared/secretref) into the secret's value at dial time: a Resolver over
// AWS Secrets Manager's GetSecretValue with a bounded TTL cache, one
// request per name however many sessions dial at once, a deadline on each
// call, and the SDK's errors mapped at this edge to permanent (ErrPermanent:
// the secret is missing, access is denied, it cannot be decrypted, it is
// binary) or transient (throttling, timeouts, the service's faults). It
// also defines Provider, the seam a library user fills instead of Secrets
// Manager. Values are held in memory only; no error text, log line, metric
// or record this package makes carries one.
package secrets

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"golang.org/x/sync/singleflight"

	"github.com/wsfleet/wsfleet/shared/clock"
)

// Client is the part of the Secrets Manager SDK client the Resolver uses
// (*secretsmanager.Client satisfies it).
type Client interface {
	GetSecretValue(ctx context.Context, in *sm.GetSecretValueInput, opts ...func(*sm.Options)) (*sm.GetSecretValueOutput, error)
}

// Defaults of a Resolver's Config.
const (
	// DefaultTTL (WSFLEET_SECRET_CACHE_TTL's default) bounds how long a
	// rotated secret takes to reach new dials: a value fetched at most 5
	// minutes ago is used, so after a rotation (AWSCURRENT moved) the next
	// reconnect more than 5 minutes later sends the new value. Rotation
	// schemes keep the previous value valid for far longer than that (AWS's
	// rotation templates leave AWSPREVIOUS working until the next
	// rotation), and 5 minutes is also the default TTL of AWS's own
	// Parameters and Secrets Lambda extension. Shorter only costs requests;
	// at this TTL a worker makes at most 12 GetSecretValue calls an hour
	// per secret name, however many of its sessions reconnect, far below
	// the API's per-second quota even across a fleet.
	DefaultTTL = 5 * time.Minute
	// DefaultMaxEntries bounds the cache: a worker runs at most
	// WSFLEET_MAX_SESSIONS sessions (1,000 by default), and sessions of one
	// deployment mostly share a few secrets, so 1,024 names is every
	// name in use in the common case; past it the oldest-fetched entry is
	// evicted (and fetched again at its next use). A value is at most 64
	// KiB (Secrets Manager's limit), typically well under 1 KiB.
	DefaultMaxEntries = 1024
	// DefaultCallTimeout is the deadline of one resolution, the SDK's own
	// retries included: a dial waits at most this long on Secrets Manager.
	DefaultCallTimeout = 5 * time.Second
)

// Config configures a Resolver; zero fields take the defaults.
type Config struct {
	TTL         time.Duration
	MaxEntries  int
	CallTimeout time.Duration
	Clock       clock.Clock // nil: clock.Real
}

// Resolver resolves secret names through Secrets Manager, with a cache.
// It is safe for concurrent use, and is a Provider.
type Resolver struct {
	client  Client
	timeout time.Duration
	clk     clock.Clock
	cache   *cache
	flights singleflight.Group
	joined  func() // test hook: a caller is about to join a flight
}

// NewResolver is a Resolver over client.
func NewResolver(client Client, cfg Config) *Resolver {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	return &Resolver{client: client, timeout: cfg.CallTimeout, clk: cfg.Clock,
		cache: newCache(cfg.TTL, cfg.MaxEntries), joined: func() {}}
}

// Resolve returns the SecretString of the AWSCURRENT version of the secret
// name: from the cache when it was fetched less than the TTL ago, else from
// Secrets Manager. Concurrent callers of one name share one request; each
// stops waiting when its own ctx ends, and the request goes on for the
// others (bounded by the call timeout). An error is an *Error, permanent
// (errors.Is(err, ErrPermanent)) or not; the caller's own ctx ending is
// returned as ctx's error, wrapped.
func (r *Resolver) Resolve(ctx context.Context, name string) (string, error) {
	if v, ok := r.cache.get(name, r.clk.Now()); ok {
		return v, nil
	}
	r.joined()
	ch := r.flights.DoChan(name, func() (any, error) {
		// A caller that missed the flight which just filled the cache
		// finds the value here instead of asking again.
		if v, ok := r.cache.get(name, r.clk.Now()); ok {
			return v, nil
		}
		// The request belongs to every caller: no one caller's
		// cancellation ends it, only the call timeout.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeout)
		defer cancel()
		v, err := r.fetch(fctx, name)
		if err != nil {
			return "", err
		}
		r.cache.put(name, v, r.clk.Now())
		return v, nil
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return "", res.Err
		}
		return res.Val.(string), nil
	case <-ctx.Done():
		return "", fmt.Errorf("secret %q: %w", name, ctx.Err())
	}
}

// fetch is one GetSecretValue, its answer or error mapped.
func (r *Resolver) fetch(ctx context.Context, name string) (string, error) {
	out, err := r.client.GetSecretValue(ctx, &sm.GetSecretValueInput{SecretId: aws.String(name)})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			return "", &Error{Name: name, Reason: fmt.Sprintf("no answer within %s", r.timeout), Err: err}
		}
		return "", classify(name, err)
	}
	if out.SecretString == nil {
		if out.SecretBinary != nil {
			return "", &Error{Name: name, Reason: "binary secrets are not supported (store the value as SecretString)", Permanent: true}
		}
		return "", &Error{Name: name, Reason: "the secret's current version has no SecretString", Permanent: true}
	}
	return *out.SecretString, nil
}
