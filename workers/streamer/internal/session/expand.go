// Dial-time expansion of secret references: what one dial sends, built
// from the compiled spec with the current secret values.

package session

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/secretref"
	"github.com/wsfleet/wsfleet/shared/source"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/secrets"
)

// dialParts is what one dial sends: the handshake's headers and the open
// messages' frames, placeholders rendered and secret references
// ({{secret:NAME}}, shared/secretref) replaced by their values. It is made
// anew for every dial and dropped with it: the proto, kept across the
// dials of a generation, and the stored spec keep the references, so a
// rotated secret (or a token a Provider mints per connection) reaches the
// next dial, and no value outlives its connection attempt. Its contents
// are credentials: never logged, never put in an error.
type dialParts struct {
	header http.Header
	open   []frame
}

// frame is one open message as sent.
type frame struct {
	data   []byte
	binary bool
}

// noProvider stands for a nil Env.Secrets: a reference cannot be resolved,
// and retrying will not change that.
var noProvider = secrets.ProviderFunc(func(_ context.Context, name string) (string, error) {
	return "", &secrets.Error{Name: name, Reason: "no secret provider configured", Permanent: true}
})

// parts renders and expands p for a dial of it, asking the Provider under
// ctx (the dial's deadline). Each secret name is asked once per dial, so
// every reference to it in the headers and open messages carries the same
// value. An error names the header or open message and the secret, never a
// value; it wraps secrets.ErrPermanent when retrying cannot help.
//
// A reference whose secret the deployment does not bind to target's host
// (Config.SecretHosts) fails the dial for good before any value is asked
// for: the headers go to target's origin only, and the open messages are
// checked again against the host the handshake ends on (landed).
//
// Expanding waits on the Provider and decodes JSON (a #key): it runs on the
// dial's fresh stack (dialOn), and ends with ctx at the latest (the
// Resolver stops waiting then).
func (s *Session) parts(ctx context.Context, it lease.Item, p *proto, target *url.URL) (*dialParts, error) {
	d := &dialParts{header: p.header.Clone(), open: make([]frame, 0, len(p.open))}
	var lookup func(secretref.Ref) (string, error)
	// expand bounds what a value expands to by the limit the stored form
	// has (a header value, an open message and all of them): a value is
	// sized before it is built, so many references to a large secret fail
	// the dial (for good: secretref.ErrTooLarge) instead of its memory.
	expand := func(v string, max int) (string, error) {
		if !secretref.Contains(v) {
			return v, nil
		}
		if err := s.env.Config.SecretHosts.Check(v, target); err != nil {
			return "", err
		}
		if lookup == nil {
			lookup = s.lookup(ctx)
		}
		return secretref.ExpandWithin(v, max, lookup)
	}
	// Sorted: with several bad headers, the error names the same one at
	// every dial (last_error is recorded only when its text changes).
	names := make([]string, 0, len(d.header))
	for k := range d.header {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		for i, v := range d.header[k] {
			x, err := expand(v, spec.MaxHeaderValueLen)
			if err != nil {
				return nil, fmt.Errorf("header %s: %w", k, err)
			}
			d.header[k][i] = x
		}
	}
	vars := s.vars(it, p)
	total := 0 // the open messages' bytes so far
	for i, m := range p.open {
		data, binary := m.Bytes(vars) // binary_b64 is neither templated nor expanded
		if !binary {
			x, err := expand(string(data), min(source.MaxOpenMessageBytes, source.MaxOpenTotalBytes-total))
			if err != nil {
				return nil, fmt.Errorf("open_messages[%d]: %w", i, err)
			}
			data = []byte(x)
		}
		total += len(data)
		d.open = append(d.open, frame{data: data, binary: binary})
	}
	return d, nil
}

// ErrSecretRedirected marks a handshake redirected to another origin than
// ws_url's while an open message holds a secret reference: the headers
// were dropped on the way, and the open messages are not sent either.
var ErrSecretRedirected = errors.New("the handshake was redirected to another origin, and an open message holds a secret reference: it is not sent there")

// landed checks the connection a handshake to target ended on (final: the
// last request's URL, after redirects) before the open messages go out on
// it: when one of them holds a reference, final must have target's origin
// (ErrSecretRedirected) and a host the reference's secret is bound to.
func (s *Session) landed(p *proto, target, final *url.URL) error {
	if !p.openRefs || final == nil {
		return nil
	}
	if origin(final) != origin(target) {
		return ErrSecretRedirected
	}
	for i, m := range p.open {
		if m.Text == nil {
			continue
		}
		if err := s.env.Config.SecretHosts.Check(*m.Text, final); err != nil {
			return fmt.Errorf("open_messages[%d]: %w", i, err)
		}
	}
	return nil
}

// lookup is the session's Provider (noProvider when none) as Expand's
// lookup under ctx, asking each name once.
func (s *Session) lookup(ctx context.Context) func(secretref.Ref) (string, error) {
	prov := s.env.Secrets
	if prov == nil {
		prov = noProvider
	}
	ask := secrets.Lookup(ctx, prov)
	got := map[string]string{}
	return func(r secretref.Ref) (string, error) {
		if v, ok := got[r.Name]; ok {
			return v, nil
		}
		v, err := ask(r)
		if err != nil {
			return "", err
		}
		got[r.Name] = v
		return v, nil
	}
}
