package feed

import (
	"crypto/sha256"
	"encoding/hex"
)

// AuthDigestPrefix labels AuthDigest's value: it is a hash, not a credential.
const AuthDigestPrefix = "sha256:"

// AuthDigest is what the feed shows of an Authorization header: "sha256:"
// and the first 12 hex digits of the value's SHA-256 ("" for an empty
// value). Two credentials tell apart; the value cannot be read back.
func AuthDigest(value string) string {
	if value == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(value))
	return AuthDigestPrefix + hex.EncodeToString(sum[:])[:12]
}
