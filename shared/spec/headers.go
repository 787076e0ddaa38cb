package spec

import (
	"maps"
	"net/textproto"
	"slices"
	"strconv"
	"strings"

	"github.com/wsfleet/wsfleet/shared/source"
)

// Header limits.
const (
	MaxHeaders         = 32
	MaxHeaderNameLen   = 128
	MaxHeaderValueLen  = 4096
	maxQuotedNameBytes = 64
)

// forbiddenHeaders are set by the worker's WebSocket handshake or by HTTP
// itself: a start may not override them.
var forbiddenHeaders = map[string]bool{
	"Host":                     true,
	"Connection":               true,
	"Upgrade":                  true,
	"Content-Length":           true,
	"Transfer-Encoding":        true,
	"Te":                       true,
	"Trailer":                  true,
	"Keep-Alive":               true,
	"Proxy-Connection":         true,
	"Sec-Websocket-Key":        true,
	"Sec-Websocket-Version":    true,
	"Sec-Websocket-Extensions": true,
	"Sec-Websocket-Accept":     true,
}

// isTokenChar reports whether c may appear in an HTTP field name (RFC 9110 tchar).
func isTokenChar(c byte) bool {
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// ValidHeaderName reports whether n is an HTTP field name the worker may
// set on a handshake (a token of at most MaxHeaderNameLen bytes, none of
// the handshake's own).
func ValidHeaderName(n string) bool {
	if n == "" || len(n) > MaxHeaderNameLen || forbiddenHeaders[textproto.CanonicalMIMEHeaderKey(n)] {
		return false
	}
	for i := 0; i < len(n); i++ {
		if !isTokenChar(n[i]) {
			return false
		}
	}
	return true
}

// QuoteName shows a name (a header, a field, a query parameter) in a
// message: names are not secret, but an invalid one is shown escaped and
// truncated.
func QuoteName(n string) string {
	if len(n) > maxQuotedNameBytes {
		n = n[:maxQuotedNameBytes] + "…"
	}
	return strconv.Quote(n)
}

// validHeaderValue reports whether v holds no control byte (a tab aside)
// and no byte outside ASCII: what an HTTP client sends as is.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return true
}

// checkHeaders validates the dial headers. Messages name the header but
// never quote a value.
func checkHeaders(h map[string]string) *source.FieldError {
	if len(h) > MaxHeaders {
		return bad("headers", "at most %d headers", MaxHeaders)
	}
	seen := make(map[string]bool, len(h))
	for _, name := range slices.Sorted(maps.Keys(h)) { // sorted: the same input always gets the same message
		value := h[name]
		if name == "" || len(name) > MaxHeaderNameLen {
			return bad("headers", "header names must be 1..%d bytes", MaxHeaderNameLen)
		}
		for i := 0; i < len(name); i++ {
			if !isTokenChar(name[i]) {
				return bad("headers", "header name %s is not an HTTP token", QuoteName(name))
			}
		}
		canon := textproto.CanonicalMIMEHeaderKey(name)
		if canon == "Sec-Websocket-Protocol" {
			return bad("headers", "header %s may not be given: list the subprotocols in the subprotocols field, which the handshake offers and checks", QuoteName(name))
		}
		if forbiddenHeaders[canon] {
			return bad("headers", "header %s is set by the WebSocket handshake and may not be given", QuoteName(name))
		}
		if seen[canon] {
			return bad("headers", "header %s is given twice (names are case-insensitive)", QuoteName(name))
		}
		seen[canon] = true
		if len(value) > MaxHeaderValueLen {
			return bad("headers", "header %s value is longer than %d bytes", QuoteName(name), MaxHeaderValueLen)
		}
		if !validHeaderValue(value) {
			return bad("headers", "header %s value holds a control or non-ASCII byte", QuoteName(name))
		}
		if value != strings.TrimSpace(value) {
			return bad("headers", "header %s value has leading or trailing whitespace", QuoteName(name))
		}
	}
	return nil
}
