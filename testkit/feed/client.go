package feed

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Client drives a feed's HTTP controls (a feed in another process).
type Client struct {
	// Base is the feed's HTTP base, e.g. "http://127.0.0.1:8790".
	Base string
	// HTTP is the client used (default: one with a 10 s timeout).
	HTTP *http.Client
}

// NewClient returns a Client for the feed at base.
func NewClient(base string) *Client {
	return &Client{Base: strings.TrimSuffix(base, "/"), HTTP: &http.Client{Timeout: 10 * time.Second}}
}

// TrustCA makes c verify an https feed (one serving wss) against the CA
// certificates in file (PEM) as well as the system's.
func (c *Client) TrustCA(file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("feed client CA: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if !roots.AppendCertsFromPEM(b) {
		return fmt.Errorf("feed client CA: no PEM certificate in %s", file)
	}
	c.HTTP = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	return nil
}

// URL is the WebSocket URL of session on this feed.
func (c *Client) URL(session string) string { return URL(c.Base, session) }

// Stats fetches the feed's Stats.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	err := c.do(ctx, http.MethodGet, "/control/stats", nil, &st)
	return st, err
}

// Records fetches the connection records (of session only when not "").
func (c *Client) Records(ctx context.Context, session string) ([]ConnRecord, error) {
	var out []ConnRecord
	err := c.do(ctx, http.MethodGet, "/control/records", url.Values{"session": {session}}, &out)
	return out, err
}

// SetMode switches the one-connection policy.
func (c *Client) SetMode(ctx context.Context, m Mode) error {
	return c.do(ctx, http.MethodPost, "/control/mode", url.Values{"mode": {string(m)}}, nil)
}

// Drop drops the open connections of session ("" = all); abort closes the
// TCP connections without a close frame. It returns how many were dropped.
func (c *Client) Drop(ctx context.Context, session string, abort bool) (int, error) {
	var out struct {
		Dropped int `json:"dropped"`
	}
	err := c.do(ctx, http.MethodPost, "/control/drop", url.Values{"session": {session}, "abort": {strconv.FormatBool(abort)}}, &out)
	return out.Dropped, err
}

// SetRefuse refuses (or admits again) new connections for session ("" = all).
func (c *Client) SetRefuse(ctx context.Context, session string, on bool) error {
	return c.do(ctx, http.MethodPost, "/control/refuse", url.Values{"session": {session}, "on": {strconv.FormatBool(on)}}, nil)
}

// SetSchedule sets the max connection age and the shutdown notice (0: off)
// of the connections opened from now on (Server.SetSchedule).
func (c *Client) SetSchedule(ctx context.Context, maxAge, notice time.Duration) error {
	return c.do(ctx, http.MethodPost, "/control/schedule", url.Values{"max_age": {maxAge.String()}, "notice": {notice.String()}}, nil)
}

// SetAllowStandby admits (or no longer admits) standby connections beside
// an owner's (Server.SetAllowStandby).
func (c *Client) SetAllowStandby(ctx context.Context, on bool) error {
	return c.do(ctx, http.MethodPost, "/control/standby", url.Values{"allow": {strconv.FormatBool(on)}}, nil)
}

// SetPoison starts (kind not PoisonOff) or ends the poisoning of session's
// messages, every every-th seq (Server.SetPoison); it returns the episode
// started or ended.
func (c *Client) SetPoison(ctx context.Context, session string, kind Poison, every int64) (PoisonSpan, error) {
	var out PoisonSpan
	if kind == PoisonOff {
		kind = "off"
	}
	err := c.do(ctx, http.MethodPost, "/control/poison", url.Values{"session": {session}, "kind": {string(kind)}, "every": {strconv.FormatInt(every, 10)}}, &out)
	return out, err
}

// do sends a control request (without its empty query parameters) and
// decodes the answer into out (when not nil).
func (c *Client) do(ctx context.Context, method, path string, q url.Values, out any) error {
	for k, v := range q {
		if v[0] == "" {
			delete(q, k)
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path+"?"+q.Encode(), nil)
	if err != nil {
		return fmt.Errorf("feed %s %s: %w", method, path, err)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("feed %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("feed %s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	if out == nil {
		out = new(any)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("feed %s %s: decode: %w", method, path, err)
	}
	return nil
}
