package streamer

import "github.com/wsfleet/wsfleet/workers/streamer/internal/secrets"

// The secret provider seam (Deps.Secrets), named here because the package
// that defines it is internal: a program embedding the worker implements
// or builds a SecretProvider and marks a lasting failure with
// ErrSecretPermanent without importing it.
type (
	// SecretProvider resolves a secret reference's name to the secret's
	// whole value (its SecretString; a "#key" is picked out of the JSON by
	// the worker). Its errors must never hold the value: they become the
	// session's last_error and are logged.
	SecretProvider = secrets.Provider
	// SecretProviderFunc is a function that is a SecretProvider.
	SecretProviderFunc = secrets.ProviderFunc
)

// ErrSecretPermanent, wrapped by a SecretProvider's error, says retrying
// cannot help (the secret is missing, access is denied): the session fails
// at once instead of reconnecting.
var ErrSecretPermanent = secrets.ErrPermanent
