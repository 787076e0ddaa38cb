package netguard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"
)

// TestClassify covers each row of the IANA special-purpose registries the
// guard names, every cloud agent address, and each IPv6 form that embeds an
// IPv4 address.
func TestClassify(t *testing.T) {
	cases := []struct {
		addr string
		want Class
	}{
		{"8.8.8.8", Public}, {"2606:4700::1111", Public}, {"192.0.3.1", Public}, {"2001:4860::8888", Public},
		{"127.0.0.1", LoopbackIP}, {"::1", LoopbackIP}, {"::ffff:127.0.0.1", LoopbackIP},
		{"::ffff:0:7f00:1", LoopbackIP}, // IPv4-translated 127.0.0.1
		{"::127.0.0.2", LoopbackIP},     // IPv4-compatible
		{"10.1.2.3", Private}, {"172.16.0.1", Private}, {"192.168.1.1", Private}, {"fd12::1", Private},
		{"100.64.0.1", Private}, {"::ffff:0:a00:1", Private},
		{"169.254.1.1", LinkLocal}, {"fe80::1", LinkLocal},
		{"fec0::1", SiteLocal}, {"feff::1", SiteLocal},
		{"169.254.169.254", Metadata}, {"169.254.170.2", Metadata}, {"169.254.170.23", Metadata},
		{"169.254.169.123", Metadata}, {"169.254.169.253", Metadata}, {"100.100.100.200", Metadata},
		{"fd00:ec2::254", Metadata}, {"fd00:ec2::23", Metadata}, {"fd00:ec2::123", Metadata},
		{"::ffff:169.254.169.254", Metadata}, {"64:ff9b::a9fe:a9fe", Metadata}, {"::ffff:0:a9fe:aa17", Metadata},
		{"2002:0a00:0001::", Private}, // 6to4 of 10.0.0.1
		{"64:ff9b:1::a00:1", Private}, // local-use NAT64 of 10.0.0.1
		{"0.0.0.0", Unspecified}, {"::", Unspecified}, {"0.1.2.3", Unspecified},
		{"224.0.0.1", Multicast}, {"ff02::1", Multicast}, {"ff0e::1", Multicast},
		{"255.255.255.255", Broadcast},
		{"192.0.2.1", Documentation}, {"198.51.100.7", Documentation}, {"203.0.113.9", Documentation},
		{"2001:db8::1", Documentation}, {"3fff::1", Documentation},
		{"198.18.0.1", Benchmarking}, {"198.19.255.1", Benchmarking}, {"2001:2::1", Benchmarking},
		{"240.0.0.1", Reserved}, {"192.0.0.8", Reserved}, {"192.88.99.1", Reserved},
		{"100::1", Reserved}, {"2001:10::1", Reserved}, {"2001:20::1", Reserved}, {"2001::1", Reserved},
		{"5f00::1", Reserved},
	}
	for _, c := range cases {
		if got := Classify(netip.MustParseAddr(c.addr)); got != c.want {
			t.Errorf("Classify(%s) = %q, want %q", c.addr, got, c.want)
		}
	}
}

// TestCloudAgentsRefusedUnderEveryPolicy: no policy, not even all, reaches
// an instance, task or pod credential endpoint, in any address form.
func TestCloudAgentsRefusedUnderEveryPolicy(t *testing.T) {
	agents := []string{"169.254.169.254", "169.254.170.2", "169.254.170.23", "fd00:ec2::254", "fd00:ec2::23",
		"::ffff:169.254.170.23", "64:ff9b::a9fe:aa02", "2002:a9fe:a9fe::1", "100.100.100.200"}
	for _, p := range []Policy{None, Loopback, All} {
		for _, a := range agents {
			if err := p.Check(netip.MustParseAddr(a)); !errors.Is(err, ErrRefused) {
				t.Errorf("policy %s allowed cloud agent %s (err %v)", p, a, err)
			}
		}
	}
}

// TestNoneRefusesEverySpecialRange: the production policy allows public
// unicast only.
func TestNoneRefusesEverySpecialRange(t *testing.T) {
	for _, a := range []string{"fec0::1", "::ffff:0:7f00:1", "2001:20::1", "2001:db8::1", "198.18.0.1",
		"192.0.2.1", "255.255.255.255", "100::1", "3fff::1", "2001:2::1"} {
		if err := None.Check(netip.MustParseAddr(a)); !errors.Is(err, ErrRefused) {
			t.Errorf("policy none allowed %s (err %v)", a, err)
		}
	}
}

func TestPolicies(t *testing.T) {
	type row struct {
		p                   Policy
		pub, lo, priv, meta bool
	}
	for _, r := range []row{
		{None, true, false, false, false},
		{Loopback, true, true, false, false},
		{All, true, true, true, false},
	} {
		for addr, want := range map[string]bool{"1.1.1.1": r.pub, "127.0.0.1": r.lo, "10.0.0.1": r.priv, "169.254.169.254": r.meta} {
			err := r.p.Check(netip.MustParseAddr(addr))
			if (err == nil) != want {
				t.Errorf("policy %s, %s: err %v, want allowed=%v", r.p, addr, err, want)
			}
			if err != nil && !errors.Is(err, ErrRefused) {
				t.Errorf("error %v is not ErrRefused", err)
			}
		}
	}
	if p, err := ParsePolicy(""); err != nil || p != None {
		t.Fatalf("empty policy: %v %v", p, err)
	}
	if _, err := ParsePolicy("everything"); err == nil {
		t.Fatal("unknown policy accepted")
	}
}

// TestControlRefusesAtConnectTime dials a real loopback listener through a
// dialer guarded by each policy.
func TestControlRefusesAtConnectTime(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// "localhost" resolves to loopback: the name alone would pass a literal check.
	addr := "localhost:" + l.Addr().(*net.TCPAddr).AddrPort().String()[len("127.0.0.1:"):]
	d := net.Dialer{Control: None.Control}
	if _, err := d.DialContext(ctx, "tcp", addr); !errors.Is(err, ErrRefused) {
		t.Fatalf("policy none dialed loopback: %v", err)
	}
	d.Control = Loopback.Control
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("policy loopback refused loopback: %v", err)
	}
	c.Close()
}

func TestHostAllowed(t *testing.T) {
	pats := SplitHosts(" Stream.Example.com., *.feeds.example.net ,[2606:4700::1111],8.8.4.4")
	for host, want := range map[string]bool{
		"stream.example.com": true, "STREAM.example.com.": true, "a.feeds.example.net": true, "a.b.feeds.example.net": true,
		"feeds.example.net": false, "afeeds.example.net": false, "stream.example.com.evil.net": false,
		"[2606:4700::1111]": true, "2606:4700::1111": true, "8.8.4.4": true, "8.8.4.5": false,
	} {
		if got := HostAllowed(pats, host); got != want {
			t.Errorf("HostAllowed(%q) = %v, want %v", host, got, want)
		}
	}
	if !HostAllowed(nil, "anything.example") {
		t.Error("no patterns must allow every host")
	}
}
