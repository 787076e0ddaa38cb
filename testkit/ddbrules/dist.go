package ddbrules

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Dist is a distribution of durations: a lognormal body given by its median
// and its 99th percentile (P99 <= Median: every draw is Median), plus a
// share of spikes, each adding a duration drawn uniformly from [SpikeMin,
// SpikeMax] to the body. The zero Dist always draws 0.
type Dist struct {
	Median     time.Duration `json:"median"`
	P99        time.Duration `json:"p99"`
	SpikeShare float64       `json:"spike_share"`
	SpikeMin   time.Duration `json:"spike_min"`
	SpikeMax   time.Duration `json:"spike_max"`
}

// z99 is the standard normal's 99th percentile.
const z99 = 2.3263478740408408

// IsZero reports whether d always draws 0.
func (d Dist) IsZero() bool { return d.Median <= 0 && (d.SpikeShare <= 0 || d.SpikeMax <= 0) }

// Draw is one duration drawn from d with r.
func (d Dist) Draw(r *rand.Rand) time.Duration {
	var v time.Duration
	if d.Median > 0 {
		v = d.Median
		if d.P99 > d.Median {
			sigma := math.Log(float64(d.P99)/float64(d.Median)) / z99
			v = time.Duration(float64(d.Median) * math.Exp(sigma*r.NormFloat64()))
		}
	}
	if d.SpikeShare > 0 && r.Float64() < d.SpikeShare {
		spike := d.SpikeMin
		if d.SpikeMax > d.SpikeMin {
			spike += time.Duration(r.Int64N(int64(d.SpikeMax - d.SpikeMin)))
		}
		v += spike
	}
	return v
}

// Check reports a distribution that cannot be drawn from (what names it in
// the error).
func (d Dist) Check(what string) error {
	if d.Median < 0 || d.P99 < 0 || d.SpikeMin < 0 || d.SpikeMax < d.SpikeMin || d.SpikeShare < 0 || d.SpikeShare > 1 {
		return fmt.Errorf("%s: invalid distribution %+v", what, d)
	}
	return nil
}
