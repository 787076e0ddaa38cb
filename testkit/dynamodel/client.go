package dynamodel

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Control drives a model running in another process (cmd/dynamodel)
// through its control endpoints (control.go), as Model's own methods drive
// one in this process.
type Control struct {
	endpoint string
	http     *http.Client
}

// NewControl is a Control of the model at endpoint (http://127.0.0.1:PORT).
func NewControl(endpoint string) *Control {
	return &Control{endpoint: strings.TrimSuffix(endpoint, "/"), http: &http.Client{Timeout: 10 * time.Second}}
}

// Endpoint is the model's URL.
func (c *Control) Endpoint() string { return c.endpoint }

// LagEpisode is Model.LagEpisode.
func (c *Control) LagEpisode(ctx context.Context, lag, dur time.Duration) error {
	return c.post(ctx, "lag", url.Values{"lag": {lag.String()}, "for": {dur.String()}})
}

// Storm is Model.Storm.
func (c *Control) Storm(ctx context.Context, kind Fault, share float64, dur time.Duration) error {
	return c.post(ctx, "storm", url.Values{"kind": {string(kind)}, "share": {ftoa(share)}, "for": {dur.String()}})
}

// HoldTable is Model.HoldTable.
func (c *Control) HoldTable(ctx context.Context, table string, fraction float64, dur time.Duration) error {
	return c.post(ctx, "hold", url.Values{"table": {table}, "fraction": {ftoa(fraction)}, "for": {dur.String()}})
}

// HotKey is Model.HotKey.
func (c *Control) HotKey(ctx context.Context, table, key string, fraction float64, dur time.Duration) error {
	return c.post(ctx, "hotkey", url.Values{"table": {table}, "key": {key}, "fraction": {ftoa(fraction)}, "for": {dur.String()}})
}

// Meter is Model.Meter.
func (c *Control) Meter(ctx context.Context) (Meter, error) {
	var m Meter
	err := c.get(ctx, "meter", &m)
	return m, err
}

// Ready reports whether the model answers its status endpoint.
func (c *Control) Ready(ctx context.Context) error {
	var st map[string]any
	return c.get(ctx, "status", &st)
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func (c *Control) post(ctx context.Context, what string, q url.Values) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint+controlPrefix+what+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	_, err = c.do(req, what)
	return err
}

func (c *Control) get(ctx context.Context, what string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.endpoint+controlPrefix+what, nil)
	if err != nil {
		return err
	}
	b, err := c.do(req, what)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("dynamodel %s: %w", what, err)
	}
	return nil
}

func (c *Control) do(req *http.Request, what string) ([]byte, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("dynamodel %s: %w", what, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("dynamodel %s: %w", what, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("dynamodel %s: %s: %s", what, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, nil
}
