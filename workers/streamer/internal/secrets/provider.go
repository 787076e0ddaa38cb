package secrets

import (
	"context"

	"github.com/wsfleet/wsfleet/shared/secretref"
)

// Provider resolves the name in a secret reference ({{secret:NAME}} or
// {{secret:NAME#key}}) to the secret's whole value, its SecretString: the
// worker asks it at every dial, first connect and reconnects alike, and
// picks a #key out of the value itself (secretref.Expand). The Resolver is
// the Secrets Manager Provider; a program embedding the worker may supply
// its own instead (a vault, a token minted per connect, a file), which
// then owns its caching. An error is a failed connect: one wrapping
// ErrPermanent fails the session, any other is retried at the next
// reconnect. A Provider's errors must never hold the value: they are
// recorded on the session and logged.
type Provider interface {
	Resolve(ctx context.Context, name string) (string, error)
}

// ProviderFunc is a function that is a Provider.
type ProviderFunc func(ctx context.Context, name string) (string, error)

// Resolve calls f.
func (f ProviderFunc) Resolve(ctx context.Context, name string) (string, error) { return f(ctx, name) }

// Lookup adapts p to secretref.Expand's lookup, asking under ctx.
func Lookup(ctx context.Context, p Provider) func(secretref.Ref) (string, error) {
	return func(r secretref.Ref) (string, error) { return p.Resolve(ctx, r.Name) }
}
