package feed

// Noticing the server's close frame on a hijacked connection (when a
// connection ends for the source).

import (
	"bufio"
	"net"
	"net/http"
	"sync"
)

// closeWatcher hands coder/websocket a hijacked connection whose writes it
// watches: the server's frames are flushed one write per frame, unmasked,
// so a write starting with 0x88 (FIN + opcode close) is the server sending
// its close frame. (Were frames ever coalesced, the close would only be
// noticed later, when the reader sees the connection end: a stricter check,
// never a laxer one.)
type closeWatcher struct {
	http.ResponseWriter
	closing func()
}

func (w closeWatcher) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	wc := &watchConn{Conn: c, closing: w.closing}
	// Accept reads brw.Reader's buffered bytes, then wc; it writes to the
	// writer: the server's own (empty after the hijack), pointed at wc, not
	// a second 4 KiB buffer per connection (the fleet simulator holds
	// 100,000 of them).
	brw.Writer.Reset(wc)
	return wc, brw, nil
}

type watchConn struct {
	net.Conn
	once    sync.Once
	closing func()
}

func (c *watchConn) Write(p []byte) (int, error) {
	if len(p) > 0 && p[0] == 0x88 {
		c.once.Do(c.closing)
	}
	return c.Conn.Write(p)
}
