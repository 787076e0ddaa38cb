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
	Public      Class = ""
	LoopbackIP  Class = "loopback"
	Private     Class = "private"
	LinkLocal   Class = "link-local"
	Metadata    Class = "cloud metadata"
	Unspecified Class = "unspecified"
	Multicast   Class = "multicast"
	Reserved    Class = "reserved"
)

// Cloud instance/task metadata endpoints: refused under every policy.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OpenStack IMDS
	netip.MustParseAddr("169.254.170.2"),   // ECS task metadata / credentials
	netip.MustParseAddr("169.254.169.123"), // AWS time sync
	netip.MustParseAddr("169.254.169.253"), // AWS VPC DNS
	netip.MustParseAddr("fd00:ec2::254"),   // AWS IMDS over IPv6
	netip.MustParseAddr("fd00:ec2::23"),    // AWS VPC DNS over IPv6
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud metadata
}

var (
	cgnat     = netip.MustParsePrefix("100.64.0.0/10")
	thisNet   = netip.MustParsePrefix("0.0.0.0/8")
	reserved4 = netip.MustParsePrefix("240.0.0.0/4")
	ietf4     = netip.MustParsePrefix("192.0.0.0/24")
	bench4    = netip.MustParsePrefix("198.18.0.0/15")
	compat6   = netip.MustParsePrefix("::/96")          // IPv4-compatible (deprecated)
	nat64     = netip.MustParsePrefix("64:ff9b::/96")   // well-known NAT64
	nat64l    = netip.MustParsePrefix("64:ff9b:1::/48") // local-use NAT64
	sixto4    = netip.MustParsePrefix("2002::/16")      // 6to4
)

// embeddedV4 returns the IPv4 address an IPv6 address carries, if any.
func embeddedV4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case a.Is4In6():
		return a.Unmap(), true
	case compat6.Contains(a) && !a.IsUnspecified() && !a.IsLoopback():
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case nat64.Contains(a) || nat64l.Contains(a):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
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
	for _, m := range metadataAddrs {
		if a == m {
			return Metadata
		}
	}
	switch {
	case a.IsLoopback():
		return LoopbackIP
	case a.IsUnspecified() || thisNet.Contains(a):
		return Unspecified
	case a.IsPrivate() || cgnat.Contains(a):
		return Private
	case a.IsLinkLocalUnicast():
		return LinkLocal
	case a.IsMulticast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast():
		return Multicast
	case reserved4.Contains(a) || ietf4.Contains(a) || bench4.Contains(a):
		return Reserved
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
