package streamer

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/wsfleet/wsfleet/shared/awsconfig"
	"github.com/wsfleet/wsfleet/shared/notify/sqsnotify"
	"github.com/wsfleet/wsfleet/testkit/faultnet"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// proxyTo starts a faultnet proxy in front of the engine whose endpoint is
// in the environment variable env.
func proxyTo(t *testing.T, env string) *faultnet.Proxy {
	t.Helper()
	p, err := faultnet.StartEndpoint(os.Getenv(env))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// TestShutdownDeadlineIsAHardBound: a graceful shutdown returns within its
// deadline even when the work queue or the table freezes mid-run (every
// call hangs, answers never come), and a frozen engine never makes it
// return early with sessions still owned and unaccounted for.
func TestShutdownDeadlineIsAHardBound(t *testing.T) {
	const deadline = 3 * time.Second
	// Slack for the goroutines to wind down after the deadline fires on a
	// loaded runner; the finding this covers overran by 1.5 s.
	const slack = 750 * time.Millisecond
	for _, frozen := range []string{"work queue", "table"} {
		t.Run(frozen, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			ac, err := awsconfig.Load(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			var proxy *faultnet.Proxy
			if frozen == "work queue" {
				proxy = proxyTo(t, "AWS_ENDPOINT_URL_SQS")
				c := sqs.NewFromConfig(ac, func(o *sqs.Options) { o.BaseEndpoint = aws.String(proxy.URL()) })
				e.workerQueue = sqsnotify.New(c, e.workURL, 10) // the production long poll: one is in flight when the queue freezes
			} else {
				proxy = proxyTo(t, "AWS_ENDPOINT_URL_DYNAMODB")
				e.workerDB = dynamodb.NewFromConfig(ac, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(proxy.URL()) })
			}
			var ids []string
			for range 5 {
				ids = append(ids, e.session(nil))
			}
			w := e.worker(func(c *Config) { c.ShutdownDeadline = deadline })
			for _, id := range ids {
				e.notify("start", id)
			}
			testwait.Eventually(t, 10*time.Second, "5 sessions streaming", func() bool {
				for _, id := range ids {
					if !w.owns(id) || e.sink.count(id) < 2 {
						return false
					}
				}
				return true
			})
			proxy.Freeze()
			t0 := time.Now()
			w.cancel()
			select {
			case <-w.done:
			case <-time.After(deadline + 10*time.Second):
				t.Fatalf("shutdown with the %s frozen has not returned after %s", frozen, time.Since(t0))
			}
			w.stopped = true
			took := time.Since(t0)
			t.Logf("shutdown with the %s frozen took %s (deadline %s)", frozen, took, deadline)
			if took > deadline+slack {
				t.Fatalf("shutdown with the %s frozen took %s, deadline %s", frozen, took, deadline)
			}
			proxy.Thaw()
		})
	}
}

// TestShutdownBoundWithAStuckSink: a sink call that ignores its context
// (a wedged pipe, a client library without deadlines) holds its session,
// yet Run returns by the deadline plus the cleanup bound, and says so.
func TestShutdownBoundWithAStuckSink(t *testing.T) {
	const deadline = 2 * time.Second
	wedged := make(chan struct{})
	t.Cleanup(func() { close(wedged) })
	var got atomic.Int64
	stuck := sink.HandlerFunc(func(ctx context.Context, m sink.Message) error {
		if got.Add(1) > 2 {
			<-wedged // ignores ctx
		}
		return nil
	})
	m := startMem(t, 1, func(c *Config) { c.ShutdownDeadline = deadline }, stuck)
	testwait.Eventually(t, 10*time.Second, "the sink wedged", func() bool { return got.Load() > 2 })
	t0 := time.Now()
	m.cancel()
	var err error
	select {
	case err = <-m.done:
	case <-time.After(deadline + 10*time.Second):
		t.Fatalf("Run has not returned %s after the shutdown began", time.Since(t0))
	}
	m.done <- err // for startMem's cleanup
	if took := time.Since(t0); took > deadline+shutdownCleanup+500*time.Millisecond {
		t.Fatalf("shutdown with a stuck sink took %s, deadline %s", took, deadline)
	}
	if err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("Run = %v, want the stuck session reported", err)
	}
}

// shutdownWidth keeps the floor while the hand-offs fit the time left, and
// widens just enough when they would not.
func TestShutdownWidth(t *testing.T) {
	for _, c := range []struct {
		remaining   int
		avg, left   time.Duration
		floor, want int
	}{
		{100, 0, 10 * time.Second, 4, 4},                        // nothing measured yet: the floor
		{100, 50 * time.Millisecond, 10 * time.Second, 4, 4},    // 100 × 50 ms = 5 s in 10 s: 1 would do
		{1000, 80 * time.Millisecond, 10 * time.Second, 4, 8},   // 80 s of hand-offs in 10 s: 8 at once
		{1000, 80 * time.Millisecond, 1 * time.Second, 4, 80},   // 80 s in 1 s
		{3, 80 * time.Millisecond, 10 * time.Millisecond, 4, 3}, // never more than what is left
		{50, 80 * time.Millisecond, 0, 4, 50},                   // out of time: everything
		{10, 0, time.Second, 0, 1},                              // at least one
	} {
		if got := shutdownWidth(c.remaining, c.avg, c.left, c.floor); got != c.want {
			t.Errorf("shutdownWidth(%d, %s, %s, %d) = %d, want %d", c.remaining, c.avg, c.left, c.floor, got, c.want)
		}
	}
}
