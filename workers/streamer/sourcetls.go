// The TLS the sessions' wss:// handshakes use: the system's roots plus the
// extra CA certificates of WSFLEET_EXTRA_CA_FILE (a private CA in front of
// a source, the local harness's per-run CA). Verification is never turned
// off: there is no setting for it.

package streamer

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// sourceTLS is the sessions' client TLS configuration (nil: Go's defaults,
// the system's roots, when no extra CA is configured).
func sourceTLS(cfg Config) (*tls.Config, error) {
	if cfg.ExtraCAFile == "" {
		return nil, nil
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
	return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}, nil
}
