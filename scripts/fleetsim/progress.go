//go:build fleetsim

package fleetsim

import (
	"fmt"
	"sync"
	"time"
)

// Progress is a running scenario at one virtual minute: what make sim's
// progress lines show (TestSim).
type Progress struct {
	Scenario string
	Size     Size          // the scenario's (the workers it started with)
	Virtual  time.Duration // from the fleet's start
	// Delivering are the sessions that have delivered so far, of Started.
	Delivering, Started int
	// WriteUnits and ReadUnits are the table's (indexes excluded) per
	// second over the last minute.
	WriteUnits, ReadUnits float64
	// Throttled are the calls the table refused so far.
	Throttled int64
}

func (p Progress) String() string {
	return fmt.Sprintf("%s %s at %s virtual: %d of %d sessions delivering; table %.0f write / %.0f read units/s over the last minute; %d calls throttled",
		p.Scenario, p.Size, p.Virtual, p.Delivering, p.Started, p.WriteUnits, p.ReadUnits, p.Throttled)
}

// progress calls f once a virtual minute (on the bubble's clock, from the
// fleet's start) until the returned stop, which waits for it to end. It
// reads the meters and counts and changes nothing: a run's figures are
// the same with it.
func (fl *Fleet) progress(sc Scenario, f func(Progress)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tk := time.NewTicker(time.Minute)
		defer tk.Stop()
		last := fl.Table.TableMeter()
		for {
			select {
			case <-done:
				return
			case now := <-tk.C:
				m := fl.Table.TableMeter()
				fl.mu.Lock()
				started := len(fl.sessions)
				fl.mu.Unlock()
				f(Progress{
					Scenario: sc.Name, Size: Size{Workers: sc.Workers, Sessions: sc.Sessions}, Virtual: now.Sub(fl.t0).Round(time.Second),
					Delivering: fl.Record.Delivering(), Started: started,
					WriteUnits: (m.Table.Write.Total - last.Table.Write.Total) / 60, ReadUnits: (m.Table.Read.Total - last.Table.Read.Total) / 60,
					Throttled: m.Total().Throttled,
				})
				last = m
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
