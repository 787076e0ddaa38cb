// Package metrics owns wsfleet's metric output: CloudWatch Embedded Metric
// Format (EMF) JSON lines, which the Lambda and awslogs drivers turn into
// CloudWatch metrics without any API call. A Registry aggregates counters and
// gauges in memory and Flush writes one EMF line per flush.
package metrics

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"sync"
	"time"
)

// Units understood by CloudWatch.
const (
	Count        = "Count"
	Milliseconds = "Milliseconds"
	None         = "None"
)

// Registry aggregates metric values between flushes. It is safe for
// concurrent use.
type Registry struct {
	namespace  string
	dimensions map[string]string

	mu       sync.Mutex
	counters map[string]float64
	gauges   map[string]float64
	samples  map[string][]float64
	seen     map[string]int64
	units    map[string]string
}

// NewRegistry returns a registry writing to namespace with fixed dimensions
// (for example {"Service": "streamer"}).
func NewRegistry(namespace string, dimensions map[string]string) *Registry {
	return &Registry{
		namespace:  namespace,
		dimensions: dimensions,
		counters:   map[string]float64{},
		gauges:     map[string]float64{},
		samples:    map[string][]float64{},
		seen:       map[string]int64{},
		units:      map[string]string{},
	}
}

// Add increments a counter.
func (r *Registry) Add(name string, v float64) {
	r.mu.Lock()
	r.counters[name] += v
	r.units[name] = Count
	r.mu.Unlock()
}

// Set sets a gauge.
func (r *Registry) Set(name string, v float64) {
	r.mu.Lock()
	r.gauges[name] = v
	r.units[name] = None
	r.mu.Unlock()
}

// MaxSamples is how many values of one metric a flush keeps (EMF allows 100
// values per metric per line). Past it, reservoir sampling keeps a uniform
// sample, so memory stays bounded however many values are observed.
const MaxSamples = 100

// Observe records one sample.
func (r *Registry) Observe(name string, v float64, unit string) {
	r.mu.Lock()
	vs := r.samples[name]
	r.seen[name]++
	if len(vs) < MaxSamples {
		r.samples[name] = append(vs, v)
	} else if i := rand.Int64N(r.seen[name]); i < MaxSamples {
		vs[i] = v
	}
	r.units[name] = unit
	r.mu.Unlock()
}

// ObserveDuration records d in milliseconds.
func (r *Registry) ObserveDuration(name string, d time.Duration) {
	r.Observe(name, float64(d.Microseconds())/1000, Milliseconds)
}

// Snapshot returns the current counters and gauges (for status pages).
func (r *Registry) Snapshot() map[string]float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]float64, len(r.counters)+len(r.gauges))
	for k, v := range r.counters {
		out[k] = v
	}
	for k, v := range r.gauges {
		out[k] = v
	}
	return out
}

// Flush writes one EMF line with everything recorded since the last flush
// (counters and samples reset; gauges keep their value) and returns the
// number of metrics written. It writes nothing when nothing was recorded.
func (r *Registry) Flush(w io.Writer, now time.Time) (int, error) {
	r.mu.Lock()
	fields := map[string]any{}
	var defs []map[string]string
	add := func(name string, v any) {
		fields[name] = v
		defs = append(defs, map[string]string{"Name": name, "Unit": r.units[name]})
	}
	for k, v := range r.counters {
		add(k, v)
	}
	for k, v := range r.gauges {
		add(k, v)
	}
	for k, vs := range r.samples {
		add(k, vs)
	}
	r.counters = map[string]float64{}
	r.samples = map[string][]float64{}
	r.seen = map[string]int64{}
	r.mu.Unlock()
	if len(defs) == 0 {
		return 0, nil
	}
	sort.Slice(defs, func(i, j int) bool { return defs[i]["Name"] < defs[j]["Name"] })
	dimKeys := make([]string, 0, len(r.dimensions))
	for k, v := range r.dimensions {
		fields[k] = v
		dimKeys = append(dimKeys, k)
	}
	sort.Strings(dimKeys)
	fields["_aws"] = map[string]any{
		"Timestamp": now.UnixMilli(),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace":  r.namespace,
			"Dimensions": [][]string{dimKeys},
			"Metrics":    defs,
		}},
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return 0, fmt.Errorf("encode emf: %w", err)
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return 0, fmt.Errorf("write emf: %w", err)
	}
	return len(defs), nil
}
