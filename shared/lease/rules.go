package lease

import (
	"errors"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// The rules below (the liveness rules) and in rules_sessions.go,
// rules_standby.go and rules_watch.go are the whole protocol, pure: no I/O,
// time passed in. Stores express the Can* rules as
// write conditions and use the Classify* rules on a consistent read after a
// condition failed; memstore evaluates the Can* rules directly.

// errConditionRaced is returned when a condition failed but the item read
// afterwards satisfies it: the item changed in between. It is transient.
var errConditionRaced = errors.New("condition failed but the item now satisfies it")

// errSuperseded: a heartbeat's counter was not above the stored one (a later
// attempt was applied first). Transient: the next heartbeat carries a new one.
var errSuperseded = errors.New("heartbeat superseded by a later one")

// TrustedUntil is the monotonic instant after which a worker must no longer
// act as owner of any session, when its last successful heartbeat was sent
// at sentAt (its monotonic clock).
func TrustedUntil(sentAt time.Time, ttl, margin time.Duration) time.Time {
	return sentAt.Add(ttl - margin)
}

// HeartbeatTimeout is how long a heartbeat sent at sentAt may wait for its
// answer when the worker is trusted until trustedUntil and heartbeats
// every every: rpc, but never past the point where one period of trust is
// left, so that a heartbeat caught in one of DynamoDB's latency spikes (the
// service's internal timeout and a retry elsewhere: seconds, about 1
// request in 10,000; the model's ddbrules.AWSWriteLatency) gives up while
// another, sent at once (HeartbeatAgainAtOnce), still has a period to
// land. With the whole rpc for it, one hung heartbeat could leave no
// success in the trust window: Validate allows TTL − SafetyMargin =
// HeartbeatEvery + RPCTimeout exactly (chaos's 3 s = 1 s + 2 s: 1 s now),
// and a chaos run on the model fenced a worker's 6 sessions with no fault
// injected. While heartbeats succeed it is rpc at the defaults (7 s left
// at each send) and at the tests' settings (1.2 s left, 200 ms period, 1 s
// rpc), so a throttled heartbeat keeps its room for the SDK's retries (a
// bound of half the trust left, tried before, cut the tests' to 600 ms and
// CI's load fenced a throttled worker). When less than a period (plus
// floor) is left, or trust has lapsed, the heartbeat is the last chance
// and gets rpc. Safety does not depend on it: trust runs from a successful
// heartbeat's send time, whatever its timeout.
func HeartbeatTimeout(sentAt, trustedUntil time.Time, every, rpc, floor time.Duration) time.Duration {
	before := trustedUntil.Sub(sentAt) - every
	if before < floor {
		return rpc
	}
	return min(rpc, before)
}

// HeartbeatAgainAtOnce reports whether a heartbeat sent at sentAt that
// failed is followed by another at once (HeartbeatAgainAt says when)
// rather than one period after it:
// when the one on schedule (sentAt + every) could not have its whole rpc
// inside the trust left (trustedUntil). At the defaults (8 s of trust, a
// heartbeat every 1 s, 2 s each) a failure waits its period, as ever; near
// the edge Validate allows (chaos: 3 s = 1 s + 2 s) a heartbeat that gave
// up at HeartbeatTimeout is sent again while it can still land.
func HeartbeatAgainAtOnce(sentAt, trustedUntil time.Time, every, rpc time.Duration) bool {
	return sentAt.Add(every).After(trustedUntil.Add(-rpc))
}

// HeartbeatAgainAt is when the heartbeat after one sent at sentAt that
// failed at failedAt is due, when not one period after it (false): with
// trust at risk (HeartbeatAgainAtOnce) a quarter period after the failed
// one's send, so at once after one that hung until its timeout but never
// more than four a period (one that failed fast, an endpoint refusing, is
// not sent again every Tick). Trust that had lapsed by failedAt has
// nothing left to save: the period again.
func HeartbeatAgainAt(sentAt, failedAt, trustedUntil time.Time, every, rpc time.Duration) (time.Time, bool) {
	if !failedAt.Before(trustedUntil) || !HeartbeatAgainAtOnce(sentAt, trustedUntil, every, rpc) {
		return time.Time{}, false
	}
	return sentAt.Add(every / 4), true
}

// DeathAllowedAt is the earliest instant (the observer's monotonic clock) at
// which an observer may declare a worker dead, when it first received a read
// of the worker's current heartbeat counter at firstSeen: the counter has
// then not moved for wait = max(observer's TTL, the record's TTL).
func DeathAllowedAt(firstSeen time.Time, ownTTL, recordTTL time.Duration) time.Time {
	return firstSeen.Add(max(ownTTL, recordTTL))
}

// BackstopAllowedAt is when the fleet summary's writer, which reads every
// alive record once a refresh, may declare a worker dead: a refresh after
// its watchers may (DeathAllowedAt), so that the watchers, which read their
// targets every WatchEvery, declare it first whenever they are alive, and
// the summarizer only when they died too (the watcher chain).
func BackstopAllowedAt(firstSeen time.Time, ownTTL, recordTTL, refresh time.Duration) time.Time {
	return DeathAllowedAt(firstSeen, ownTTL, recordTTL).Add(refresh)
}

// CanHeartbeat decides a heartbeat of epoch with counter seq on rec.
func CanHeartbeat(rec *WorkerRecord, epoch, seq int64) error {
	switch {
	case rec == nil:
		return ErrWorkerNotFound
	case !rec.Alive() || rec.Epoch != epoch:
		return ErrWorkerDead
	case rec.HeartbeatSeq >= seq:
		return errSuperseded
	}
	return nil
}

// ClassifyHeartbeat explains a failed heartbeat condition from the record
// read after it.
func ClassifyHeartbeat(rec *WorkerRecord, epoch, seq int64) error {
	if err := CanHeartbeat(rec, epoch, seq); err != nil {
		return err
	}
	return errConditionRaced
}

// HeartbeatApplied reports whether rec shows heartbeat hb at epoch as
// written: a retry of a heartbeat whose first attempt was applied and its
// reply lost (a 500 after the write, a dropped connection) finds its own
// counter and time, and that beat counts. A stale attempt with the same
// counter but another time does not.
func HeartbeatApplied(rec *WorkerRecord, epoch int64, hb Heartbeat) bool {
	return rec != nil && rec.Alive() && rec.Epoch == epoch && rec.HeartbeatSeq == hb.Seq && rec.HeartbeatAtMs == hb.AtMs
}

// DeclaredDeadAs reports whether rec shows the declaration that observer by
// made at atMs of the worker it saw ALIVE at epoch with counter seenSeq: a
// retry of a declaration that was applied, its reply lost, finds it done.
// A declaration by another observer, or at another time, is not this one.
func DeclaredDeadAs(rec *WorkerRecord, epoch, seenSeq int64, by string, atMs int64) bool {
	return rec != nil && rec.State == schema.WorkerDead && rec.Epoch == epoch+1 && rec.HeartbeatSeq == seenSeq &&
		rec.DeclaredBy == by && rec.EndedAtMs == atMs
}

// CanDeclareDead decides a declaration of death of rec's worker by an
// observer that saw it ALIVE at epoch with counter seenSeq (and waited
// DeathAllowedAt).
func CanDeclareDead(rec *WorkerRecord, epoch, seenSeq int64) error {
	switch {
	case rec == nil:
		return ErrWorkerNotFound
	case !rec.Alive():
		return ErrWorkerDead
	case rec.Epoch != epoch || rec.HeartbeatSeq != seenSeq:
		return ErrWorkerAlive
	}
	return nil
}

// ClassifyDeclareDead explains a failed declaration.
func ClassifyDeclareDead(rec *WorkerRecord, epoch, seenSeq int64) error {
	if err := CanDeclareDead(rec, epoch, seenSeq); err != nil {
		return err
	}
	return errConditionRaced
}

// CanLeave decides a worker's own LEFT at epoch.
func CanLeave(rec *WorkerRecord, epoch int64) error {
	switch {
	case rec == nil:
		return ErrWorkerNotFound
	case !rec.Alive() || rec.Epoch != epoch:
		return ErrWorkerDead
	}
	return nil
}

// ClassifyLeave explains a failed LEFT; nil when the record shows it applied.
func ClassifyLeave(rec *WorkerRecord, epoch int64) error {
	if rec != nil && rec.State == schema.WorkerLeft && rec.Epoch == epoch {
		return nil
	}
	if err := CanLeave(rec, epoch); err != nil {
		return err
	}
	return errConditionRaced
}

// EndedExpiresAt is the expires_at (epoch seconds, the table's TTL
// attribute) of a record that ended at atMs.
func EndedExpiresAt(atMs int64) int64 { return atMs/1000 + schema.EndedRecordTTLSeconds }

// MayMarkDone decides whether a GONE worker (DEAD or LEFT) may move to DONE,
// after which only the slow sweep of DONE records (Config.DoneSweepEvery)
// looks for its sessions: its by_owner query, sent at queriedAt, found owned
// sessions, and this keeper first received a read showing the worker not
// ALIVE at goneSeenAt; both instants are this keeper's monotonic clock.
//
// Every acquire the worker made passed its trust check before goneSeenAt:
// a worker sends an acquire (a retry included) only after checking that it
// still trusts its last heartbeat, that trust ends before any observer may
// declare it dead (the safety argument), and a leaving worker ends its trust
// before its LEFT write. The bound is an assumption about the store: a write
// is in its indexes within bound of that check (sent, applied, then
// propagated to the eventually consistent index). So a query sent bound
// after goneSeenAt answers with every session the worker can still own, and
// an empty answer then means none. An empty answer earlier proves nothing:
// the worker may have acquired just before it died.
func MayMarkDone(goneSeenAt, queriedAt time.Time, owned int, bound time.Duration) bool {
	return owned == 0 && !queriedAt.Before(goneSeenAt.Add(bound))
}

// GoneGraceHolds decides whether the reconciler still leaves a gone
// worker's sessions to that worker's takeover, known gone for known (this
// keeper's monotonic clock): for grace while the work queue brings starts
// (flowing: the takeover may still be listing what to announce), and for
// up to max while it brings announced tenures (announcing: starts that
// name the tenure a takeover or a leaver found, so the announcements of a
// mass death are still being taken). A takeover that ended early, or
// never began, leaves the queue quiet of announcements, and the grace ends
// with grace; max bounds what one that died while others announced costs.
func GoneGraceHolds(known, grace, max time.Duration, flowing, announcing bool) bool {
	return known < grace && flowing || known < max && announcing
}

// GoneListingDue decides whether a check of a worker, needed at need and
// not answered by what the Keeper remembers, waits for a listing of the
// GONE workers (the by_worker_list index), and how long before that
// listing may be sent, given when the last one was sent and that they are
// sent at most once per every. A listing sent at or after need already
// answered it (its answer missed the worker: the caller reads its record).
// Only a GONE entry is trusted, never an absence: an index lags, so an
// absent worker may be dead all the same, but an entry shows a record that
// left ALIVE, and a record never returns to it.
func GoneListingDue(need, lastSent, now time.Time, every time.Duration) (list bool, wait time.Duration) {
	if !lastSent.Before(need) {
		return false, 0
	}
	return true, max(0, lastSent.Add(every).Sub(now))
}

// HeartbeatQuiet reports whether rec's last heartbeat was sent more than
// half its TTL before nowMs, by the writer's and the reader's wall clocks:
// a worker likely dead and not yet declared (at an AZ's loss a third of
// any sample of the fleet, all silent since the same instant). Advisory
// only: whom to hand sessions to, never an ownership decision (wall
// clocks differ; a live worker taken for quiet just receives nothing
// this time).
func HeartbeatQuiet(rec WorkerRecord, nowMs int64) bool {
	return rec.TTL > 0 && rec.HeartbeatAtMs > 0 && nowMs-rec.HeartbeatAtMs > rec.TTL.Milliseconds()/2
}
