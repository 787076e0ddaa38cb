package api

import (
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/wsfleet/wsfleet/functions/ingest/internal/config"
	"github.com/wsfleet/wsfleet/shared/netguard"
	"github.com/wsfleet/wsfleet/shared/secretref"
)

// MaxWSURLLen is the longest accepted ws_url, in bytes.
const MaxWSURLLen = 2048

// URLPolicy decides which ws_url a start may name, and which secrets its
// references may.
type URLPolicy struct {
	// AllowedHosts: "host" (exact) or "*.domain" (any subdomain of domain).
	// Empty allows any host that is not refused by PrivateIPs.
	AllowedHosts []string
	PrivateIPs   config.PrivateIPs
	// SecretPrefix is config.Config.SecretPrefix: the prefix every secret
	// reference's name must be under ("": none allowed).
	SecretPrefix string
	// SecretHosts is config.Config.SecretHosts: the hosts each secret may
	// be sent to (the zero value: none).
	SecretHosts secretref.Bindings
}

// CheckWSURL validates a ws_url against the syntax rules and the policy. Its
// messages never quote the URL (it may carry a token in its query).
func (p URLPolicy) CheckWSURL(raw string) *apiError {
	if raw == "" {
		return invalidField("ws_url", "ws_url is required")
	}
	if len(raw) > MaxWSURLLen {
		return invalidField("ws_url", "ws_url is longer than "+strconv.Itoa(MaxWSURLLen)+" bytes")
	}
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c <= 0x20 || c >= 0x7f {
			return invalidField("ws_url", "ws_url must be printable ASCII without spaces (percent-encode the rest; IDN hosts in punycode)")
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return invalidField("ws_url", "ws_url is not a valid URL")
	}
	if u.Scheme != "ws" && u.Scheme != "wss" {
		return invalidField("ws_url", "ws_url scheme must be ws or wss")
	}
	if u.Opaque != "" || u.Host == "" {
		return invalidField("ws_url", "ws_url must be an absolute URL with a host (ws://host/path)")
	}
	if u.User != nil {
		return invalidField("ws_url", "ws_url must not carry user info: send credentials in headers")
	}
	if strings.Contains(raw, "#") {
		return invalidField("ws_url", "ws_url must not have a fragment")
	}
	if port := u.Port(); port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return invalidField("ws_url", "ws_url port must be 1..65535")
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return invalidField("ws_url", "ws_url has an empty port")
	}
	host := strings.ToLower(u.Hostname())
	if addr, err := netip.ParseAddr(host); err == nil {
		if addr.Zone() != "" {
			return invalidField("ws_url", "ws_url IPv6 zones are not accepted")
		}
		if c := netguard.Classify(addr); !p.PrivateIPs.AllowsClass(c) {
			return &apiError{status: 400, code: CodeAddressNotAllowed, message: "ws_url host is a " + string(c) + " address, which this deployment refuses"}
		}
		if strings.HasPrefix(u.Host, "[") != addr.Is6() {
			return invalidField("ws_url", "ws_url host is not a valid address")
		}
	} else {
		if msg := checkHostname(host); msg != "" {
			return invalidField("ws_url", msg)
		}
		host = strings.TrimSuffix(host, ".")
		if host == "localhost" || strings.HasSuffix(host, ".localhost") {
			if !p.PrivateIPs.AllowsClass(netguard.LoopbackIP) {
				return &apiError{status: 400, code: CodeAddressNotAllowed, message: "ws_url host is a loopback name, which this deployment refuses"}
			}
		}
	}
	if !netguard.HostAllowed(p.AllowedHosts, host) {
		return &apiError{status: 400, code: CodeHostNotAllowed, message: "ws_url host is not in the allowed hosts"}
	}
	return nil
}

// checkHostname checks a DNS name (lower-cased): LDH labels of 1..63, at most
// 253 bytes, and a last label that is not numeric (which some resolvers would
// read as an IP address, e.g. 2130706433 or 0x7f.1).
func checkHostname(h string) string {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return "ws_url host name is empty or longer than 253 bytes"
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return "ws_url host name has an empty, too long or badly hyphenated label"
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "ws_url host name may only hold letters, digits, '-' and '_'"
			}
		}
	}
	last := labels[len(labels)-1]
	numeric := true
	for i := 0; i < len(last); i++ {
		if last[i] < '0' || last[i] > '9' {
			numeric = false
			break
		}
	}
	if numeric || strings.HasPrefix(last, "0x") {
		return "ws_url host looks like a non-canonical IP address"
	}
	return ""
}
