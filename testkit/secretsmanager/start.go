package secretsmanager

import (
	"net/http/httptest"
	"testing"
)

// Start runs a stand-in on 127.0.0.1 (a free port) for t's duration; its
// Endpoint is the BaseEndpoint to give an SDK client (see NewClient).
func Start(t testing.TB) *Server {
	t.Helper()
	s := New()
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	s.SetEndpoint(hs.URL)
	return s
}
