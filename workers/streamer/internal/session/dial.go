// The dial: the handshake with the stored headers and the resume
// parameter, how a dial error is classified and recorded, and URL helpers.

package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/netguard"
	"github.com/wsfleet/wsfleet/shared/secretref"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/secrets"
)

// HandshakeStatusError is a handshake the source answered with an HTTP
// status other than 101 (redirects are ErrRedirected). TLS is set when a
// plain ws:// handshake reached a port that speaks TLS (the server answered
// 400 "client sent an HTTP request to an HTTPS server"): the text then
// says to use wss://.
type HandshakeStatusError struct {
	Code int
	TLS  bool
}

func (e *HandshakeStatusError) Error() string {
	text := "handshake refused: HTTP " + strconv.Itoa(e.Code)
	if e.TLS {
		text += " (the source speaks TLS: use wss:// in ws_url)"
	}
	return text
}

// plainToTLS reports whether resp is a TLS server's answer to a plain-HTTP
// request (Go's net/http answers 400 with this body; coder/websocket keeps
// the first KiB of a refused handshake's body).
func plainToTLS(resp *http.Response) bool {
	if resp.StatusCode != http.StatusBadRequest || resp.Request == nil || resp.Request.URL == nil ||
		resp.Request.URL.Scheme != "http" || resp.Body == nil {
		return false
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return strings.Contains(strings.ToLower(string(b)), "http request to an https server")
}

// Permanent reports whether a dial error can never go away by retrying the
// same configuration: an address refused by policy, a redirect that is not
// followed (the session does not opt in, or the hop is beyond its
// follow_redirects or outside the allowlist), or a handshake answered 401,
// 403, 404 or 410, or a secret reference that cannot be resolved for good
// (secrets.ErrPermanent: the secret is missing, access is denied, no
// provider is configured), or a secret reference whose value makes its
// header value or open message larger than the stored form allows
// (secretref.ErrTooLarge), or a secret the deployment does not bind to the
// host it would be sent to (secretref.ErrNotBound, ErrSecretRedirected).
// Everything else (timeouts, TLS, 5xx, a refused
// connection, Secrets Manager throttling, …) is transient.
func Permanent(err error) bool {
	if errors.Is(err, netguard.ErrRefused) || errors.Is(err, ErrRedirected) || errors.Is(err, ErrRedirectRefused) ||
		errors.Is(err, secrets.ErrPermanent) || errors.Is(err, secretref.ErrTooLarge) ||
		errors.Is(err, secretref.ErrNotBound) || errors.Is(err, ErrSecretRedirected) {
		return true
	}
	var hs *HandshakeStatusError
	if errors.As(err, &hs) {
		switch hs.Code {
		case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusGone:
			return true
		}
	}
	return false
}

// MaxErrorText bounds the error text a session keeps and records.
const MaxErrorText = 256

// ErrorText is the text of a dial error as the session records it: without
// the URL the dial error names, at most MaxErrorText bytes.
func ErrorText(err error) string {
	var de *dialError
	if errors.As(err, &de) {
		err = de.cause
	}
	text := err.Error()
	if len(text) > MaxErrorText {
		text = strings.ToValidUTF8(text[:MaxErrorText], "")
	}
	return text
}

// dialError is a failed dial: the (redacted) target and why.
type dialError struct {
	target string
	cause  error
}

func (e *dialError) Error() string { return "dial " + e.target + ": " + e.cause.Error() }
func (e *dialError) Unwrap() error { return e.cause }

// dial connects to the spec's URL (with the resume parameter) and headers,
// and returns the open messages to send on the connection. The secret
// references of both are expanded here, at every dial, once the source
// host admitted it (a token a Provider mints is then as fresh as it can
// be), within the dial's deadline; a failure is a failed dial.
func (s *Session) dial(ctx context.Context, it lease.Item, p *proto) (Conn, []frame, error) {
	// pctx ends the admission wait and the dial when the session ends.
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	s.mu.Lock()
	if s.end != nil {
		s.mu.Unlock()
		return nil, nil, s.end
	}
	s.dialCancel = pcancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.dialCancel = nil
		s.mu.Unlock()
	}()
	return s.dialOn(pctx, it, p)
}

// dialOn is dial, bounded by pctx (which the caller ends when the session
// ends): Run's dials, a planned reconnect's and a standby's. The source
// host's admission (the dial rate, then a handshake slot) is waited for
// here, on the caller's goroutine: the wait is shallow (a timer, a
// channel), and a session queued behind its host's rate holds one
// goroutine, not two (the runtime never frees a goroutine's descriptor,
// about 480 B: a claim burst's queue of waiting sessions, each with a
// goroutine of its own, stayed in the heap for the worker's life —
// measured: 3,435 descriptors for 2,000 sessions, the bare client 2,143).
// The dial itself then runs on a fresh stack (onFreshStack): its chain
// (the URL, the secrets' expansion, net/http's handshake) would otherwise
// grow the stack of the goroutine that reads the connection for the
// session's life (measured in the fleet simulator: from 4 to 8 KiB a
// session while the fleet claims); the host it is admitted for was parsed
// with the spec (proto.host), so nothing deep runs here.
func (s *Session) dialOn(pctx context.Context, it lease.Item, p *proto) (Conn, []frame, error) {
	if err := s.env.Dials.Wait(pctx, p.host, s.rnd); err != nil {
		return nil, nil, fmt.Errorf("dial admission for %s: %w", p.host, err)
	}
	if err := s.env.Handshakes.Acquire(pctx, p.host); err != nil {
		return nil, nil, fmt.Errorf("dial slot: %w", err)
	}
	defer s.env.Handshakes.Release(p.host) // after onFreshStack, which waits for the handshake's goroutine
	type dialed struct {
		conn   Conn
		frames []frame
	}
	d, err := onFreshStack(func() (dialed, error) {
		conn, frames, err := s.dialFresh(pctx, it, p)
		return dialed{conn, frames}, err
	})
	return d.conn, d.frames, err
}

// dialFresh is dialOn's dial, on the fresh stack, once the host admitted
// it.
func (s *Session) dialFresh(pctx context.Context, it lease.Item, p *proto) (Conn, []frame, error) {
	target, err := ResumeURL(p.url, p.resumeParam, s.lastSeq.Load(), p.resumeLast)
	if err != nil {
		return nil, nil, err
	}
	u, err := url.Parse(target)
	if err != nil { // ResumeURL parsed it: unreachable
		return nil, nil, fmt.Errorf("parse ws_url %s: %w", spec.RedactURL(target), errors.Unwrap(err))
	}
	slot := &rawSlot{}
	// The dial's one timeout authority (dialtimeout.go).
	dctx, cancel := context.WithTimeout(withRedirectLimit(context.WithValue(pctx, rawSlotKey{}, slot), p.settings.FollowRedirects), s.dialTimeout(p))
	defer cancel()
	parts, err := s.parts(dctx, it, p, u) // its header is the handshake's own: the handshake may add to it
	if err != nil {
		return nil, nil, err
	}
	hdr := parts.header
	if name := s.env.Config.TenureHeader; name != "" {
		if hdr == nil {
			hdr = http.Header{}
		}
		hdr.Set(name, s.tenure())
	}
	dial := s.env.Dial
	if dial == nil {
		dial = dialWS
	}
	conn, resp, err := dial(dctx, target, &websocket.DialOptions{
		HTTPClient:      s.env.Client,
		HTTPHeader:      hdr,
		Subprotocols:    p.settings.Subprotocols,
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		slot.close()
		return nil, nil, &dialError{target: spec.RedactURL(target), cause: dialCause(err, resp)}
	}
	var final *url.URL
	if resp != nil && resp.Request != nil {
		final = resp.Request.URL
	}
	if err := s.landed(p, u, final); err != nil {
		_ = conn.CloseNow()
		slot.close()
		return nil, nil, &dialError{target: spec.RedactURL(target), cause: err}
	}
	conn.SetReadLimit(s.env.Config.ReadLimit)
	return conn, parts.open, nil
}

// tenure is the value of the dials' tenure header: "<worker id>/<lease
// epoch>", or for a standby's dials "<worker id>/standby/<standby epoch>".
func (s *Session) tenure() string {
	if s.held == nil {
		sb := s.ext.standby
		return sb.worker + "/standby/" + strconv.FormatInt(sb.epoch, 10)
	}
	return s.env.Config.WorkerID + "/" + strconv.FormatInt(s.held.Epoch(), 10)
}

// dialCause strips the URL (which may carry credentials in its query) from
// a dial error.
func dialCause(err error, resp *http.Response) error {
	if errors.Is(err, ErrRedirectRefused) {
		var ue *url.Error
		if errors.As(err, &ue) {
			return ue.Err
		}
		return err
	}
	if resp != nil && resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return fmt.Errorf("%w (HTTP %d)", ErrRedirected, resp.StatusCode)
	}
	if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
		return &HandshakeStatusError{Code: resp.StatusCode, TLS: plainToTLS(resp)}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// ResumeURL adds (or replaces) param=last+1 (param=last when inclusive) in
// raw's query when param is set and a sequence number was delivered; other
// parameters keep their order.
func ResumeURL(raw, param string, last int64, inclusive bool) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parse ws_url %s: %w", spec.RedactURL(raw), errors.Unwrap(err))
	}
	if param == "" || last == lease.NoSeq {
		return raw, nil
	}
	var kept []string
	if u.RawQuery != "" {
		for _, kv := range strings.Split(u.RawQuery, "&") {
			k, _, _ := strings.Cut(kv, "=")
			if uk, err := url.QueryUnescape(k); err == nil && uk == param {
				continue
			}
			kept = append(kept, kv)
		}
	}
	from := last + 1
	if inclusive {
		from = last
	}
	kept = append(kept, url.QueryEscape(param)+"="+strconv.FormatInt(from, 10))
	u.RawQuery = strings.Join(kept, "&")
	return u.String(), nil
}
