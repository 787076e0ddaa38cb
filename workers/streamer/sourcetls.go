// The TLS the sessions' wss:// handshakes use: the system's roots plus the
// extra CA certificates of WSFLEET_EXTRA_CA_FILE (a private CA in front of
// a source, the local harness's per-run CA), and a session cache, so that a
// reconnect or a claim to a host the worker dialed before resumes from a
// session ticket (BenchmarkWssHandshake: about a quarter less handshake
// CPU, both sides, on loopback; the server skips its signature and the
// client the chain's verification). Verification is never turned off:
// there is no setting for it.

package streamer

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// tlsSessionCacheHosts bounds the TLS session cache: one ticket per
// source host (Go keys it by server name), the least recently used
// forgotten beyond it.
const tlsSessionCacheHosts = 1024

// sourceTLS is the sessions' client TLS configuration.
func sourceTLS(cfg Config) (*tls.Config, error) {
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if !cfg.NoTLSResumption {
		conf.ClientSessionCache = tls.NewLRUClientSessionCache(tlsSessionCacheHosts)
	}
	if cfg.ExtraCAFile == "" {
		return conf, nil // the system's roots
	}
	pem, err := os.ReadFile(cfg.ExtraCAFile)
	if err != nil {
		return nil, fmt.Errorf("extra CA file: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("extra CA file %s: no PEM certificate in it", cfg.ExtraCAFile)
	}
	conf.RootCAs = roots
	return conf, nil
}
