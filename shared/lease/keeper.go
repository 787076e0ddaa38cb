package lease

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
)

// Observer hears what the Keeper does (metrics, logs). Methods must not block.
type Observer interface {
	// Renewed is called after every renew attempt.
	Renewed(h *Held, latency time.Duration, err error)
	// Ended is called once when a tenure ends for any reason but Release.
	Ended(h *Held, err error)
}

type nopObserver struct{}

func (nopObserver) Renewed(*Held, time.Duration, error) {}
func (nopObserver) Ended(*Held, error)                  {}

// Keeper holds a worker's leases: it acquires them, renews each about every
// RenewEvery (carrying the latest checkpoint), and ends a tenure as soon as
// the store says it is over or its trust deadline passes, whichever is first,
// even when the store is unreachable.
type Keeper struct {
	store Store
	clk   clock.Clock
	cfg   Config
	obs   Observer

	sem chan struct{}
	wg  sync.WaitGroup

	mu   sync.Mutex // guards held; taken before any Held's mu, never after
	held map[string]*Held

	rndMu sync.Mutex // guards rnd only; a leaf lock
	rnd   *rand.Rand
}

// NewKeeper returns a Keeper; obs may be nil.
func NewKeeper(store Store, clk clock.Clock, cfg Config, obs Observer) (*Keeper, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if obs == nil {
		obs = nopObserver{}
	}
	return &Keeper{
		store: store, clk: clk, cfg: cfg, obs: obs,
		sem:  make(chan struct{}, cfg.MaxConcurrentRenews),
		held: map[string]*Held{},
		rnd:  rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}, nil
}

// Config returns the Keeper's timings.
func (k *Keeper) Config() Config { return k.cfg }

// Store returns the store the Keeper writes to.
func (k *Keeper) Store() Store { return k.store }

func (k *Keeper) jittered(d time.Duration) time.Duration {
	k.rndMu.Lock()
	f := 1 + k.cfg.RenewJitter*(2*k.rnd.Float64()-1)
	k.rndMu.Unlock()
	return time.Duration(float64(d) * f)
}

// Acquire takes the lease of id and starts holding it.
func (k *Keeper) Acquire(ctx context.Context, id string) (*Held, error) {
	k.mu.Lock()
	if h, ok := k.held[id]; ok && h.Err() == nil {
		k.mu.Unlock()
		return nil, fmt.Errorf("acquire %s: %w (by this worker)", id, ErrHeld)
	}
	k.mu.Unlock()
	sentAt := k.clk.Now()
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	it, err := k.store.Acquire(ctx, id, k.cfg.Owner, StaleBeforeMs(sentAt, k.cfg.MaxSkew), ExpiresAtMs(sentAt, k.cfg.TTL))
	if err != nil {
		return nil, fmt.Errorf("acquire %s: %w", id, err)
	}
	h := newHeld(it, sentAt, k.cfg, sentAt.Add(k.jittered(k.cfg.RenewEvery)), k.clk.Now)
	k.mu.Lock()
	if old, ok := k.held[id]; ok {
		old.end(ErrLeaseLost)
	}
	k.held[id] = h
	k.mu.Unlock()
	return h, nil
}

// Run renews held leases and enforces trust deadlines until ctx is done,
// then waits for renewals in flight.
func (k *Keeper) Run(ctx context.Context) error {
	defer k.wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-k.clk.After(k.cfg.Tick):
		}
		k.tick(ctx)
	}
}

// tick ends tenures past their deadline and starts due renewals.
func (k *Keeper) tick(ctx context.Context) {
	now := k.clk.Now()
	k.mu.Lock()
	var ended []*Held
	var due []*Held
	for id, h := range k.held {
		h.mu.Lock()
		err := h.t.check(now)
		if err != nil {
			if h.endLocked(err) {
				ended = append(ended, h)
			}
			delete(k.held, id)
		} else if h.t.renewDue(now) {
			due = append(due, h)
		}
		h.mu.Unlock()
	}
	k.mu.Unlock()
	for _, h := range ended {
		k.obs.Ended(h, h.Err())
	}
	// Every due lease is dispatched now; at most MaxConcurrentRenews
	// renewals are in flight, the rest wait for a slot in arrival order (a
	// slot frees as soon as a renewal returns, not at the next tick, so the
	// renewal rate is bounded by the store's latency, not by Tick).
	for _, h := range due {
		h.mu.Lock()
		h.t.renewSent()
		h.mu.Unlock()
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			select {
			case k.sem <- struct{}{}:
			case <-ctx.Done():
				h.mu.Lock()
				h.t.inFlight = false
				h.mu.Unlock()
				return
			}
			defer func() { <-k.sem }()
			if h.Err() != nil {
				return // ended while it waited (deadline, release): nothing to renew
			}
			k.renew(ctx, h)
		}()
	}
}

func (k *Keeper) renew(ctx context.Context, h *Held) {
	seq := h.LastSeq()
	sentAt := k.clk.Now()
	rctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	it, err := k.store.Renew(rctx, h.token, sentAt.UnixMilli(), ExpiresAtMs(sentAt, k.cfg.TTL), seq)
	cancel()
	latency := k.clk.Now().Sub(sentAt)
	k.obs.Renewed(h, latency, err)
	next := sentAt.Add(k.jittered(k.cfg.RenewEvery))
	h.mu.Lock()
	var endedNow bool
	if err == nil {
		h.t.renewSucceeded(sentAt, next)
		h.setItem(it)
	} else {
		retry := k.cfg.RetryEvery
		if ctx.Err() != nil {
			retry = k.cfg.RenewEvery
		}
		h.t.renewFailed(err, k.clk.Now().Add(retry))
		if h.t.ended != nil {
			endedNow = h.endLocked(fmt.Errorf("renew %s: %w", h.token, err))
		}
	}
	h.mu.Unlock()
	if endedNow {
		k.forget(h)
		k.obs.Ended(h, err)
	}
}

func (k *Keeper) forget(h *Held) {
	k.mu.Lock()
	if k.held[h.ID()] == h {
		delete(k.held, h.ID())
	}
	k.mu.Unlock()
}

// Checkpoint writes h's highest observed seq now (renewals also carry it).
func (k *Keeper) Checkpoint(ctx context.Context, h *Held) error {
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	if err := k.store.Checkpoint(ctx, h.token, h.LastSeq()); err != nil {
		return fmt.Errorf("checkpoint %s: %w", h.token, err)
	}
	return nil
}

// Release ends h and writes the release (expiry 0, final checkpoint) so
// another worker may take the lease at once. The caller has stopped using
// the session first. Releasing a tenure that ended (stopped, untrusted) is
// allowed and still useful; one whose lease was lost returns ErrLeaseLost.
func (k *Keeper) Release(ctx context.Context, h *Held) error {
	h.end(ErrReleased)
	k.forget(h)
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	if err := k.store.Release(ctx, h.token, h.LastSeq()); err != nil {
		return fmt.Errorf("release %s: %w", h.token, err)
	}
	return nil
}

// Fail ends h and records that its source, as configured at generation gen,
// can never be connected (Store.Fail: reason seen at at, the final
// checkpoint, the session FAILED until a new start). Like Release, the
// caller has stopped using the session first; unlike Release, no worker
// takes the lease afterwards. ErrNewGeneration: the session has a newer
// configuration, never tried; nothing was written and h may still be
// released.
func (k *Keeper) Fail(ctx context.Context, h *Held, gen int64, reason string, at time.Time) error {
	h.end(ErrFailed)
	k.forget(h)
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	if err := k.store.Fail(ctx, h.token, gen, h.LastSeq(), reason, at.UnixMilli()); err != nil {
		return fmt.Errorf("fail %s: %w", h.token, err)
	}
	return nil
}

// NoteError records reason as h's session's last connection error, seen at
// at, while h holds the lease. It does not end h.
func (k *Keeper) NoteError(ctx context.Context, h *Held, reason string, at time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	if err := k.store.NoteError(ctx, h.token, reason, at.UnixMilli()); err != nil {
		return fmt.Errorf("note error %s: %w", h.token, err)
	}
	return nil
}

// Abandon stops holding h without writing anything (the lease expires by
// itself). Tests use it to play a crash.
func (k *Keeper) Abandon(h *Held) {
	h.end(ErrReleased)
	k.forget(h)
}

// Orphans lists STARTED sessions whose lease expired by more than MaxSkew
// (or was released, or never taken).
func (k *Keeper) Orphans(ctx context.Context, limit int) ([]Candidate, error) {
	c, err := k.store.Orphans(ctx, StaleBeforeMs(k.clk.Now(), k.cfg.MaxSkew), limit)
	if err != nil {
		return nil, fmt.Errorf("orphans: %w", err)
	}
	return c, nil
}

// Expiring lists STARTED sessions whose lease expires within the next
// `within` (orphans included), so a reconciler can try each at exactly
// TakeableAt instead of waiting for its next pass. Live leases are renewed
// every RenewEvery, so with within < TTL - RenewEvery they do not appear.
func (k *Keeper) Expiring(ctx context.Context, within time.Duration, limit int) ([]Candidate, error) {
	c, err := k.store.Orphans(ctx, k.clk.Now().Add(within).UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("expiring: %w", err)
	}
	return c, nil
}

// TakeableIn is how long until c may be acquired (≤ 0: now).
func (k *Keeper) TakeableIn(c Candidate) time.Duration {
	return TakeableAt(c.ExpiresAtMs, k.cfg.MaxSkew).Sub(k.clk.Now())
}

// Holds reports whether this worker currently holds id.
func (k *Keeper) Holds(id string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	h, ok := k.held[id]
	return ok && h.Err() == nil
}

// Held lists the tenures being held, by connection id.
func (k *Keeper) Held() []*Held {
	k.mu.Lock()
	out := make([]*Held, 0, len(k.held))
	for _, h := range k.held {
		out = append(out, h)
	}
	k.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}

// Count is the number of leases held.
func (k *Keeper) Count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.held)
}

// IsTransient reports whether err from a store call may succeed if retried.
func IsTransient(err error) bool {
	return err != nil && !Definitive(err) && !errors.Is(err, ErrUntrusted)
}
