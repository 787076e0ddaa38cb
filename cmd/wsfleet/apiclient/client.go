// Package apiclient is the client of the ingest API (start, stop, status and
// list sessions, list workers) that the wsfleet command line (cmd/wsfleet) and the local
// stack's harnesses use. By default it talks to the local stack's ingest
// front (http://127.0.0.1:8787); given a deployed API's URL it signs every
// request with SigV4 (service "execute-api") using the standard AWS
// credential chain.
package apiclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionapi"
)

// DefaultAPI is the local stack's ingest front.
const DefaultAPI = "http://127.0.0.1:8787"

// EnvAPI names the environment variable that overrides DefaultAPI.
const EnvAPI = schema.EnvAPI

// The API's bodies, from the shared contract.
type (
	StartRequest = sessionapi.StartRequest
	Change       = sessionapi.Change
	Session      = sessionapi.Session
	Page         = sessionapi.Page
	Worker       = sessionapi.Worker
	Workers      = sessionapi.Workers
)

// APIError is a non-2xx answer.
type APIError struct {
	Status int
	Code   string
	Msg    string
	// Retryable: the API says the same request is safe to send again
	// (the table did not answer in time, a concurrent change); the client
	// already did, up to MaxAttempts times.
	Retryable bool
}

// MaxAttempts is how many times the client sends a request the API answers
// retryable (its error body's "retryable": true), waiting RetryBackoff,
// then twice that, between attempts: a start or stop is idempotent, and the
// API says when its outcome was unknown.
const (
	MaxAttempts  = 4
	RetryBackoff = 200 * time.Millisecond
)

func (e *APIError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Msg)
	}
	return fmt.Sprintf("HTTP %d: %s", e.Status, e.Msg)
}

// Signer signs a request whose body hashes (hex SHA-256) to payloadHash.
type Signer interface {
	Sign(ctx context.Context, req *http.Request, payloadHash string) error
}

// Client calls the ingest API.
type Client struct {
	base   *url.URL
	http   *http.Client
	signer Signer // nil: unsigned
}

// NewClient returns a client of the API at base. signer may be nil (the
// local front takes unsigned requests).
func NewClient(base string, signer Signer) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("api url %q: want http(s)://host[:port][/stage]", base)
	}
	return &Client{base: u, http: &http.Client{Timeout: 15 * time.Second}, signer: signer}, nil
}

// CloseIdleConnections closes the client's idle keep-alive connections.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// Base is the API's base URL.
func (c *Client) Base() string { return c.base.String() }

// IsLocal reports whether the API URL names a loopback host (the local stack).
func IsLocal(api string) bool {
	u, err := url.Parse(api)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// SigV4 signs with the standard AWS credential chain for API Gateway.
type SigV4 struct {
	cfg    aws.Config
	signer *v4.Signer
}

// NewSigV4 loads the standard AWS configuration (environment, shared files,
// SSO, IMDS ...). region overrides the configured one when not empty; when
// neither is set it is taken from an execute-api host name.
func NewSigV4(ctx context.Context, api, region string) (*SigV4, error) {
	var opts []func(*config.LoadOptions) error
	if region == "" {
		region = regionFromHost(api)
	}
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load aws config: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("sigv4: no AWS region (set AWS_REGION or --region)")
	}
	return &SigV4{cfg: cfg, signer: v4.NewSigner()}, nil
}

// regionFromHost reads REGION from ID.execute-api.REGION.amazonaws.com.
func regionFromHost(api string) string {
	u, err := url.Parse(api)
	if err != nil {
		return ""
	}
	parts := strings.Split(u.Hostname(), ".")
	for i, p := range parts {
		if p == "execute-api" && i+1 < len(parts) {
			return parts[i+1]
		}
	}
	return ""
}

// Sign implements Signer.
func (s *SigV4) Sign(ctx context.Context, req *http.Request, payloadHash string) error {
	creds, err := s.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("sigv4 credentials: %w", err)
	}
	if err := s.signer.SignHTTP(ctx, creds, req, payloadHash, "execute-api", s.cfg.Region, time.Now()); err != nil {
		return fmt.Errorf("sigv4 sign: %w", err)
	}
	return nil
}

// Start asks for a session to be started.
func (c *Client) Start(ctx context.Context, r StartRequest) (Change, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return Change{}, fmt.Errorf("start: encode: %w", err)
	}
	var out Change
	err = c.do(ctx, http.MethodPost, "/sessions", nil, body, &out)
	return out, err
}

// Stop asks for a session to be stopped.
func (c *Client) Stop(ctx context.Context, id string) (Change, error) {
	var out Change
	err := c.do(ctx, http.MethodPost, "/sessions/"+url.PathEscape(id)+"/stop", nil, nil, &out)
	return out, err
}

// Get returns one session.
func (c *Client) Get(ctx context.Context, id string) (Session, error) {
	var out Session
	err := c.do(ctx, http.MethodGet, "/sessions/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

// Workers returns the worker records (GET /workers).
func (c *Client) Workers(ctx context.Context) (Workers, error) {
	var out Workers
	err := c.do(ctx, http.MethodGet, "/workers", nil, nil, &out)
	return out, err
}

// ListPage returns one page of sessions (state "" = any).
func (c *Client) ListPage(ctx context.Context, state string, limit int, next string) (Page, error) {
	q := url.Values{}
	if state != "" {
		q.Set("state", state)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if next != "" {
		q.Set("next", next)
	}
	var out Page
	err := c.do(ctx, http.MethodGet, "/sessions", q, nil, &out)
	return out, err
}

// List returns every session in state, following the pages; state "" lists
// both STARTED and STOPPED (the API itself lists one state at a time).
func (c *Client) List(ctx context.Context, state string) ([]Session, error) {
	if state == "" {
		started, err := c.List(ctx, "STARTED")
		if err != nil {
			return nil, err
		}
		stopped, err := c.List(ctx, "STOPPED")
		if err != nil {
			return nil, err
		}
		return append(started, stopped...), nil
	}
	var all []Session
	next := ""
	for {
		p, err := c.ListPage(ctx, state, 100, next)
		if err != nil {
			return nil, err
		}
		all = append(all, p.Sessions...)
		if p.Next == "" {
			return all, nil
		}
		next = p.Next
	}
}

func (c *Client) do(ctx context.Context, method, path string, q url.Values, body []byte, out any) error {
	wait := RetryBackoff
	for attempt := 1; ; attempt++ {
		err := c.doOnce(ctx, method, path, q, body, out)
		var e *APIError
		if err == nil || !errors.As(err, &e) || !e.Retryable || attempt == MaxAttempts {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// doOnce sends one attempt of a request (signed anew: a signature's nonce
// is used once).
func (c *Client) doOnce(ctx context.Context, method, path string, q url.Values, body []byte, out any) error {
	u := *c.base
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawPath = ""
	if strings.Contains(path, "%") {
		u.RawPath = strings.TrimSuffix(c.base.EscapedPath(), "/") + path
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.signer != nil {
		sum := sha256.Sum256(body)
		if err := c.signer.Sign(ctx, req, hex.EncodeToString(sum[:])); err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if isDialError(err) {
			err = &UnreachableError{API: c.base.String(), Err: err}
		}
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &APIError{Status: resp.StatusCode, Msg: strings.TrimSpace(string(b))}
		var eb struct {
			Error   any    `json:"error"`
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		if json.Unmarshal(b, &eb) == nil {
			switch v := eb.Error.(type) {
			case map[string]any:
				e.Code, _ = v["code"].(string)
				if m, ok := v["message"].(string); ok {
					e.Msg = m
				}
				e.Retryable, _ = v["retryable"].(bool)
			case string:
				e.Code = eb.Code
				e.Msg = v
			}
			if eb.Message != "" {
				e.Code, e.Msg = eb.Code, eb.Message
			}
		}
		return fmt.Errorf("%s %s: %w", method, path, e)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: decode: %w", method, path, err)
	}
	return nil
}
