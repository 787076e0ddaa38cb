package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// Signing headers (HTTP header names are case-insensitive; API Gateway
// delivers them lower-cased).
const (
	HeaderTimestamp = "X-Wsfleet-Timestamp" // unix seconds
	HeaderSignature = "X-Wsfleet-Signature" // "v1=" + hex(HMAC-SHA256)
	signaturePrefix = "v1="
)

// StringToSign is what a request's signature covers: the timestamp, the
// method, the path (without the stage prefix and without the query string)
// and the raw body, joined by newlines. Covering the method and path keeps a
// captured signed stop of one session from being replayed on another.
func StringToSign(timestamp, method, path string, body []byte) []byte {
	b := make([]byte, 0, len(timestamp)+len(method)+len(path)+len(body)+3)
	b = append(b, timestamp...)
	b = append(b, '\n')
	b = append(b, strings.ToUpper(method)...)
	b = append(b, '\n')
	b = append(b, path...)
	b = append(b, '\n')
	return append(b, body...)
}

// Sign returns the X-Wsfleet-Signature value for a request (for clients and
// tests).
func Sign(secret []byte, timestamp, method, path string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(StringToSign(timestamp, method, path, body))
	return signaturePrefix + hex.EncodeToString(m.Sum(nil))
}

// Verifier checks request signatures with one shared secret.
type Verifier struct {
	secret []byte
	window time.Duration
}

// NewVerifier returns a Verifier accepting timestamps within window of now.
func NewVerifier(secret []byte, window time.Duration) *Verifier {
	return &Verifier{secret: secret, window: window}
}

// Verify checks the timestamp and signature headers of a request made at
// now. The comparison is constant-time (hmac.Equal) over the decoded MACs.
func (v *Verifier) Verify(now time.Time, timestamp, signature, method, path string, body []byte) *apiError {
	if timestamp == "" || signature == "" {
		return unauthorized(CodeMissingSignature, "requests must carry "+HeaderTimestamp+" and "+HeaderSignature)
	}
	if len(timestamp) > 12 {
		return unauthorized(CodeStaleTimestamp, HeaderTimestamp+" must be unix seconds")
	}
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil || ts <= 0 {
		return unauthorized(CodeStaleTimestamp, HeaderTimestamp+" must be unix seconds")
	}
	skew := now.Sub(time.Unix(ts, 0))
	if skew > v.window || skew < -v.window {
		return unauthorized(CodeStaleTimestamp, HeaderTimestamp+" is outside the accepted window of "+v.window.String())
	}
	hexSig, ok := strings.CutPrefix(signature, signaturePrefix)
	if !ok {
		return unauthorized(CodeBadSignature, HeaderSignature+" must be v1=<hex HMAC-SHA256>")
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return unauthorized(CodeBadSignature, HeaderSignature+" must be v1=<hex HMAC-SHA256>")
	}
	m := hmac.New(sha256.New, v.secret)
	m.Write(StringToSign(timestamp, method, path, body))
	if !hmac.Equal(m.Sum(nil), got) {
		return unauthorized(CodeBadSignature, "signature does not match")
	}
	return nil
}
