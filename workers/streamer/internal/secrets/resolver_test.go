package secrets

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/secretref"
	standin "github.com/wsfleet/wsfleet/testkit/secretsmanager"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

const get = standin.OpGetSecretValue

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// noRetry makes each resolution one request, so one injected fault
// answers it.
func noRetry(o *sm.Options) { o.RetryMaxAttempts = 1 }

// setup is a stand-in, a Resolver over the real SDK client pointed at it,
// and the Resolver's fake clock.
func setup(t *testing.T, cfg Config) (*standin.Server, *Resolver, *clock.Fake) {
	t.Helper()
	s := standin.Start(t)
	fc := clock.NewFake(time.Unix(1_700_000_000, 0))
	if cfg.Clock == nil {
		cfg.Clock = fc
	}
	return s, NewResolver(standin.NewClient(s.Endpoint(), noRetry), cfg), fc
}

func mustResolve(t *testing.T, r *Resolver, name, want string) {
	t.Helper()
	got, err := r.Resolve(testCtx(t), name)
	if err != nil || got != want {
		t.Fatalf("Resolve(%s) = %q, %v; want %q", name, got, err, want)
	}
}

func TestResolvesAndCaches(t *testing.T) {
	s, r, _ := setup(t, Config{})
	s.Put("wsfleet/test/api", `{"token":"t1"}`)
	mustResolve(t, r, "wsfleet/test/api", `{"token":"t1"}`)
	mustResolve(t, r, "wsfleet/test/api", `{"token":"t1"}`)
	if n := s.Calls(get); n != 1 {
		t.Fatalf("%d GetSecretValue calls, want 1 (the second from the cache)", n)
	}
}

// A rotation (a new AWSCURRENT version) reaches the first resolution once
// the cached value is TTL old, not before.
func TestRotationVisibleAfterTheTTL(t *testing.T) {
	const ttl = time.Minute
	s, r, fc := setup(t, Config{TTL: ttl})
	s.Put("a", "v1")
	mustResolve(t, r, "a", "v1")
	s.Put("a", "v2")
	fc.Advance(ttl - time.Nanosecond)
	mustResolve(t, r, "a", "v1")
	fc.Advance(time.Nanosecond)
	mustResolve(t, r, "a", "v2")
	if n := s.Calls(get); n != 2 {
		t.Fatalf("%d GetSecretValue calls, want 2", n)
	}
}

func TestDefaults(t *testing.T) {
	r := NewResolver(nil, Config{})
	if r.cache.ttl != DefaultTTL || r.cache.max != DefaultMaxEntries || r.timeout != DefaultCallTimeout || r.clk != (clock.Real{}) {
		t.Fatalf("defaults: ttl %s max %d timeout %s clock %T", r.cache.ttl, r.cache.max, r.timeout, r.clk)
	}
	if DefaultTTL != 5*time.Minute {
		t.Fatalf("DefaultTTL = %s: the docs promise 5m", DefaultTTL)
	}
}

// The cache holds at most MaxEntries names, evicting the oldest fetched,
// and drops expired entries.
func TestCacheBound(t *testing.T) {
	s, r, fc := setup(t, Config{MaxEntries: 3, TTL: time.Minute})
	for _, n := range []string{"a", "b", "c", "d"} {
		s.Put(n, "v-"+n)
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		mustResolve(t, r, n, "v-"+n)
		fc.Advance(time.Second)
	}
	if l := r.cache.len(); l != 3 {
		t.Fatalf("cache holds %d entries, want 3", l)
	}
	calls := s.Calls(get)
	for _, n := range []string{"b", "c", "d"} {
		mustResolve(t, r, n, "v-"+n)
	}
	if s.Calls(get) != calls {
		t.Fatal("a name among the newest 3 was fetched again")
	}
	mustResolve(t, r, "a", "v-a") // evicted: fetched again, evicting b
	if s.Calls(get) != calls+1 {
		t.Fatal("the oldest name was not evicted")
	}
	mustResolve(t, r, "c", "v-c")
	if s.Calls(get) != calls+1 {
		t.Fatal("evicting one entry dropped another")
	}
	fc.Advance(time.Minute)
	s.Put("e", "v-e")
	mustResolve(t, r, "e", "v-e")
	if l := r.cache.len(); l != 1 {
		t.Fatalf("cache holds %d entries after the others expired, want 1", l)
	}
}

// Secrets Manager's errors are permanent or transient as the session must
// treat them, and their text names the secret and the code, never a value.
func TestErrorMapping(t *testing.T) {
	const value = "VALUE-must-not-leak"
	cases := []struct {
		code      string
		permanent bool
	}{
		{"ResourceNotFoundException", true},
		{"AccessDeniedException", true},
		{"DecryptionFailure", true},
		{"InvalidRequestException", true},
		{"InvalidParameterException", true},
		{"ThrottlingException", false},
		{"InternalServiceError", false},
		{"ServiceUnavailable", false},
		{"LimitExceededException", false},
	}
	for _, c := range cases {
		t.Run(c.code, func(t *testing.T) {
			s, r, _ := setup(t, Config{})
			s.Put("wsfleet/test/a", value)
			s.Fail(get, c.code, 1)
			_, err := r.Resolve(testCtx(t), "wsfleet/test/a")
			var e *Error
			if !errors.As(err, &e) || e.Code != c.code || e.Name != "wsfleet/test/a" {
				t.Fatalf("Resolve = %v, want an *Error of %s", err, c.code)
			}
			if errors.Is(err, ErrPermanent) != c.permanent {
				t.Fatalf("Resolve = %v: permanent %v, want %v", err, errors.Is(err, ErrPermanent), c.permanent)
			}
			text := err.Error()
			if !strings.Contains(text, `secret "wsfleet/test/a"`) || !strings.Contains(text, c.code) || strings.Contains(text, value) {
				t.Fatalf("error text %q: want the name and the code, never the value", text)
			}
			// An error is not cached: the next dial asks again.
			mustResolve(t, r, "wsfleet/test/a", value)
		})
	}
}

func TestMissingSecretIsPermanent(t *testing.T) {
	_, r, _ := setup(t, Config{})
	_, err := r.Resolve(testCtx(t), "wsfleet/test/nope")
	if !errors.Is(err, ErrPermanent) || !strings.Contains(err.Error(), "ResourceNotFoundException") {
		t.Fatalf("Resolve of a missing secret = %v, want a permanent ResourceNotFoundException", err)
	}
}

func TestBinarySecretIsPermanent(t *testing.T) {
	s, r, _ := setup(t, Config{})
	s.PutBinary("b", []byte("VALUE-bin"))
	_, err := r.Resolve(testCtx(t), "b")
	if !errors.Is(err, ErrPermanent) || !strings.Contains(err.Error(), "binary secrets are not supported") || strings.Contains(err.Error(), "VALUE") {
		t.Fatalf("Resolve of a binary secret = %v", err)
	}
}

// A Secrets Manager that does not answer within the call timeout is a
// transient error naming the timeout.
func TestCallTimeoutIsTransient(t *testing.T) {
	s, r, _ := setup(t, Config{CallTimeout: 200 * time.Millisecond})
	s.Put("a", "v")
	release := s.Hold(get)
	defer release()
	_, err := r.Resolve(testCtx(t), "a")
	if err == nil || errors.Is(err, ErrPermanent) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no answer within 200ms") {
		t.Fatalf("Resolve of a held call = %v, want a transient timeout", err)
	}
	t.Logf("the timeout's text: %v", err)
}

// Concurrent resolutions of one name make one request, and all get its
// answer.
func TestConcurrentCallersShareOneRequest(t *testing.T) {
	s, r, _ := setup(t, Config{})
	s.Put("a", "v")
	var joined atomic.Int32
	r.joined = func() { joined.Add(1) }
	release := s.Hold(get)
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			v, err := r.Resolve(testCtx(t), "a")
			if err == nil && v != "v" {
				err = fmt.Errorf("got %q", v)
			}
			errs <- err
		})
	}
	testwait.Eventually(t, 10*time.Second, "every caller waits on the flight", func() bool { return joined.Load() == n && s.Calls(get) >= 1 })
	testwait.Holds(t, 200*time.Millisecond, "one request while the callers wait", func() bool { return s.Calls(get) == 1 })
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if c := s.Calls(get); c != 1 {
		t.Fatalf("%d GetSecretValue calls for %d concurrent callers, want 1", c, n)
	}
}

// A caller whose ctx ends stops waiting; the shared request goes on and
// fills the cache for the others.
func TestCallerCancellationDoesNotEndTheRequest(t *testing.T) {
	s, r, _ := setup(t, Config{})
	s.Put("a", "v")
	release := s.Hold(get)
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() { _, err := r.Resolve(ctx, "a"); done <- err }()
	testwait.Eventually(t, 10*time.Second, "the request reaches the server", func() bool { return s.Calls(get) == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || errors.Is(err, ErrPermanent) {
		t.Fatalf("Resolve after its ctx ended = %v, want context.Canceled", err)
	}
	release()
	testwait.Eventually(t, 10*time.Second, "the request fills the cache", func() bool { return r.cache.len() == 1 })
	mustResolve(t, r, "a", "v")
	if c := s.Calls(get); c != 1 {
		t.Fatalf("%d calls, want 1", c)
	}
}

// The Resolver is a Provider, and Lookup feeds it to secretref.Expand.
func TestExpandThroughTheResolver(t *testing.T) {
	s, r, _ := setup(t, Config{})
	s.Put("wsfleet/test/api", `{"user":"u","token":"t1"}`)
	var p Provider = r
	got, err := secretref.Expand("Bearer {{secret:wsfleet/test/api#token}} as {{secret:wsfleet/test/api#user}}", Lookup(testCtx(t), p))
	if err != nil || got != "Bearer t1 as u" {
		t.Fatalf("Expand = %q, %v", got, err)
	}
	_, err = secretref.Expand("{{secret:wsfleet/test/gone}}", Lookup(testCtx(t), p))
	const want = `secret reference 1 (at byte 0): secret "wsfleet/test/gone": GetSecretValue: ResourceNotFoundException (permanent): `
	if !errors.Is(err, ErrPermanent) || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("Expand of a missing secret = %v, want it to carry ErrPermanent and begin %q", err, want)
	}
	t.Logf("the error a session would record: %v", err)
	var f Provider = ProviderFunc(func(_ context.Context, name string) (string, error) {
		return "", fmt.Errorf("vault has no %s: %w", name, ErrPermanent)
	})
	if _, err := f.Resolve(testCtx(t), "x"); !errors.Is(err, ErrPermanent) {
		t.Fatalf("ProviderFunc = %v", err)
	}
}
