package tlsca_test

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsfleet/wsfleet/testkit/tlsca"
)

// A client that trusts the CA reaches a server presenting its certificate
// on every loopback address and on localhost; a client that trusts only
// the system roots is refused (verification is never skipped).
func TestServerCertificateVerifies(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlsca.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, tlsca.CAFile)); err != nil || string(b) != string(ca.CertPEM) {
		t.Fatalf("ca.pem: %v", err)
	}
	for _, host := range []string{"127.0.0.1", "127.0.0.2", "localhost"} {
		ln, err := net.Listen("tcp", host+":0")
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
		srv.Listener.Close()
		srv.Listener, srv.TLS = ln, ca.ServerTLS()
		srv.StartTLS()
		pool, err := tlsca.LoadPool(ca.CertFile)
		if err != nil {
			t.Fatal(err)
		}
		good := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		url := "https://" + host + ":" + port + "/"
		resp, err := good.Get(url)
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		resp.Body.Close()
		bad := &http.Client{Transport: &http.Transport{}}
		if _, err := bad.Get(url); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("%s without the CA: %v, want a certificate error", host, err)
		}
		srv.Close()
	}
}

func TestLoadPoolRefusesAFileWithoutCertificates(t *testing.T) {
	f := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(f, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := tlsca.LoadPool(f); err == nil {
		t.Fatal("a file without a certificate was accepted")
	}
}

// LoadOrNew makes a CA in an empty directory and loads the same one again:
// a server in another process and the harness share it.
func TestLoadOrNewSharesOneCA(t *testing.T) {
	dir := t.TempDir()
	a, err := tlsca.LoadOrNew(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tlsca.LoadOrNew(dir)
	if err != nil {
		t.Fatal(err)
	}
	if string(a.CertPEM) != string(b.CertPEM) {
		t.Fatal("a second LoadOrNew made another CA")
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", b.ServerTLS())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), a.ClientTLS())
	if err != nil {
		t.Fatalf("the loaded server certificate does not verify against the first CA: %v", err)
	}
	c.Close()
}
