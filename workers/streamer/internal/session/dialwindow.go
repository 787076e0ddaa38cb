package session

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/shared/netguard"
)

// DialLimit is a source's documented connection-rate limit per client
// address: at most Max dials in any window of Per to the hosts matching
// Pattern ("host" exactly, or "*.domain": netguard.HostAllowed). Binance's
// is 300 per 5 minutes per IP. All hosts matching one limit share its
// window (an exchange counts an address's connections to all its hosts).
type DialLimit struct {
	Pattern string
	Max     int
	Per     time.Duration
}

func (l DialLimit) String() string { return fmt.Sprintf("%s=%d/%s", l.Pattern, l.Max, l.Per) }

// MaxDialLimitWindow bounds DialLimit.Per: a source's window is minutes,
// not days.
const MaxDialLimitWindow = 24 * time.Hour

// DialWindowSlack is added to every DialLimit's window: a dial admitted at
// t reaches the source a network's latency later, and two dials admitted
// Per apart must not reach it closer than Per (the source counts on its own
// clock, on arrival).
const DialWindowSlack = time.Second

// ParseDialLimits reads schema.EnvDialLimits: comma-separated
// "pattern=max/window" entries, e.g.
// "stream.binance.com=300/5m,*.kraken.com=150/10m". Every bad entry is
// reported.
func ParseDialLimits(v string) ([]DialLimit, error) {
	var out []DialLimit
	var errs []error
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		pat, rest, ok1 := strings.Cut(e, "=")
		n, per, ok2 := strings.Cut(rest, "/")
		max, err1 := strconv.Atoi(strings.TrimSpace(n))
		d, err2 := time.ParseDuration(strings.TrimSpace(per))
		if !ok1 || !ok2 || err1 != nil || err2 != nil {
			errs = append(errs, fmt.Errorf("dial limit %q: want host=max/window, e.g. stream.binance.com=300/5m", e))
			continue
		}
		pats := netguard.SplitHosts(pat)
		if len(pats) != 1 {
			errs = append(errs, fmt.Errorf("dial limit %q: want one host pattern before =", e))
			continue
		}
		out = append(out, DialLimit{Pattern: pats[0], Max: max, Per: d})
	}
	return out, errors.Join(errs...)
}

// ValidateDialLimits reports every problem of ls (each named by its entry).
func ValidateDialLimits(ls []DialLimit) []string {
	var bad []string
	seen := map[string]bool{}
	for _, l := range ls {
		host := strings.TrimPrefix(l.Pattern, "*.")
		switch {
		case host == "" || strings.ContainsAny(host, "*/:= "):
			bad = append(bad, fmt.Sprintf("dial limit %s: the pattern must be a host or *.domain", l))
		case seen[l.Pattern]:
			bad = append(bad, fmt.Sprintf("dial limit %s: pattern given twice", l))
		}
		seen[l.Pattern] = true
		if l.Max < 1 {
			bad = append(bad, fmt.Sprintf("dial limit %s: at least 1 dial a window", l))
		}
		if l.Per <= 0 || l.Per > MaxDialLimitWindow {
			bad = append(bad, fmt.Sprintf("dial limit %s: the window must be positive and at most %s", l, MaxDialLimitWindow))
		}
	}
	return bad
}

// dialWindow admits at most max dials in any window of per (DialLimit plus
// DialWindowSlack): it keeps the times of the dials it admitted within the
// last per. Its dials queue in arrival order for one turn (a channel holding
// one token): only the turn's holder waits on a timer, for the oldest dial
// to leave the window, so a thousand sessions waiting on one exchange cost
// one timer, and a dial that gives up (its session stopped) leaves the queue
// without taking a place in the window.
type dialWindow struct {
	max   int
	per   time.Duration
	turn  chan struct{}
	times []time.Time // admitted, oldest first; touched only by the turn's holder
}

func newDialWindow(l DialLimit) *dialWindow {
	w := &dialWindow{max: l.Max, per: l.Per + DialWindowSlack, turn: make(chan struct{}, 1)}
	w.turn <- struct{}{}
	return w
}

// wait blocks until a dial fits in the window, or ctx ends (its error).
func (w *dialWindow) wait(ctx context.Context) error {
	select {
	case <-w.turn:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { w.turn <- struct{}{} }()
	for {
		now := time.Now()
		i := 0
		for i < len(w.times) && now.Sub(w.times[i]) >= w.per {
			i++
		}
		w.times = w.times[i:]
		if len(w.times) < w.max {
			w.times = append(w.times, now)
			return nil
		}
		t := time.NewTimer(w.times[0].Add(w.per).Sub(now))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}
