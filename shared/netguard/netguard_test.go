package netguard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	cases := map[string]Class{
		"8.8.8.8": Public, "2606:4700::1111": Public,
		"127.0.0.1": LoopbackIP, "::1": LoopbackIP, "::ffff:127.0.0.1": LoopbackIP,
		"10.1.2.3": Private, "172.16.0.1": Private, "192.168.1.1": Private, "fd12::1": Private, "100.64.0.1": Private,
		"169.254.1.1": LinkLocal, "fe80::1": LinkLocal,
		"169.254.169.254": Metadata, "169.254.170.2": Metadata, "fd00:ec2::254": Metadata, "::ffff:169.254.169.254": Metadata,
		"64:ff9b::a9fe:a9fe": Metadata, // NAT64 form of 169.254.169.254
		"2002:0a00:0001::":   Private,  // 6to4 of 10.0.0.1
		"0.0.0.0":            Unspecified, "::": Unspecified,
		"224.0.0.1": Multicast, "240.0.0.1": Reserved, "198.18.0.1": Reserved,
	}
	for s, want := range cases {
		if got := Classify(netip.MustParseAddr(s)); got != want {
			t.Errorf("Classify(%s) = %q, want %q", s, got, want)
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
