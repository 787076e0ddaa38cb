package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Signing headers (HTTP header names are case-insensitive; API Gateway
// delivers them lower-cased).
const (
	HeaderTimestamp = "X-Wsfleet-Timestamp" // unix seconds
	HeaderNonce     = "X-Wsfleet-Nonce"     // a fresh random id per request
	HeaderSignature = "X-Wsfleet-Signature" // "v1=" + hex(HMAC-SHA256)
	signaturePrefix = "v1="
)

// noncePattern is the accepted form of a request nonce: 16 to 64 URL-safe
// characters (a UUID, or 128 random bits in base64url, fit).
var noncePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{16,64}$`)

// SignedRequest is what a signature covers.
type SignedRequest struct {
	Timestamp string // unix seconds, as sent
	Nonce     string // unique per request: a replay is refused
	Method    string
	Path      string // without the stage prefix and the query string
	Query     string // the raw query string as sent, without '?' ("" when none)
	Body      []byte
}

// StringToSign joins the signed parts with newlines: timestamp, nonce,
// method, path, raw query, body. Covering the method and path keeps a
// signature for one session from serving on another; covering the query
// keeps a signed list from being re-pointed; the nonce makes every signature
// usable once.
func StringToSign(r SignedRequest) []byte {
	var b strings.Builder
	b.Grow(len(r.Timestamp) + len(r.Nonce) + len(r.Method) + len(r.Path) + len(r.Query) + len(r.Body) + 5)
	for _, part := range []string{r.Timestamp, r.Nonce, strings.ToUpper(r.Method), r.Path, r.Query} {
		b.WriteString(part)
		b.WriteByte('\n')
	}
	b.Write(r.Body)
	return []byte(b.String())
}

// Sign returns the X-Wsfleet-Signature value for a request (for clients and
// tests).
func Sign(secret []byte, r SignedRequest) string {
	m := hmac.New(sha256.New, secret)
	m.Write(StringToSign(r))
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

// Verify checks the timestamp, nonce and signature of a request made at now
// and returns until when its nonce must be remembered (the end of the
// timestamp's window: after that the request is refused as stale anyway).
// The MAC comparison is constant-time (hmac.Equal).
func (v *Verifier) Verify(now time.Time, signature string, r SignedRequest) (time.Time, *apiError) {
	if r.Timestamp == "" || r.Nonce == "" || signature == "" {
		return time.Time{}, unauthorized(CodeMissingSignature, "requests must carry "+HeaderTimestamp+", "+HeaderNonce+" and "+HeaderSignature)
	}
	if len(r.Timestamp) > 12 {
		return time.Time{}, unauthorized(CodeStaleTimestamp, HeaderTimestamp+" must be unix seconds")
	}
	ts, err := strconv.ParseInt(r.Timestamp, 10, 64)
	if err != nil || ts <= 0 {
		return time.Time{}, unauthorized(CodeStaleTimestamp, HeaderTimestamp+" must be unix seconds")
	}
	skew := now.Sub(time.Unix(ts, 0))
	if skew > v.window || skew < -v.window {
		return time.Time{}, unauthorized(CodeStaleTimestamp, HeaderTimestamp+" is outside the accepted window of "+v.window.String())
	}
	if !noncePattern.MatchString(r.Nonce) {
		return time.Time{}, unauthorized(CodeBadNonce, HeaderNonce+" must match "+noncePattern.String())
	}
	hexSig, ok := strings.CutPrefix(signature, signaturePrefix)
	if !ok {
		return time.Time{}, unauthorized(CodeBadSignature, HeaderSignature+" must be v1=<hex HMAC-SHA256>")
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return time.Time{}, unauthorized(CodeBadSignature, HeaderSignature+" must be v1=<hex HMAC-SHA256>")
	}
	m := hmac.New(sha256.New, v.secret)
	m.Write(StringToSign(r))
	if !hmac.Equal(m.Sum(nil), got) {
		return time.Time{}, unauthorized(CodeBadSignature, "signature does not match")
	}
	return time.Unix(ts, 0).Add(v.window), nil
}
