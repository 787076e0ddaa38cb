// Package config owns the ingest function's settings: their defaults, how
// they are read from the environment (once, in main) and how they are
// checked. Nothing else in ingest reads the environment.
package config

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/shared/netguard"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/secretref"
	"github.com/wsfleet/wsfleet/shared/suggest"
)

// PrivateIPs says which IP-literal ranges a ws_url may point at (the
// shared address policy; the worker applies the same one at dial time).
type PrivateIPs = netguard.Policy

// Private IP policies (the values of schema.EnvAllowPrivateIPs).
const (
	PrivateIPsNone     = netguard.None     // refuse loopback, private, link-local, metadata, …
	PrivateIPsLoopback = netguard.Loopback // local development: loopback allowed, the rest refused
	PrivateIPsAll      = netguard.All      // every range but cloud agents (metadata, credentials) (tests on private networks only)
)

// Config is everything the ingest function needs to start.
type Config struct {
	// TableName is the sessions table (schema.EnvTableName).
	TableName string
	// QueueURL is the work queue notifications are sent to (schema.EnvQueueURL).
	QueueURL string
	// AllowedHosts are host patterns a ws_url may name: "host.example.com"
	// (exact) or "*.example.com" (any subdomain). Empty allows any public host
	// (schema.EnvAllowedHosts, comma-separated).
	AllowedHosts []string
	// AllowPrivateIPs is the IP-literal policy (schema.EnvAllowPrivateIPs).
	AllowPrivateIPs PrivateIPs
	// SecretPrefix is the Secrets Manager name prefix a start's secret
	// references ({{secret:NAME}}, shared/secretref) must be under
	// (schema.EnvSecretPrefix; a folder ending in '/'); "": a start may
	// carry none.
	SecretPrefix string
	// SecretHosts binds each secret to the hosts its value may be sent to
	// (schema.EnvSecretHosts, shared/secretref.Bindings): a reference is
	// accepted only when its secret is bound to the ws_url's host. The
	// zero value binds none, so no reference is accepted.
	SecretHosts secretref.Bindings
	// SigningSecret, when set, makes every request carry an HMAC-SHA256
	// signature (schema.EnvSigningSecret). Never logged.
	SigningSecret string `json:"-"`
	// SigningSecretARN names a Secrets Manager secret holding the signing
	// secret (schema.EnvSigningSecretARN); main resolves it once at start.
	SigningSecretARN string
	// MetricsNamespace is the CloudWatch namespace of the EMF lines.
	MetricsNamespace string
	// Environment is the Environment dimension of every metric and a log field.
	Environment string

	// Not read from the environment.

	// MaxBodyBytes is the largest accepted request body.
	MaxBodyBytes int
	// SignatureWindow is how far a signed timestamp may be from now.
	SignatureWindow time.Duration
	// StoreTimeout bounds each DynamoDB operation of a request.
	StoreTimeout time.Duration
	// NotifyTimeout bounds the SQS send after a successful write.
	NotifyTimeout time.Duration

	// unknownEnv are the WSFLEET_ variables FromEnv found and ingest does
	// not read; Validate reports them.
	unknownEnv []error
	// secretHostsErr is FromEnv's parse error of schema.EnvSecretHosts
	// (every problem); Validate reports it.
	secretHostsErr error
}

// Defaults of the settings that have one.
const (
	DefaultEnvironment = "dev"
	// DefaultMaxBodyBytes fits a start with the largest open messages
	// (shared/source.MaxOpenTotalBytes, base64-encoded when binary).
	DefaultMaxBodyBytes    = 256 << 10
	DefaultSignatureWindow = 5 * time.Minute
	DefaultStoreTimeout    = 4 * time.Second
	DefaultNotifyTimeout   = 2 * time.Second
)

// Default returns a Config holding every default. TableName defaults to
// schema.DefaultTableName; QueueURL has no default.
func Default() Config {
	return Config{
		TableName:        schema.DefaultTableName,
		AllowPrivateIPs:  PrivateIPsNone,
		MetricsNamespace: schema.DefaultMetricsNamespace,
		Environment:      DefaultEnvironment,
		MaxBodyBytes:     DefaultMaxBodyBytes,
		SignatureWindow:  DefaultSignatureWindow,
		StoreTimeout:     DefaultStoreTimeout,
		NotifyTimeout:    DefaultNotifyTimeout,
	}
}

// FromEnv returns Default() overridden by environ (KEY=VALUE pairs,
// os.Environ() in main). It does not validate: call Validate, which also
// reports every WSFLEET_ variable of environ that ingest does not read
// (schema.IngestEnv), with the known name it is closest to.
func FromEnv(environ []string) Config {
	c := Default()
	c.unknownEnv = suggest.UnknownEnv(environ, schema.IngestEnv())
	lookup := schema.LookupIn(environ)
	str := func(name string, dst *string) {
		if v, ok := lookup(name); ok && strings.TrimSpace(v) != "" {
			*dst = strings.TrimSpace(v)
		}
	}
	str(schema.EnvTableName, &c.TableName)
	str(schema.EnvQueueURL, &c.QueueURL)
	str(schema.EnvMetricsNS, &c.MetricsNamespace)
	str(schema.EnvEnvironment, &c.Environment)
	str(schema.EnvSigningSecretARN, &c.SigningSecretARN)
	if v, ok := lookup(schema.EnvSigningSecret); ok {
		c.SigningSecret = v // taken as is: spaces may be part of a secret
	}
	var p string
	str(schema.EnvAllowPrivateIPs, &p)
	if p != "" {
		c.AllowPrivateIPs = PrivateIPs(strings.ToLower(p))
	}
	str(schema.EnvSecretPrefix, &c.SecretPrefix)
	if v, ok := lookup(schema.EnvSecretHosts); ok {
		c.SecretHosts, c.secretHostsErr = secretref.ParseBindings(v)
	}
	if v, ok := lookup(schema.EnvAllowedHosts); ok {
		c.AllowedHosts = netguard.SplitHosts(v)
	}
	return c
}

// FromOS is FromEnv(os.Environ()).
func FromOS() Config { return FromEnv(os.Environ()) }

// UnknownEnv is the part of Validate about the environment's names: every
// WSFLEET_ variable FromEnv found that ingest does not read, or nil. A
// command with side effects before Validate (ingest-local creating its
// table) checks it first.
func (c Config) UnknownEnv() error {
	if len(c.unknownEnv) == 0 {
		return nil
	}
	return fmt.Errorf("ingest config: %w", errors.Join(c.unknownEnv...))
}

// Validate reports every problem of c at once, unknown variables first.
func (c Config) Validate() error {
	errs := slices.Clone(c.unknownEnv)
	if c.TableName == "" {
		errs = append(errs, fmt.Errorf("%s: empty", schema.EnvTableName))
	}
	if c.QueueURL == "" {
		errs = append(errs, fmt.Errorf("%s: required", schema.EnvQueueURL))
	} else if !strings.HasPrefix(c.QueueURL, "https://") && !strings.HasPrefix(c.QueueURL, "http://") {
		errs = append(errs, fmt.Errorf("%s: not an http(s) URL", schema.EnvQueueURL))
	}
	switch c.AllowPrivateIPs {
	case PrivateIPsNone, PrivateIPsLoopback, PrivateIPsAll:
	default:
		errs = append(errs, fmt.Errorf("%s: %q is not one of none, loopback, all", schema.EnvAllowPrivateIPs, c.AllowPrivateIPs))
	}
	for _, h := range c.AllowedHosts {
		if err := checkHostPattern(h); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", schema.EnvAllowedHosts, err))
		}
	}
	if err := secretref.CheckPrefix(c.SecretPrefix); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", schema.EnvSecretPrefix, err))
	}
	if c.secretHostsErr != nil {
		errs = append(errs, c.secretHostsErr)
	}
	for _, key := range c.SecretHosts.Keys() {
		if c.SecretPrefix == "" || !strings.HasPrefix(key, c.SecretPrefix) {
			errs = append(errs, fmt.Errorf("%s: key %q is not under %s %q, so no reference can name it", schema.EnvSecretHosts, key, schema.EnvSecretPrefix, c.SecretPrefix))
		}
	}
	if c.SigningSecret != "" && len(c.SigningSecret) < 16 {
		errs = append(errs, fmt.Errorf("%s: shorter than 16 bytes", schema.EnvSigningSecret))
	}
	if c.MetricsNamespace == "" {
		errs = append(errs, fmt.Errorf("%s: empty", schema.EnvMetricsNS))
	}
	if c.Environment == "" {
		errs = append(errs, fmt.Errorf("%s: empty", schema.EnvEnvironment))
	}
	if c.MaxBodyBytes <= 0 {
		errs = append(errs, errors.New("max body bytes: not positive"))
	}
	if c.SignatureWindow <= 0 {
		errs = append(errs, errors.New("signature window: not positive"))
	}
	if c.StoreTimeout <= 0 || c.NotifyTimeout <= 0 {
		errs = append(errs, errors.New("timeouts: not positive"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("ingest config: %w", errors.Join(errs...))
	}
	return nil
}

// checkHostPattern accepts "host.example.com" and "*.example.com".
func checkHostPattern(h string) error {
	rest := strings.TrimPrefix(h, "*.")
	if rest == "" || strings.Contains(rest, "*") {
		return fmt.Errorf("host pattern %q: only a leading \"*.\" wildcard is allowed", h)
	}
	for _, r := range rest {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == ':' || r == '[' || r == ']') {
			return fmt.Errorf("host pattern %q: invalid character %q", h, r)
		}
	}
	return nil
}
