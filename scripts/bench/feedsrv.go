package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/wsfleet/wsfleet/shared/feed"
)

// FeedOptions configure the capacity runs' feed: the demo feed (package
// feed) served on the same port of several loopback addresses, so that
// ~19,000 connections from one worker stay far from the ephemeral-port
// limit of one address pair. It runs in its own process (`bench feed`):
// the worker's and the feed's sockets each count against their own
// process's open-file limit (20,000 here).
type FeedOptions struct {
	Addrs []string
	Port  int
	Rate  float64
}

// Validate checks o.
func (o FeedOptions) Validate() error {
	if len(o.Addrs) == 0 {
		return errors.New("feed: no address")
	}
	for _, a := range o.Addrs {
		if ip := net.ParseIP(a); ip == nil || !ip.IsLoopback() {
			return fmt.Errorf("feed address %q: want a loopback IP", a)
		}
	}
	if o.Port <= 0 || o.Port > 65535 {
		return fmt.Errorf("feed port %d: want 1..65535", o.Port)
	}
	if o.Rate <= 0 {
		return fmt.Errorf("feed rate %v: want > 0", o.Rate)
	}
	return nil
}

// ServeFeed serves the feed until ctx is done.
func ServeFeed(ctx context.Context, o FeedOptions) error {
	if err := o.Validate(); err != nil {
		return err
	}
	srv, err := feed.New(feed.Config{Rate: o.Rate})
	if err != nil {
		return err
	}
	var lns []net.Listener
	for _, a := range o.Addrs {
		ln, err := net.Listen("tcp", net.JoinHostPort(a, strconv.Itoa(o.Port)))
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return fmt.Errorf("feed listen: %w", err)
		}
		lns = append(lns, ln)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 5 * time.Second}
	g, gctx := errgroup.WithContext(ctx)
	for _, ln := range lns {
		g.Go(func() error {
			if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("feed serve %s: %w", ln.Addr(), err)
			}
			return nil
		})
	}
	g.Go(func() error {
		<-gctx.Done()
		srv.Close() // the WebSocket connections (hijacked: Shutdown does not see them)
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return hs.Shutdown(sctx)
	})
	return g.Wait()
}
