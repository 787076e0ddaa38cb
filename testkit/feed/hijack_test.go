package feed

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// hijacker is a ResponseWriter whose Hijack hands out its own connection
// and buffers, as net/http's does.
type hijacker struct {
	*httptest.ResponseRecorder
	c   net.Conn
	brw *bufio.ReadWriter
}

func (h hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) { return h.c, h.brw, nil }

// closeWatcher's Hijack reuses the server's write buffer (pointed at the
// watched connection) instead of a second one per connection: the fleet
// simulator holds 100,000 connections, 4 KiB each.
func TestCloseWatcherReusesTheServersWriter(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	brw := bufio.NewReadWriter(bufio.NewReader(a), bufio.NewWriter(a))
	closed := 0
	var w http.ResponseWriter = closeWatcher{ResponseWriter: hijacker{httptest.NewRecorder(), a, brw}, closing: func() { closed++ }}
	_, got, err := w.(http.Hijacker).Hijack()
	if err != nil {
		t.Fatal(err)
	}
	if got.Writer != brw.Writer || got.Reader != brw.Reader {
		t.Fatalf("Hijack made new buffers: writer %p (server's %p), reader %p (server's %p)", got.Writer, brw.Writer, got.Reader, brw.Reader)
	}
	// Writes through the buffer still reach the watched connection: a
	// close frame is noticed.
	go func() { _, _ = b.Read(make([]byte, 8)) }()
	if _, err := got.Write([]byte{0x88, 0}); err != nil {
		t.Fatal(err)
	}
	if err := got.Flush(); err != nil {
		t.Fatal(err)
	}
	if closed != 1 {
		t.Fatalf("the close frame written through the buffer was not noticed (%d)", closed)
	}
}
