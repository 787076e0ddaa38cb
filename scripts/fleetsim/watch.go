//go:build fleetsim

package fleetsim

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
)

// watcher writes every ownership call that names one of its sessions
// (Config.Watch): the worker, the call, what it named and how it ended,
// at the fleet's virtual time.
type watcher struct {
	ids map[string]bool
	t0  time.Time
	mu  sync.Mutex
	to  io.Writer
}

// newWatcher watches ids, writing to to; nil when there is nothing to
// watch or nowhere to write.
func newWatcher(ids []string, to io.Writer, t0 time.Time) *watcher {
	if len(ids) == 0 || to == nil {
		return nil
	}
	w := &watcher{ids: map[string]bool{}, t0: t0, to: to}
	for _, id := range ids {
		w.ids[id] = true
	}
	return w
}

// note writes one call on id by worker who, when id is watched.
func (w *watcher) note(id, who, call string, err error, detail string, args ...any) {
	if w == nil || !w.ids[id] {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Fprintf(w.to, "watch %s +%.3fs %s %s %s: %v\n", id, time.Since(w.t0).Seconds(), who, call, fmt.Sprintf(detail, args...), err)
}

// listed notes each watched session of a listing's answer.
func (w *watcher) listed(who, call string, ids []string) {
	if w == nil {
		return
	}
	for _, id := range ids {
		w.note(id, who, call, nil, "listed")
	}
}

// token is a tenure, briefly.
func token(t lease.Token) string { return fmt.Sprintf("%s@%d", t.Owner, t.Epoch) }
