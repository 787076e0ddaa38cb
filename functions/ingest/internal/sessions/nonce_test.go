package sessions_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/functions/ingest/internal/sessions"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// TestRememberNonceOnce: on dynalite, a nonce is accepted once, even by 16
// racing requests; it is stored with its TTL and is invisible to the
// session list.
func TestRememberNonceOnce(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	until := time.Unix(1_800_000_360, 0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted, replays := 0, 0
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := e.store.RememberNonce(ctx, "nonce-0123456789ab", until)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				accepted++
			case errors.Is(err, sessions.ErrReplay):
				replays++
			default:
				t.Errorf("RememberNonce: %v", err)
			}
		}()
	}
	wg.Wait()
	if accepted != 1 || replays != 15 {
		t.Fatalf("accepted %d, replays %d; want 1 and 15", accepted, replays)
	}
	it := e.raw(t, schema.NonceKey("nonce-0123456789ab"))
	if got, ok := n(it, schema.AttrExpiresAt); !ok || got != until.Unix() {
		t.Fatalf("expires_at = %v (%v), want %d", got, ok, until.Unix())
	}
	if err := e.store.RememberNonce(ctx, "nonce-other-0123456", until); err != nil {
		t.Fatalf("a second nonce: %v", err)
	}
	page, err := e.store.List(ctx, schema.StateStarted, 10, "")
	if err != nil || len(page.Sessions) != 0 {
		t.Fatalf("list shows nonce items: %+v, %v", page, err)
	}
}
