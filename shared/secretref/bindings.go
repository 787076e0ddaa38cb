package secretref

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// Bindings say where each secret's value may be sent: a credential is bound
// to the hosts that may be presented with it, so that whoever may start a
// session cannot read a secret by naming their own host in ws_url. One
// setting (schema.EnvSecretHosts), parsed here, is what ingest checks a
// start's ws_url against and what the worker checks the host it actually
// connected to (after redirects) against.
//
// The form is "KEY=HOST,HOST;KEY=HOST": rules separated by ';', each a KEY,
// '=', and one or more comma-separated hosts. KEY is a folder (ending in
// '/': every secret under it) or a whole secret name; the rule with the
// longest KEY that covers a name decides (a name's own rule over its
// folder's). The '=' is the rule's last one: a secret name may hold '=', a
// host never does. HOST is a host name or IP address (IPv6 in brackets),
// optionally :PORT: a name matches a URL's host exactly, case-insensitively
// and without a trailing dot (no wildcard, no suffix), and a HOST with a
// port matches that port only (a URL without one has its scheme's: 80 for
// ws, 443 for wss). A secret no rule covers may be sent nowhere: the zero
// Bindings allow nothing.
type Bindings struct {
	rules []binding // sorted by KEY, longest first
}

type binding struct {
	key   string
	hosts []hostPort
}

type hostPort struct{ host, port string } // port "": any

// ParseBindings parses v (see Bindings); "" (or only spaces and ';') is the
// zero Bindings. The error lists every problem, naming the rule and never
// guessing.
func ParseBindings(v string) (Bindings, error) {
	var b Bindings
	var errs []error
	seen := map[string]bool{}
	for i, r := range strings.Split(v, ";") {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("rule %d: %s", i+1, fmt.Sprintf(format, args...)))
		}
		eq := strings.LastIndexByte(r, '=')
		if eq < 0 {
			bad("%q is not KEY=HOST[,HOST...]", r)
			continue
		}
		key, list := strings.TrimSpace(r[:eq]), r[eq+1:]
		if err := checkKey(key); err != nil {
			bad("%v", err)
		} else if seen[key] {
			bad("key %q is given twice", key)
		}
		seen[key] = true
		bd := binding{key: key}
		for _, h := range strings.Split(list, ",") {
			hp, err := parseHost(strings.TrimSpace(h))
			if err != nil {
				bad("key %q: %v", key, err)
				continue
			}
			bd.hosts = append(bd.hosts, hp)
		}
		b.rules = append(b.rules, bd)
	}
	if len(errs) > 0 {
		return Bindings{}, fmt.Errorf("%s: %w", schema.EnvSecretHosts, errors.Join(errs...))
	}
	slices.SortStableFunc(b.rules, func(x, y binding) int { return len(y.key) - len(x.key) })
	return b, nil
}

// checkKey checks a rule's KEY: a secret name, or a folder of them.
func checkKey(key string) error {
	if key == "" {
		return errors.New("empty key (a secret name, or a folder of them ending in '/')")
	}
	if len(key) > MaxNameLen {
		return fmt.Errorf("key longer than %d characters", MaxNameLen)
	}
	for i := 0; i < len(key); i++ {
		if !nameChar(key[i]) {
			return fmt.Errorf("key %q has a character outside letters, digits and /_+=.@-", key)
		}
	}
	return nil
}

// parseHost parses one HOST: name or address, optionally :PORT.
func parseHost(h string) (hostPort, error) {
	if h == "" {
		return hostPort{}, errors.New("an empty host")
	}
	host, port := h, ""
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return hostPort{}, fmt.Errorf("host %q: an unclosed '['", h)
		}
		host, port = h[1:end], h[end+1:]
		if port != "" && port[0] != ':' {
			return hostPort{}, fmt.Errorf("host %q: want [ADDRESS] or [ADDRESS]:PORT", h)
		}
		port = strings.TrimPrefix(port, ":")
		if a, err := netip.ParseAddr(host); err != nil || !a.Is6() || a.Zone() != "" {
			return hostPort{}, fmt.Errorf("host %q: not an IPv6 address in brackets", h)
		}
	} else if i := strings.LastIndexByte(h, ':'); i >= 0 {
		host, port = h[:i], h[i+1:]
	}
	if h != "" && h[len(h)-1] == ':' {
		return hostPort{}, fmt.Errorf("host %q: an empty port", h)
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return hostPort{}, fmt.Errorf("host %q: the port must be 1..65535", h)
		}
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" {
		return hostPort{}, fmt.Errorf("host %q: no host name", h)
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == ':' && strings.HasPrefix(h, "[")) {
			return hostPort{}, fmt.Errorf("host %q: a host name is letters, digits, '-', '_' and '.' (exact: no wildcard, no scheme or path)", h)
		}
	}
	return hostPort{host: host, port: port}, nil
}

// IsZero reports whether b binds no secret (every reference is refused).
func (b Bindings) IsZero() bool { return len(b.rules) == 0 }

// Keys are b's KEYs, longest first.
func (b Bindings) Keys() []string {
	out := make([]string, len(b.rules))
	for i, r := range b.rules {
		out[i] = r.key
	}
	return out
}

// covers reports whether a rule's key covers the secret name.
func covers(key, name string) bool {
	if strings.HasSuffix(key, "/") {
		return len(name) > len(key) && strings.HasPrefix(name, key)
	}
	return name == key
}

// Allows reports whether the value of the secret name may be sent to u's
// host (and port): the longest KEY covering name lists it.
func (b Bindings) Allows(name string, u *url.URL) bool {
	for _, r := range b.rules {
		if !covers(r.key, name) {
			continue
		}
		host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
		port := u.Port()
		if port == "" {
			port = DefaultPort(u.Scheme)
		}
		for _, h := range r.hosts {
			if h.host == host && (h.port == "" || h.port == port) {
				return true
			}
		}
		return false // the most specific rule decides
	}
	return false
}

// DefaultPort is the port of a URL scheme that names none ("" when the
// scheme is not a WebSocket's or HTTP's).
func DefaultPort(scheme string) string {
	switch strings.ToLower(scheme) {
	case "ws", "http":
		return "80"
	case "wss", "https":
		return "443"
	}
	return ""
}

// ErrNotBound marks a reference whose secret may not be sent to the host
// at hand (Check).
var ErrNotBound = errors.New("may not be sent to this host: " + schema.EnvSecretHosts + " binds it to other hosts, or to none")

// Check refuses the first well-formed reference in s whose secret may not
// be sent to u's host: an *Error wrapping ErrNotBound that names the
// reference and the secret (never a value, nor the URL).
func (b Bindings) Check(s string, u *url.URL) error {
	for _, sp := range scan(s) {
		if sp.bad == "" && !b.Allows(sp.ref.Name, u) {
			return &Error{N: sp.n, Offset: sp.start, Reason: fmt.Sprintf("secret %q", sp.ref.Name), Err: ErrNotBound}
		}
	}
	return nil
}
