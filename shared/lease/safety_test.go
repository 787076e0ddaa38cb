package lease

import (
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// TestSafetyArgument checks the README's safety inequality by brute force
// over clock rates, write and read delays and the watcher's phase, using the
// protocol's own rules (TrustedUntil, the watcher's first-seen counter and
// DeathAllowedAt):
//
// The holder's last successful heartbeat was sent at real time s; it stops
// acting at s + (TTL - margin)/(1 + ρH) (its monotonic clock). That
// heartbeat was applied at a ≥ s, so a watcher's first read that returns its
// counter was received at q ≥ a ≥ s; the watcher sends the death write no
// earlier than q + TTL/(1 + ρO) (its monotonic clock). With |ρ| ≤ MaxDrift:
//
//	death - stop ≥ TTL/(1+ρ) - (TTL - margin)/(1-ρ) ≥ margin - 2ρ·TTL/(1-ρ²)
//
// so the holder has stopped at least that long before anyone may take a
// session over (1.98 s at the defaults and 1,000 ppm of drift, 20 times
// what crystal oscillators are specified for), with no assumption about the
// two wall clocks.
func TestSafetyArgument(t *testing.T) {
	const maxDrift = 1e-3
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cfg := DefaultConfig("w")
	bound := time.Duration(float64(cfg.SafetyMargin) - 2*maxDrift*float64(cfg.TTL)/(1-maxDrift*maxDrift))
	if bound <= 0 {
		t.Fatalf("the default margin %s does not cover %g drift over the TTL %s", cfg.SafetyMargin, maxDrift, cfg.TTL)
	}
	mono := func(real time.Duration, rho float64) time.Time {
		return t0.Add(time.Duration(float64(real) * (1 + rho)))
	}
	toReal := func(m time.Time, rho float64) time.Duration { return time.Duration(float64(m.Sub(t0)) / (1 + rho)) }
	minGap := time.Duration(1 << 62)
	delays := []time.Duration{0, 5 * time.Millisecond, cfg.RPCTimeout}
	for _, rhoH := range []float64{-maxDrift, 0, maxDrift} {
		for _, rhoO := range []float64{-maxDrift, 0, maxDrift} {
			for _, applied := range delays { // heartbeat c applied at s + applied (s = 0)
				for phase := time.Duration(0); phase < cfg.WatchEvery(); phase += 50 * time.Millisecond {
					for _, served := range delays { // read served this long after its send
						for _, back := range delays { // and its reply received this long after
							trustEnd := toReal(TrustedUntil(mono(0, rhoH), cfg.TTL, cfg.SafetyMargin), rhoH)
							var w watch
							death := time.Duration(-1)
							for send := phase - cfg.WatchEvery(); send < 5*cfg.TTL; send += cfg.WatchEvery() {
								at := send + served
								seq := int64(1) // the counter before heartbeat c
								if at >= applied {
									seq = 2
								}
								received := mono(at+back, rhoO)
								w.observe(WorkerRecord{State: schema.WorkerAlive, Epoch: 1, HeartbeatSeq: seq, TTL: cfg.TTL}, received)
								if seq == 2 && w.deathAllowed(received, cfg.TTL) {
									death = toReal(received, rhoO)
									break
								}
							}
							if death < 0 {
								t.Fatal("never declared dead")
							}
							if gap := death - trustEnd; gap < minGap {
								minGap = gap
							}
						}
					}
				}
			}
		}
	}
	if minGap < bound {
		t.Fatalf("a watcher may declare the holder dead %s after it stopped acting; the README promises ≥ %s", minGap, bound)
	}
	t.Logf("smallest gap between the holder's stop and a takeover: %s (bound %s)", minGap, bound)
}
