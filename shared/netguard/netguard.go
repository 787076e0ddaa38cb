// Package netguard owns which network addresses wsfleet may connect to on a
// user's behalf (the SSRF guard): the classification of IP addresses into
// loopback, private, link-local, cloud-metadata and other special ranges,
// and the policies that allow them. Ingest checks IP literals in a ws_url
// when a session is started; the worker checks the address it actually
// connects to, after DNS resolution, so a public name that resolves to a
// private address (or is rebound to one later) is refused too.
package netguard

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
)

// Policy says which special ranges are allowed (the values of
// schema.EnvAllowPrivateIPs).
type Policy string

// Policies. Cloud-metadata addresses are refused under every policy.
const (
	None     Policy = "none"     // public unicast only (production default)
	Loopback Policy = "loopback" // local development: loopback too
	All      Policy = "all"      // every range but metadata (tests on private networks)
)

// ParsePolicy reads a policy; "" is None.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(strings.ToLower(strings.TrimSpace(s))); p {
	case "":
		return None, nil
	case None, Loopback, All:
		return p, nil
	default:
		return "", fmt.Errorf("address policy %q: want none, loopback or all", s)
	}
}

// Class names the range an address is in ("" for public unicast).
type Class string

// Classes.
const (
	Public        Class = ""
	LoopbackIP    Class = "loopback"
	Private       Class = "private"
	LinkLocal     Class = "link-local"
	SiteLocal     Class = "site-local"
	Metadata      Class = "cloud agent"
	Unspecified   Class = "unspecified"
	Multicast     Class = "multicast"
	Broadcast     Class = "broadcast"
	Documentation Class = "documentation"
	Benchmarking  Class = "benchmarking"
	Reserved      Class = "reserved"
)

// Cloud agents: instance and task metadata, credentials and DNS endpoints
// that answer every workload on the host. Refused under every policy.
// Sources: EC2 IMDS (169.254.169.254, fd00:ec2::254), ECS task metadata and
// credentials (169.254.170.2), EKS Pod Identity agent (169.254.170.23,
// fd00:ec2::23), Amazon Time Sync (169.254.169.123, fd00:ec2::123), Route 53
// Resolver (169.254.169.253, fd00:ec2::253), Alibaba Cloud metadata
// (100.100.100.200). GCP, Azure and OCI use 169.254.169.254 too. The whole
// 169.254.169.0/24 and 169.254.170.0/24 blocks and AWS's fd00:ec2::/32 are
// refused, so a new agent address in them is covered before we learn it.
var agentPrefixes = []netip.Prefix{
	netip.MustParsePrefix("169.254.169.0/24"),
	netip.MustParsePrefix("169.254.170.0/24"),
	netip.MustParsePrefix("fd00:ec2::/32"),
	netip.MustParsePrefix("100.100.100.200/32"),
}

// special lists the ranges of the IANA IPv4 and IPv6 Special-Purpose Address
// Registries (iana.org/assignments/iana-ipv4-special-registry and
// iana-ipv6-special-registry) that are not globally reachable and that
// netip's predicates do not already name, plus fec0::/10 (site-local,
// deprecated by RFC 3879 but still routed inside some networks; IANA IPv6
// address space registry). Order matters: the first match wins.
var special = []struct {
	prefix netip.Prefix
	class  Class
}{
	{netip.MustParsePrefix("0.0.0.0/8"), Unspecified},         // "this network", RFC 791
	{netip.MustParsePrefix("100.64.0.0/10"), Private},         // shared address space (CGN), RFC 6598
	{netip.MustParsePrefix("192.0.0.0/24"), Reserved},         // IETF protocol assignments, RFC 6890
	{netip.MustParsePrefix("192.0.2.0/24"), Documentation},    // TEST-NET-1, RFC 5737
	{netip.MustParsePrefix("192.88.99.0/24"), Reserved},       // 6to4 relay anycast (deprecated), RFC 7526
	{netip.MustParsePrefix("198.18.0.0/15"), Benchmarking},    // RFC 2544
	{netip.MustParsePrefix("198.51.100.0/24"), Documentation}, // TEST-NET-2, RFC 5737
	{netip.MustParsePrefix("203.0.113.0/24"), Documentation},  // TEST-NET-3, RFC 5737
	{netip.MustParsePrefix("255.255.255.255/32"), Broadcast},  // limited broadcast, RFC 919
	{netip.MustParsePrefix("240.0.0.0/4"), Reserved},          // reserved for future use, RFC 1112
	{netip.MustParsePrefix("100::/64"), Reserved},             // discard-only, RFC 6666
	{netip.MustParsePrefix("2001:2::/48"), Benchmarking},      // RFC 5180
	{netip.MustParsePrefix("2001:10::/28"), Reserved},         // ORCHID (deprecated), RFC 4843
	{netip.MustParsePrefix("2001:20::/28"), Reserved},         // ORCHIDv2: identifiers, not routable locators, RFC 7343
	{netip.MustParsePrefix("2001::/23"), Reserved},            // IETF protocol assignments (incl. Teredo 2001::/32), RFC 2928
	{netip.MustParsePrefix("2001:db8::/32"), Documentation},   // RFC 3849
	{netip.MustParsePrefix("3fff::/20"), Documentation},       // RFC 9637
	{netip.MustParsePrefix("5f00::/16"), Reserved},            // segment routing SIDs, RFC 9602
	{netip.MustParsePrefix("fec0::/10"), SiteLocal},           // site-local (deprecated), RFC 3879
}

var (
	compat6   = netip.MustParsePrefix("::/96")           // IPv4-compatible (deprecated), RFC 4291
	translat6 = netip.MustParsePrefix("::ffff:0:0:0/96") // IPv4-translated (SIIT), RFC 2765
	nat64     = netip.MustParsePrefix("64:ff9b::/96")    // well-known NAT64, RFC 6052
	nat64l    = netip.MustParsePrefix("64:ff9b:1::/48")  // local-use NAT64, RFC 8215
	sixto4    = netip.MustParsePrefix("2002::/16")       // 6to4, RFC 3056
)

// embeddedV4 returns the IPv4 address an IPv6 address carries, if any:
// IPv4-mapped, IPv4-compatible, IPv4-translated, NAT64 and 6to4 forms.
func embeddedV4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	last4 := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	switch {
	case a.Is4In6():
		return a.Unmap(), true
	case compat6.Contains(a) && !a.IsUnspecified() && !a.IsLoopback():
		return last4, true
	case translat6.Contains(a), nat64.Contains(a), nat64l.Contains(a):
		return last4, true
	case sixto4.Contains(a):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	}
	return netip.Addr{}, false
}

// Classify tells which range a is in (IPv6 forms that embed an IPv4 address
// are judged by that address).
func Classify(a netip.Addr) Class {
	a = a.WithZone("")
	if v4, ok := embeddedV4(a); ok {
		a = v4
	}
	for _, p := range agentPrefixes {
		if p.Contains(a) {
			return Metadata
		}
	}
	switch {
	case a.IsLoopback():
		return LoopbackIP
	case a.IsUnspecified():
		return Unspecified
	case a.IsPrivate():
		return Private
	case a.IsLinkLocalUnicast():
		return LinkLocal
	case a.IsMulticast():
		return Multicast
	}
	for _, s := range special {
		if s.prefix.Contains(a) {
			return s.class
		}
	}
	return Public
}

// AllowsClass reports whether the policy allows class c.
func (p Policy) AllowsClass(c Class) bool {
	switch {
	case c == Public:
		return true
	case c == Metadata:
		return false
	case p == All:
		return true
	case p == Loopback:
		return c == LoopbackIP
	}
	return false
}

// ErrRefused marks a connection the policy refuses.
var ErrRefused = fmt.Errorf("address refused by policy")

// Check returns an ErrRefused error when the policy does not allow a.
func (p Policy) Check(a netip.Addr) error {
	if c := Classify(a); !p.AllowsClass(c) {
		return fmt.Errorf("%w: %s is a %s address (policy %s)", ErrRefused, a, c, p)
	}
	return nil
}

// Control is a net.Dialer Control function that refuses, at connect time,
// addresses the policy does not allow. It sees the resolved address, so DNS
// names that resolve (or are rebound) to a refused range are caught.
func (p Policy) Control(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrRefused, address, err)
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%w: %s is not an IP address", ErrRefused, host)
	}
	return p.Check(a)
}

// SplitHosts reads a comma-separated list of host patterns
// (schema.EnvAllowedHosts): lower-cased, trimmed, without a trailing dot.
func SplitHosts(v string) []string {
	var out []string
	for _, h := range strings.Split(v, ",") {
		if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
			out = append(out, strings.TrimSuffix(h, "."))
		}
	}
	return out
}

// HostAllowed reports whether host matches one of patterns: "host" exactly,
// or "*.domain" for any subdomain of domain (not domain itself); IPv6
// literals with or without brackets. No patterns allows every host (the
// address policy still applies).
func HostAllowed(patterns []string, host string) bool {
	if len(patterns) == 0 {
		return true
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	for _, pat := range patterns {
		pat = strings.Trim(strings.ToLower(pat), "[]")
		if suffix, ok := strings.CutPrefix(pat, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) {
				return true
			}
			continue
		}
		if host == pat {
			return true
		}
	}
	return false
}
