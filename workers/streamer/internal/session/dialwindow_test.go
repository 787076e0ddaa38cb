package session

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// A source allowing 3 connections per 10 s per address: whatever the number
// of sessions dialing it at once, no window of 10 s (plus the slack) holds
// more than 3 of this worker's dials; the others wait in arrival order and
// all are admitted in the end; hosts outside the pattern are not held.
func TestDialWindowNeverExceedsTheSourcesLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewDialGate(0, DialLimit{Pattern: "*.binance.test", Max: 3, Per: 10 * time.Second})
		start := time.Now()
		var mu sync.Mutex
		var at []time.Duration
		var wg sync.WaitGroup
		for i := 0; i < 10; i++ {
			wg.Go(func() {
				if err := g.Wait(t.Context(), "stream.binance.test", nil); err != nil {
					t.Errorf("dial %d: %v", i, err)
					return
				}
				mu.Lock()
				at = append(at, time.Since(start))
				mu.Unlock()
			})
		}
		if err := g.Wait(t.Context(), "other.example", nil); err != nil {
			t.Fatalf("a host without a limit waited: %v", err)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("a host without a limit waited %v", d)
		}
		wg.Wait()
		if len(at) != 10 {
			t.Fatalf("%d of 10 dials admitted", len(at))
		}
		per := 10*time.Second + DialWindowSlack
		for i := range at {
			n := 0
			for _, b := range at {
				if b >= at[i] && b < at[i]+per {
					n++
				}
			}
			if n > 3 {
				t.Fatalf("%d dials within %v of the one at %v (admitted at %v): above the limit of 3", n, per, at[i], at)
			}
		}
		// 10 dials at 3 a window take three windows more than the first.
		if last := at[len(at)-1]; last != 3*per {
			t.Fatalf("the 10th dial was admitted at %v, want %v (3 full windows)", last, 3*per)
		}
	})
}

// A dial that gives up while waiting (its session stopped) takes no place
// in the window: the next one is admitted when the window frees.
func TestDialWindowCancelledWaitTakesNoPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewDialGate(0, DialLimit{Pattern: "src.test", Max: 1, Per: 10 * time.Second})
		start := time.Now()
		if err := g.Wait(t.Context(), "src.test", nil); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- g.Wait(ctx, "src.test", nil) }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("a cancelled wait: %v", err)
		}
		if err := g.Wait(t.Context(), "src.test", nil); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 10*time.Second+DialWindowSlack {
			t.Fatalf("the next dial after a cancelled one waited %v, want one window", d)
		}
	})
}

func TestParseDialLimits(t *testing.T) {
	ls, err := ParseDialLimits(" stream.binance.com=300/5m , *.Kraken.com.=150/10m,")
	if err != nil {
		t.Fatal(err)
	}
	want := []DialLimit{{"stream.binance.com", 300, 5 * time.Minute}, {"*.kraken.com", 150, 10 * time.Minute}}
	if len(ls) != 2 || ls[0] != want[0] || ls[1] != want[1] {
		t.Fatalf("parsed %v, want %v", ls, want)
	}
	if bad := ValidateDialLimits(ls); len(bad) != 0 {
		t.Fatalf("valid limits refused: %v", bad)
	}
	_, err = ParseDialLimits("a.test=3,b.test=x/1m,c.test=3/1m")
	if err == nil || !strings.Contains(err.Error(), `"a.test=3"`) || !strings.Contains(err.Error(), `"b.test=x/1m"`) {
		t.Fatalf("bad entries: %v, want both named", err)
	}
	bad := ValidateDialLimits([]DialLimit{{"a.test", 0, time.Minute}, {"a.test", 1, 0}, {"*.", 1, time.Minute}, {"b.test", 1, 48 * time.Hour}})
	if len(bad) != 5 {
		t.Fatalf("want 5 problems (max 0, a.test twice, window 0, empty pattern, window 48h), got %d: %v", len(bad), bad)
	}
}
