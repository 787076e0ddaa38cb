package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/testkit/proc"
)

// waitStreaming holds out for two polls at ≥ 90 % of the expected
// messages, says what was held when the time is up, and gives up on a
// process that exited.
func TestWaitStreaming(t *testing.T) {
	p := &proc.Proc{Name: "sleep", Argv: []string{"/bin/sh", "-c", "sleep 30"}, LogPath: filepath.Join(t.TempDir(), "sleep.log")}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(time.Second) })
	ctx := context.Background()
	start := time.Now()
	reads := 0
	// 10 held at 1 msg/s each: 10 messages a second, then a slow second.
	err := waitStreaming(ctx, p, "worker", "sessions", 10, 1, time.Minute, func(context.Context) (int, int64, string, error) {
		reads++
		return 10, int64(10 * reads), "", nil
	})
	if err != nil || reads != 3 || time.Since(start) > 10*time.Second {
		t.Fatalf("err %v after %d reads", err, reads)
	}
	err = waitStreaming(ctx, p, "bare client", "connections", 10, 1, 500*time.Millisecond, func(context.Context) (int, int64, string, error) {
		return 9, 0, " (2 dial errors)", nil
	})
	if err == nil || err.Error() != "bare client holds 9 of 10 connections after 500ms (2 dial errors)" {
		t.Fatalf("timeout: %v", err)
	}
	if err := p.Stop(time.Second); err != nil {
		t.Logf("stop: %v", err)
	}
	err = waitStreaming(ctx, p, "worker", "sessions", 10, 1, time.Minute, func(context.Context) (int, int64, string, error) { return 10, 0, "", nil })
	if err == nil || err.Error() != "worker exited (see "+p.LogPath+")" {
		t.Fatalf("exited: %v", err)
	}
}
