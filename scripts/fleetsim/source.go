//go:build fleetsim

package fleetsim

// The fleet's source: the light source (lightsrc.go, the default) or the
// test feed over in-memory pipes (Config.Feed).

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/pipenet"
	"github.com/wsfleet/wsfleet/workers/streamer"
)

// source is what the fleet needs of its sessions' source.
type source interface {
	// ProducedAt is when seq of session is produced (the exact dark time).
	ProducedAt(session string, seq int64) (time.Time, bool)
	// Overlaps counts two owners' connections of one session open at once.
	Overlaps() int
	// RateLimited counts the dials refused over the connection-rate limit.
	RateLimited() int64
	// connect makes w's sessions dial it from addr.
	connect(w *streamer.Worker, addr net.Addr)
	Close()
}

// newSource is cfg's source.
func newSource(cfg Config) (source, error) {
	standby := cfg.StandbyShare > 0
	if !cfg.Feed {
		return newLightSource(cfg.Rate, cfg.ConnLimit, standby), nil
	}
	fc := feed.Config{Rate: cfg.Rate, Mode: feed.ModeAllow, ConnLimit: cfg.ConnLimit}
	if standby {
		fc.TenureHeader, fc.AllowStandby = standbyTenureHeader, true
	}
	f, err := feed.New(fc)
	if err != nil {
		return nil, fmt.Errorf("fleetsim: source: %w", err)
	}
	fs := &feedSource{Server: f, pn: pipenet.New(), served: make(chan struct{})}
	fs.srv = &http.Server{Handler: f.Handler()}
	go func() { defer close(fs.served); _ = fs.srv.Serve(fs.pn) }()
	return fs, nil
}

func (l *lightSource) connect(w *streamer.Worker, addr net.Addr) {
	w.SimSetSessionDialer(l.dialer(addr))
}

// feedSource is the test feed (testkit/feed) served over in-memory pipes:
// every session a real WebSocket client and server connection and an HTTP
// handshake (~100 KiB a session, doc.go).
type feedSource struct {
	*feed.Server
	pn     *pipenet.Net
	srv    *http.Server
	served chan struct{}
}

func (fs *feedSource) Overlaps() int      { return len(fs.Stats().Overlaps) }
func (fs *feedSource) RateLimited() int64 { return fs.Stats().RateLimited }

func (fs *feedSource) connect(w *streamer.Worker, addr net.Addr) {
	w.SimSetSessionTransport(&http.Transport{DialContext: fs.pn.DialFrom(addr), DisableKeepAlives: true})
}

func (fs *feedSource) Close() {
	fs.Server.Close()
	_ = fs.srv.Close()
	<-fs.served
}
