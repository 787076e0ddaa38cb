// Package backoff computes reconnect delays: exponential, capped, with
// "equal jitter" (a delay drawn uniformly from [d/2, d]), so that sessions a
// source dropped together do not come back in lockstep, and no delay is ever
// shorter than half its step.
package backoff

import (
	"errors"
	"time"

	"github.com/wsfleet/wsfleet/shared/draw"
)

// Policy is a capped exponential backoff.
type Policy struct {
	Base time.Duration // the first step (attempt 0)
	Max  time.Duration // the cap of a step
}

// Validate checks the policy.
func (p Policy) Validate() error {
	if p.Base <= 0 || p.Max < p.Base {
		return errors.New("backoff: need 0 < Base <= Max")
	}
	return nil
}

// Step is the un-jittered delay of attempt n: min(Max, Base·2^n).
func (p Policy) Step(n int) time.Duration {
	d := p.Base
	for i := 0; i < n; i++ {
		if d >= p.Max/2 {
			return p.Max
		}
		d *= 2
	}
	return min(d, p.Max)
}

// Delay is attempt n's delay for a uniform random u in [0, 1).
func (p Policy) Delay(n int, u float64) time.Duration {
	d := p.Step(n)
	return d/2 + time.Duration(u*float64(d/2))
}

// Uniform draws u in [0, 1): a *draw.Stream, the caller's.
type Uniform interface{ Float64() float64 }

// Next is Delay with u drawn from r (nil: the global source, as a nil
// *draw.Stream draws).
func (p Policy) Next(n int, r Uniform) time.Duration {
	if r == nil {
		r = (*draw.Stream)(nil)
	}
	return p.Delay(n, r.Float64())
}
