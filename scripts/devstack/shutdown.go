package devstack

// Stopping a stack: its graceful shutdown, in order.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/wsfleet/wsfleet/testkit/proc"
)

// Shutdown stops everything gracefully, in order: every worker SIGTERM at
// once (they release their leases and write final checkpoints; SIGKILL after
// their shutdown deadline + 5 s), then ingest, the feed and the engines. It
// returns the problems it met (a worker that had to be killed, ...).
func (s *Stack) Shutdown(ctx context.Context) error {
	var errs []error
	grace := s.cfg.Worker.ShutdownDeadline
	if grace == 0 {
		grace = 30 * time.Second
	}
	grace += 5 * time.Second
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < grace {
		grace = max(time.Until(dl), time.Second)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, w := range s.Workers() {
		if !w.Proc.Running() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := w.Proc.Stop(grace)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else if e := w.Proc.ExitErr(); e != nil {
				errs = append(errs, fmt.Errorf("%s exited: %w", w.ID(), e))
			}
		}()
	}
	wg.Wait()
	s.closed.Do(func() {
		if s.closing != nil {
			close(s.closing)
		}
	})
	s.watchers.Wait()
	s.log.Info().Msg("workers stopped")
	for _, w := range s.Workers() {
		if w.DynamoProxy != nil {
			w.DynamoProxy.Close()
		}
	}
	for _, p := range []*proc.Proc{s.Ingest, s.Feed, s.Secrets} {
		if p != nil {
			if err := p.Stop(5 * time.Second); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if s.FeedClient != nil && s.FeedClient.HTTP != nil {
		s.FeedClient.HTTP.CloseIdleConnections()
	}
	if s.API != nil {
		s.API.CloseIdleConnections()
	}
	s.stopDestination()
	if s.SQS != nil {
		s.SQS.Stop()
	}
	if s.ModelProc != nil {
		if err := s.ModelProc.Stop(5 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if s.Dynamo != nil {
		s.Dynamo.Stop()
	}
	s.log.Info().Msg("stack stopped")
	return errors.Join(errs...)
}
