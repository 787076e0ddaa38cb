package stacks

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// Context keys read by the app (`cdk synth -c key=value` or cdk.json "context").
const (
	CtxEnv              = "env"              // dev | prod (required; cdk.json defaults it to dev)
	CtxAuth             = "auth"             // iam (default) | none
	CtxSink             = "sink"             // overrides the environment's sink: stdout | sqs | kinesis
	CtxOutputFIFO       = "outputFifo"       // true: the output queue is FIFO
	CtxAllowedHosts     = "allowedHosts"     // ingest's WSFLEET_ALLOWED_HOSTS
	CtxAlarmEmail       = "alarmEmail"       // subscribes an address to the alarm topic
	CtxSigningSecretARN = "signingSecretArn" // ingest's optional HMAC secret in Secrets Manager
	CtxSecretKMSKeyARN  = "secretKmsKeyArn"  // overrides the environment's SecretKMSKeyARN
	// CtxSecretHosts is WSFLEET_SECRET_HOSTS (ingest's and the workers'):
	// the hosts each secret under the environment's SecretPrefix may be
	// sent to, "KEY=HOST,HOST;KEY=HOST". Without it the sessions' secret
	// references are off: ingest gets no WSFLEET_SECRET_PREFIX and takes
	// none.
	CtxSecretHosts = "secretHosts"
)

// Authorization modes of the HTTP API.
const (
	AuthIAM  = "iam"
	AuthNone = "none"
)

// Options are the context values of one synthesis: the environment and the
// few switches that are not per-environment defaults.
type Options struct {
	Env              string
	Auth             string
	Sink             string // empty: the environment's default
	OutputFIFO       bool
	AllowedHosts     string
	AlarmEmail       string
	SigningSecretARN string
	SecretKMSKeyARN  string // empty: the environment's default
	// SecretHosts binds the sessions' secrets to the hosts they may be sent
	// to (WSFLEET_SECRET_HOSTS); empty: secret references are off.
	SecretHosts string
}

// SessionSecrets reports whether the deployment takes secret references:
// only with a host binding (a secret prefix alone would let whoever may
// start a session send any secret under it to a host of their choosing).
func (o Options) SessionSecrets() bool { return o.SecretHosts != "" }

// OptionsFromContext reads Options through get (a construct node's
// TryGetContext). Values may be strings (from -c) or JSON values (cdk.json).
func OptionsFromContext(get func(key string) any) (Options, error) {
	str := func(key string) string {
		v := get(key)
		if v == nil {
			return ""
		}
		return strings.TrimSpace(fmt.Sprint(v))
	}
	o := Options{
		Env:              str(CtxEnv),
		Auth:             str(CtxAuth),
		Sink:             str(CtxSink),
		AllowedHosts:     str(CtxAllowedHosts),
		AlarmEmail:       str(CtxAlarmEmail),
		SigningSecretARN: str(CtxSigningSecretARN),
		SecretKMSKeyARN:  str(CtxSecretKMSKeyARN),
		SecretHosts:      str(CtxSecretHosts),
	}
	if o.Auth == "" {
		o.Auth = AuthIAM
	}
	if s := str(CtxOutputFIFO); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return Options{}, fmt.Errorf("context %s=%q: %w", CtxOutputFIFO, s, err)
		}
		o.OutputFIFO = b
	}
	return o, o.Validate()
}

// Validate checks the option values (the environment name is checked by
// ConfigFor).
func (o Options) Validate() error {
	if o.Env == "" {
		return fmt.Errorf("context %s is not set: pass -c %s=<%s>", CtxEnv, CtxEnv, strings.Join(EnvNames(), "|"))
	}
	if o.Auth != AuthIAM && o.Auth != AuthNone {
		return fmt.Errorf("context %s=%q: want %q or %q", CtxAuth, o.Auth, AuthIAM, AuthNone)
	}
	if o.Sink != "" && !slices.Contains(Sinks, o.Sink) {
		return fmt.Errorf("context %s=%q: want one of %q", CtxSink, o.Sink, Sinks)
	}
	if o.SigningSecretARN != "" && !strings.HasPrefix(o.SigningSecretARN, "arn:") {
		return fmt.Errorf("context %s=%q: not an ARN", CtxSigningSecretARN, o.SigningSecretARN)
	}
	if o.AlarmEmail != "" && !strings.Contains(o.AlarmEmail, "@") {
		return fmt.Errorf("context %s=%q: not an email address", CtxAlarmEmail, o.AlarmEmail)
	}
	return nil
}

// Resolve combines the options with their environment's configuration.
func (o Options) Resolve() (EnvConfig, error) {
	cfg, err := ConfigFor(o.Env)
	if err != nil {
		return EnvConfig{}, err
	}
	if o.Sink != "" {
		cfg.Sink = o.Sink
	}
	if o.SecretKMSKeyARN != "" {
		cfg.SecretKMSKeyARN = o.SecretKMSKeyARN
		if err := cfg.Validate(); err != nil {
			return EnvConfig{}, fmt.Errorf("context %s: environment %q: %w", CtxSecretKMSKeyARN, cfg.Name, err)
		}
	}
	if o.Auth == AuthNone && !cfg.AllowAuthNone {
		return EnvConfig{}, fmt.Errorf("context %s=%s is refused for environment %q: its API would take unsigned requests from anyone (use %s=%s)", CtxAuth, AuthNone, cfg.Name, CtxAuth, AuthIAM)
	}
	if o.Auth == AuthNone && o.SessionSecrets() {
		return EnvConfig{}, fmt.Errorf("context %s=%s is refused with %s: an API without authorization would let anyone start sessions that present the deployment's secrets (drop %s, or use %s=%s)", CtxAuth, AuthNone, CtxSecretHosts, CtxSecretHosts, CtxAuth, AuthIAM)
	}
	if o.SessionSecrets() {
		if err := checkSecretHosts(o.SecretHosts, cfg.SecretPrefix); err != nil {
			return EnvConfig{}, fmt.Errorf("context %s: environment %q: %w", CtxSecretHosts, cfg.Name, err)
		}
	}
	if o.OutputFIFO && cfg.Sink != SinkSQS {
		return EnvConfig{}, fmt.Errorf("context %s=true needs the sqs sink (environment %q uses %q; add -c %s=%s)", CtxOutputFIFO, cfg.Name, cfg.Sink, CtxSink, SinkSQS)
	}
	return cfg, nil
}

// checkSecretHosts is the shape of a WSFLEET_SECRET_HOSTS value, every
// problem at once: rules "KEY=HOST,HOST" separated by ';', each KEY under
// the environment's secret prefix, each HOST exact (no wildcard, scheme,
// path or space). The deployables parse it in full at start
// (shared/secretref.ParseBindings, which the infra module may not import):
// this refuses at synthesis what would stop every task from starting.
func checkSecretHosts(v, prefix string) error {
	var errs []error
	rules := 0
	for i, r := range strings.Split(v, ";") {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		rules++
		eq := strings.LastIndexByte(r, '=')
		if eq < 0 {
			errs = append(errs, fmt.Errorf("rule %d %q is not KEY=HOST[,HOST...]", i+1, r))
			continue
		}
		key := strings.TrimSpace(r[:eq])
		if key == "" || !strings.HasPrefix(key, prefix) {
			errs = append(errs, fmt.Errorf("rule %d: key %q is not under the environment's secret prefix %q", i+1, key, prefix))
		}
		for _, h := range strings.Split(r[eq+1:], ",") {
			if h = strings.TrimSpace(h); h == "" || strings.ContainsAny(h, "*/ \t") {
				errs = append(errs, fmt.Errorf("rule %d: host %q is not an exact host (optionally :port)", i+1, h))
			}
		}
	}
	if rules == 0 {
		errs = append(errs, errors.New("no rule (KEY=HOST[,HOST...])"))
	}
	return errors.Join(errs...)
}

// NewFromContext reads the options from app's context and adds the
// environment's stack to app, with assets resolved against root.
func NewFromContext(app awscdk.App, root string) (*Wsfleet, error) {
	opts, err := OptionsFromContext(func(key string) any {
		return app.Node().TryGetContext(jsii.String(key))
	})
	if err != nil {
		return nil, err
	}
	cfg, err := opts.Resolve()
	if err != nil {
		return nil, err
	}
	return NewWsfleetStack(app, StackID(cfg.Name), &WsfleetStackProps{Config: cfg, Options: opts, RepoRoot: root})
}
