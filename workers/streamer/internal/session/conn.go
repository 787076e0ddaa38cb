package session

// The connection a session reads from: what it needs of a WebSocket
// connection, coder/websocket's over the network in the binary.

import (
	"context"
	"io"
	"net"
	"net/http"

	"github.com/coder/websocket"
)

// Conn is what a session uses of its WebSocket connection. The binary's is
// always coder/websocket's, over the TCP connection its dial opened
// (wsConn); Env.Dial may give another (the fleet simulator's source, which
// needs no socket).
type Conn interface {
	// Reader waits for the next message (coder/websocket's Conn.Reader).
	Reader(ctx context.Context) (websocket.MessageType, io.Reader, error)
	// Write sends one message.
	Write(ctx context.Context, typ websocket.MessageType, data []byte) error
	// Ping sends a ping and waits for its pong.
	Ping(ctx context.Context) error
	// Close starts the close handshake with code and waits for it.
	Close(code websocket.StatusCode, reason string) error
	// CloseNow closes without a handshake (waiting for one in progress).
	CloseNow() error
	// Abort closes the transport under the connection at once, so that a
	// blocked Reader returns even while Close waits for the source; false
	// when it has none to close (the caller then calls CloseNow).
	Abort() bool
	// SetReadLimit bounds one message's size.
	SetReadLimit(n int64)
}

// Dialer opens a session's connection to target (Env.Dial). It answers the
// handshake's response when there was one, a refusal's included.
type Dialer func(ctx context.Context, target string, opts *websocket.DialOptions) (Conn, *http.Response, error)

// wsConn is a coder/websocket connection and the TCP connection its dial
// opened (raw: nil when the transport did not hand it over).
type wsConn struct {
	*websocket.Conn
	raw net.Conn
}

func (c *wsConn) Abort() bool {
	if c.raw == nil {
		return false
	}
	_ = c.raw.Close()
	return true
}

// dialWS is the binary's Dialer: coder/websocket's handshake, with the TCP
// connection the session's transport put in ctx's slot (transport.go).
func dialWS(ctx context.Context, target string, opts *websocket.DialOptions) (Conn, *http.Response, error) {
	conn, resp, err := websocket.Dial(ctx, target, opts)
	if err != nil {
		return nil, resp, err
	}
	c := &wsConn{Conn: conn}
	if slot, ok := ctx.Value(rawSlotKey{}).(*rawSlot); ok {
		c.raw = slot.get()
	}
	return c, resp, nil
}
