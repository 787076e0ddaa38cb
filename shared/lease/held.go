package lease

import (
	"sync"
	"time"
)

// tenure is the holder's pure state for one lease: when it may still act as
// owner, when to renew next. Every method takes the current time; none reads
// a clock or does I/O.
type tenure struct {
	ttl, margin time.Duration

	trustedUntil time.Time // monotonic
	lastSentOK   time.Time // send time of the last successful write
	nextRenewAt  time.Time
	inFlight     bool
	ended        error
}

func newTenure(sentAt time.Time, ttl, margin time.Duration, firstRenew time.Time) tenure {
	return tenure{ttl: ttl, margin: margin, trustedUntil: TrustedUntil(sentAt, ttl, margin), lastSentOK: sentAt, nextRenewAt: firstRenew}
}

// check ends the tenure once now reaches the trust deadline and returns why
// it ended (nil while it holds).
func (t *tenure) check(now time.Time) error {
	if t.ended == nil && !now.Before(t.trustedUntil) {
		t.ended = ErrUntrusted
	}
	return t.ended
}

// valid reports whether the holder may act as owner at now.
func (t *tenure) valid(now time.Time) bool { return t.ended == nil && now.Before(t.trustedUntil) }

func (t *tenure) renewDue(now time.Time) bool {
	return t.ended == nil && !t.inFlight && !now.Before(t.nextRenewAt)
}

func (t *tenure) renewSent() { t.inFlight = true }

// renewSucceeded extends trust from the send time of the renew (never from
// its reply time: the write may have been applied at any point after sending).
func (t *tenure) renewSucceeded(sentAt, next time.Time) {
	t.inFlight = false
	t.nextRenewAt = next
	if t.ended == nil && sentAt.After(t.lastSentOK) {
		t.lastSentOK = sentAt
		t.trustedUntil = TrustedUntil(sentAt, t.ttl, t.margin)
	}
}

// renewFailed ends the tenure on a definitive error, or schedules a retry.
func (t *tenure) renewFailed(err error, retryAt time.Time) {
	t.inFlight = false
	if Definitive(err) {
		t.end(err)
		return
	}
	t.nextRenewAt = retryAt
}

func (t *tenure) end(err error) {
	if t.ended == nil {
		t.ended = err
	}
}

// Held is one lease this worker holds. Sessions check Valid before every
// side effect and stop when Done is closed.
type Held struct {
	token      Token
	acquiredAt time.Time
	now        func() time.Time

	mu      sync.Mutex
	t       tenure
	item    Item
	lastSeq int64
	done    chan struct{}
	changed chan struct{}
}

func newHeld(it Item, sentAt time.Time, cfg Config, firstRenew time.Time, now func() time.Time) *Held {
	return &Held{
		token:      Token{ConnectionID: it.ConnectionID, Owner: it.Owner, Epoch: it.Epoch},
		acquiredAt: sentAt,
		now:        now,
		t:          newTenure(sentAt, cfg.TTL, cfg.SafetyMargin, firstRenew),
		item:       it,
		lastSeq:    it.LastSeq,
		done:       make(chan struct{}),
		changed:    make(chan struct{}, 1),
	}
}

// Token is the owner and epoch every write of this tenure is fenced on.
func (h *Held) Token() Token { return h.token }

// ID is the connection id.
func (h *Held) ID() string { return h.token.ConnectionID }

// Epoch is the fencing epoch of this tenure.
func (h *Held) Epoch() int64 { return h.token.Epoch }

// AcquiredAt is when the acquire was sent.
func (h *Held) AcquiredAt() time.Time { return h.acquiredAt }

// Item is the latest copy of the session item (refreshed by every renew).
func (h *Held) Item() Item {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.item
}

// Valid reports whether this worker may still act as owner now: the lease
// has not ended and the trust deadline (measured on the monotonic clock from
// the last successful renew's send time) has not passed.
func (h *Held) Valid() bool {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.t.valid(now)
}

// TrustedUntil is the current monotonic trust deadline.
func (h *Held) TrustedUntil() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.t.trustedUntil
}

// Done is closed when the tenure ends (lost, stopped, untrusted, released).
func (h *Held) Done() <-chan struct{} { return h.done }

// Err says why the tenure ended; nil while it holds.
func (h *Held) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.t.ended
}

// Changed receives a signal when a renew brings a new generation of the
// session (new ws_url or headers).
func (h *Held) Changed() <-chan struct{} { return h.changed }

// Observe records that seq was delivered; the next renew or release
// checkpoints the highest observed seq.
func (h *Held) Observe(seq int64) {
	h.mu.Lock()
	if seq > h.lastSeq {
		h.lastSeq = seq
	}
	h.mu.Unlock()
}

// LastSeq is the highest delivered (observed) sequence number.
func (h *Held) LastSeq() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastSeq
}

// end finishes the tenure with err (first reason wins) and closes Done.
// It reports whether this call ended it.
func (h *Held) end(err error) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.endLocked(err)
}

func (h *Held) endLocked(err error) bool {
	select {
	case <-h.done:
		return false
	default:
	}
	h.t.end(err)
	close(h.done)
	return true
}

func (h *Held) setItem(it Item) {
	if it.Generation != h.item.Generation {
		select {
		case h.changed <- struct{}{}:
		default:
		}
	}
	h.item = it
}
