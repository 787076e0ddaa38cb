// Why a session ends or reconnects, and how each reason closes the socket.

package session

import (
	"errors"
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/shared/lease"
)

// Terminal reasons a session ends with (besides the lease's own errors:
// lease.ErrLeaseLost, ErrUntrusted, ErrWorkerDead, ErrStopped, …).
var (
	// ErrShutdown: the worker is shutting down gracefully (close 1001,
	// release, hand off).
	ErrShutdown = errors.New("worker shutting down")
	// ErrStopRequested: a stop notification was confirmed in the table
	// (close 1000, release).
	ErrStopRequested = errors.New("session stopped")
	// ErrCrashed: the worker is going away without releasing (tests play a
	// crash with it; also the end of a shutdown that ran out of time).
	ErrCrashed = errors.New("worker abandoned the session")
	// ErrSourceFailed: the source can never be connected (a permanent dial
	// error, or Config.MaxDialFailures failed connects in a row). The worker
	// records it (the session becomes FAILED) instead of releasing.
	ErrSourceFailed = errors.New("source cannot be connected")
	// ErrSinkRefused: the sink refused a message for good (a permanent
	// refusal, or a message too large for it) and the session's
	// on_sink_refusal is fail. The worker records it (the session becomes
	// FAILED, the reason its last_error) instead of releasing; nothing
	// acknowledged past the message is checkpointed.
	ErrSinkRefused = errors.New("sink refused a message for good")
	// ErrMoved: the worker hands the session to another one to rebalance
	// the fleet (close 1001, release reserved for the receiver); a MoveTo
	// names the receiver.
	ErrMoved = errors.New("session moved to another worker")
	// ErrPromoted: a standby's session was adopted (NewAdopting): its
	// connection and window went to the new session, or, when it had no
	// connection ready, the standby was dropped for the session's own dial.
	ErrPromoted = errors.New("standby promoted: its session took over")
	// ErrStandbyRefused: the source does not take a second connection
	// (a handshake refused with 409 or for good, or a connection it
	// closed before Config.StableAfter): the standby does not dial again,
	// so as not to kick its owner's connection.
	ErrStandbyRefused = errors.New("source refused a standby connection")
)

// MoveTo is the reason of a directed hand-off to worker To: a rebalancing
// move, or (Shutdown) the graceful shutdown's hand-off of the session.
type MoveTo struct {
	To       string
	Shutdown bool
	// ReadyAt is when the receiver answered that it would take the
	// session (a rebalancing move of a session whose standby it holds;
	// zero: not asked).
	ReadyAt time.Time
	// Else is another receiver of the shutdown's plan, offered the
	// session when To will not take it ("": none).
	Else string
}

func (m MoveTo) Error() string { return "session moved to " + m.To }

// Unwrap makes errors.Is(reason, ErrMoved) true, and errors.Is(reason,
// ErrShutdown) too for a shutdown's hand-off.
func (m MoveTo) Unwrap() []error {
	if m.Shutdown {
		return []error{ErrMoved, ErrShutdown}
	}
	return []error{ErrMoved}
}

// Reasons to reconnect (not terminal).
var (
	errGeneration = errors.New("session generation changed")
	errPing       = errors.New("ping timed out")
	errSink       = errors.New("sink refused a message")
	// errStandbyClose: a standby closes its connection (Close, SetItem).
	errStandbyClose = errors.New("standby closed")
)

// graceful reports whether reason ends the connection with a close
// handshake (and which status), or at once.
func closeCodeFor(reason error) (websocket.StatusCode, bool) {
	switch {
	case errors.Is(reason, ErrShutdown), errors.Is(reason, ErrMoved):
		return websocket.StatusGoingAway, true
	case errors.Is(reason, ErrStopRequested), errors.Is(reason, lease.ErrStopped), errors.Is(reason, errGeneration),
		errors.Is(reason, errSwitch), errors.Is(reason, errPlanned), errors.Is(reason, errStandbyClose):
		return websocket.StatusNormalClosure, true
	}
	return 0, false
}

func closeText(code websocket.StatusCode) string {
	if code == websocket.StatusGoingAway {
		return "worker shutting down"
	}
	return "session closed"
}
