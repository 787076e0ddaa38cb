package api

import (
	"fmt"
	"maps"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
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

// quoteName shows a header name in a message: names are not secret, but an
// invalid one is shown escaped and truncated.
func quoteName(n string) string {
	if len(n) > maxQuotedNameBytes {
		n = n[:maxQuotedNameBytes] + "…"
	}
	return strconv.Quote(n)
}

// CheckHeaders validates the dial headers of a start. Messages name the
// header but never quote a value.
func CheckHeaders(h map[string]string) *apiError {
	if len(h) > MaxHeaders {
		return badRequest(CodeInvalidHeader, fmt.Sprintf("at most %d headers", MaxHeaders))
	}
	seen := make(map[string]bool, len(h))
	for _, name := range slices.Sorted(maps.Keys(h)) { // sorted: the same input always gets the same message
		value := h[name]
		if name == "" || len(name) > MaxHeaderNameLen {
			return badRequest(CodeInvalidHeader, fmt.Sprintf("header names must be 1..%d bytes", MaxHeaderNameLen))
		}
		for i := 0; i < len(name); i++ {
			if !isTokenChar(name[i]) {
				return badRequest(CodeInvalidHeader, "header name "+quoteName(name)+" is not an HTTP token")
			}
		}
		canon := textproto.CanonicalMIMEHeaderKey(name)
		if canon == "Sec-Websocket-Protocol" {
			return badRequest(CodeInvalidHeader, "header "+quoteName(name)+" may not be given: list the subprotocols in the subprotocols field, which the handshake offers and checks")
		}
		if forbiddenHeaders[canon] {
			return badRequest(CodeInvalidHeader, "header "+quoteName(name)+" is set by the WebSocket handshake and may not be given")
		}
		if seen[canon] {
			return badRequest(CodeInvalidHeader, "header "+quoteName(name)+" is given twice (names are case-insensitive)")
		}
		seen[canon] = true
		if len(value) > MaxHeaderValueLen {
			return badRequest(CodeInvalidHeader, fmt.Sprintf("header %s value is longer than %d bytes", quoteName(name), MaxHeaderValueLen))
		}
		for i := 0; i < len(value); i++ {
			if c := value[i]; (c < 0x20 && c != '\t') || c >= 0x7f {
				return badRequest(CodeInvalidHeader, "header "+quoteName(name)+" value holds a control or non-ASCII byte")
			}
		}
		if value != strings.TrimSpace(value) {
			return badRequest(CodeInvalidHeader, "header "+quoteName(name)+" value has leading or trailing whitespace")
		}
	}
	return nil
}
