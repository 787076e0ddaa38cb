package api

import (
	"io"
	"sync"
	"time"

	"github.com/wsfleet/wsfleet/shared/metrics"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// DimCode is the extra dimension of the per-code Rejects metric.
const DimCode = schema.DimCode

// meter holds the invocation's metrics: counters under [Environment,
// Service=ingest], and schema.MetricRejects once more per error code under
// [Environment, Service, Code]. Each flush writes one EMF line per registry
// that recorded something.
type meter struct {
	out       io.Writer
	namespace string
	env       string
	main      *metrics.Registry

	mu     sync.Mutex
	byCode map[string]*metrics.Registry
}

func newMeter(namespace, env string, out io.Writer) *meter {
	return &meter{
		out:       out,
		namespace: namespace,
		env:       env,
		main:      metrics.NewRegistry(namespace, map[string]string{schema.DimEnvironment: env, schema.DimService: schema.ServiceIngest}),
		byCode:    map[string]*metrics.Registry{},
	}
}

func (m *meter) add(name string) { m.main.Add(name, 1) }

// reject counts one refused request: in total and under its code.
func (m *meter) reject(code string) {
	m.main.Add(schema.MetricRejects, 1)
	m.mu.Lock()
	r, ok := m.byCode[code]
	if !ok {
		r = metrics.NewRegistry(m.namespace, map[string]string{
			schema.DimEnvironment: m.env, schema.DimService: schema.ServiceIngest, DimCode: code,
		})
		m.byCode[code] = r
	}
	m.mu.Unlock()
	r.Add(schema.MetricRejects, 1)
}

// flush writes what was recorded since the last flush.
func (m *meter) flush(now time.Time) error {
	if m.out == nil {
		return nil
	}
	if _, err := m.main.Flush(m.out, now); err != nil {
		return err
	}
	m.mu.Lock()
	regs := make([]*metrics.Registry, 0, len(m.byCode))
	for _, r := range m.byCode {
		regs = append(regs, r)
	}
	m.mu.Unlock()
	for _, r := range regs {
		if _, err := r.Flush(m.out, now); err != nil {
			return err
		}
	}
	return nil
}
