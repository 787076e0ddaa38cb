//go:build fleetsim

package fleetsim

import (
	"math"
	"testing"
)

// TestLightSourceAgreesWithTheFeed runs the short crash, graceful
// hand-off and hot-standby scenarios twice on one seed, once on the light
// source (the default: the worker's session code above a connection the
// source makes on each read) and once on the test feed over in-memory
// pipes through the worker's WebSocket client (Config.Feed), and checks
// that the light source changes no verdict: both safe, the same sessions
// hit by each fault and all delivering again, and about as many
// deliveries (goroutine order at one virtual instant may move a few).
func TestLightSourceAgreesWithTheFeed(t *testing.T) {
	all := Scenarios(shortWorkers, shortSessions, shortFor)
	for _, name := range []string{"crash", "term", "standby-crash"} {
		t.Run(name, func(t *testing.T) {
			sc := all[name]
			light := runT(t, sc, 1, nil)
			withFeed := sc
			withFeed.Fleet = func(c *Config) {
				if sc.Fleet != nil {
					sc.Fleet(c)
				}
				c.Feed = true
			}
			heavy := runT(t, withFeed, 1, nil)
			for _, f := range []Figures{light, heavy} {
				checkSafe(t, f)
			}
			if d := math.Abs(float64(light.Deliveries-heavy.Deliveries)) / float64(heavy.Deliveries); d > 0.02 {
				t.Errorf("deliveries: light source %d, feed %d (%.1f %% apart)", light.Deliveries, heavy.Deliveries, 100*d)
			}
			if len(light.Faults) != len(heavy.Faults) || len(light.Faults) == 0 {
				t.Fatalf("faults: light source %d, feed %d", len(light.Faults), len(heavy.Faults))
			}
			for i := range light.Faults {
				l, h := light.Faults[i], heavy.Faults[i]
				if l.Sessions != h.Sessions || l.Recovered != h.Recovered {
					t.Errorf("%s: light source hit %d, %d again; feed %d, %d", l.Kind, l.Sessions, l.Recovered, h.Sessions, h.Recovered)
				}
			}
			if light.Tenures != heavy.Tenures {
				t.Logf("tenures: light source %d, feed %d", light.Tenures, heavy.Tenures)
			}
		})
	}
}
