// Package tlsca owns the harness's per-run certificate authority: a CA
// and a server certificate for the loopback addresses the harness serves
// on (127.0.0.1 to 127.0.0.4, ::1, localhost), so that the shared feed, the
// local stack, chaos and the bench serve wss:// as real sources do, and
// the workers verify them against that CA (WSFLEET_EXTRA_CA_FILE), never by
// skipping verification. Keys are ECDSA P-256 (what most public endpoints
// serve), made fresh for every run and never written but for the CA's
// certificate (ca.pem) and, for a process of its own, the server's key
// pair. Test infrastructure, in the testkit module: no shipped binary
// imports it.
package tlsca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Files a CA writes in its directory.
const (
	CAFile   = "ca.pem"         // the CA's certificate: what a client adds to its roots
	CertFile = "server.pem"     // the server's certificate chain (WriteServer)
	KeyFile  = "server-key.pem" // the server's private key (WriteServer), mode 0600
)

// Validity of the certificates a CA makes: long enough for any run.
const Validity = 48 * time.Hour

// Hosts the server certificate names.
var (
	IPs      = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(127, 0, 0, 2), net.IPv4(127, 0, 0, 3), net.IPv4(127, 0, 0, 4), net.IPv6loopback}
	DNSNames = []string{"localhost"}
)

// CA is a run's certificate authority and its server certificate.
type CA struct {
	// CertFile is the path of the CA's certificate (PEM).
	CertFile string
	// CertPEM is the CA's certificate.
	CertPEM []byte
	server  tls.Certificate
	pool    *x509.CertPool
}

// New makes a CA and a server certificate, and writes the CA's certificate
// to dir/ca.pem (dir is created).
func New(dir string) (*CA, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("tlsca: CA key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "wsfleet harness CA " + now.UTC().Format(time.RFC3339)},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("tlsca: CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("tlsca: CA certificate: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("tlsca: server key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "wsfleet harness source"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  IPs,
		DNSNames:     DNSNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("tlsca: server certificate: %w", err)
	}
	ca := &CA{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		server:  tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		pool:    x509.NewCertPool(),
	}
	ca.pool.AddCert(caCert)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tlsca: %w", err)
	}
	ca.CertFile = filepath.Join(dir, CAFile)
	if err := os.WriteFile(ca.CertFile, ca.CertPEM, 0o644); err != nil {
		return nil, fmt.Errorf("tlsca: %w", err)
	}
	return ca, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

// ServerTLS is a server configuration presenting the CA's server
// certificate (TLS 1.2 and later; session tickets on, as Go's default).
func (ca *CA) ServerTLS() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{ca.server}, MinVersion: tls.VersionTLS12}
}

// Pool is a certificate pool holding only the CA.
func (ca *CA) Pool() *x509.CertPool { return ca.pool }

// ClientTLS is a client configuration that trusts only the CA.
func (ca *CA) ClientTLS() *tls.Config {
	return &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12}
}

// WriteServer writes the server's certificate and key to dir (for a
// server in another process: LoadServer).
func (ca *CA) WriteServer(dir string) error {
	key, err := x509.MarshalECPrivateKey(ca.server.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		return fmt.Errorf("tlsca: %w", err)
	}
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.server.Certificate[0]})
	if err := os.WriteFile(filepath.Join(dir, CertFile), cert, 0o644); err != nil {
		return fmt.Errorf("tlsca: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, KeyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: key}), 0o600); err != nil {
		return fmt.Errorf("tlsca: %w", err)
	}
	return nil
}

// LoadOrNew loads the CA a run wrote to dir (its certificate and the
// server's key pair, as New and WriteServer leave them), or makes one there
// when dir holds none, or one whose certificate expires within a day: a server in its own process (bin/feed -tls-dir)
// and the harness that starts it share one CA.
func LoadOrNew(dir string) (*CA, error) {
	caFile := filepath.Join(dir, CAFile)
	caPEM, err := os.ReadFile(caFile)
	if errors.Is(err, os.ErrNotExist) {
		ca, err := New(dir)
		if err == nil {
			err = ca.WriteServer(dir)
		}
		return ca, err
	}
	if err != nil {
		return nil, fmt.Errorf("tlsca: %w", err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile))
	if err != nil {
		return nil, fmt.Errorf("tlsca: server key pair in %s: %w", dir, err)
	}
	if leaf, err := x509.ParseCertificate(pair.Certificate[0]); err != nil || time.Until(leaf.NotAfter) < Validity/2 {
		// A CA a run days ago left (make dev keeps its folder): a new one.
		ca, err := New(dir)
		if err == nil {
			err = ca.WriteServer(dir)
		}
		return ca, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("tlsca: no PEM certificate in " + caFile)
	}
	return &CA{CertFile: caFile, CertPEM: caPEM, server: pair, pool: pool}, nil
}

// LoadPool reads a PEM bundle of CA certificates (what
// WSFLEET_EXTRA_CA_FILE names) into a new pool; no certificate is an error.
func LoadPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		return nil, errors.New("no PEM certificate in " + file)
	}
	return p, nil
}
