package lease

// The session rules: acquire (takeover, given tenure, promotion), the
// owner's writes (checkpoint, release, fail, disown) and their
// classification, and the checkpoints' pacing under throttling.

import (
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// CanAcquire decides an acquire by owner, taking over what from allows, of
// the item it (nil: no item).
func CanAcquire(it *Item, owner string, from From) error {
	switch {
	case it == nil:
		return ErrNotFound
	case it.DesiredState != schema.StateStarted:
		return ErrStopped
	case it.Failed():
		return ErrFailed
	case it.Owner == "" || it.Owner == owner:
	case from.Prev != nil && it.Owner == from.Prev.Owner && it.Epoch == from.Prev.Epoch:
	case from.Given != nil && it.Owner == from.Given.Token.Owner && it.Epoch == from.Given.Token.Epoch &&
		it.TenureKey != "" && it.TenureKey == TenureKeyOf(from.Given.Secret):
	default:
		return &HeldError{Current: Token{ConnectionID: it.ConnectionID, Owner: it.Owner, Epoch: it.Epoch}}
	}
	if it.HandoffTo != "" && it.HandoffTo != owner && it.HandoffTo != from.Bypass {
		return &ReservedError{To: it.HandoffTo, AtMs: it.HandoffAtMs}
	}
	if s := from.Standby; s != nil && !promotable(it, owner, *s) {
		return ErrStandbyLost // the promotion's standby is gone: an ordinary acquire, or none
	}
	if takeover(it, owner) && from.Given == nil && it.Standby != "" && it.Standby != owner && it.Standby != from.StandbyGone {
		return &StandbyHeldError{Standby: standbyOf(it)}
	}
	if g := from.Given; g != nil && g.Seq != NoSeq && it.ReleaseSeq > g.Seq {
		return ErrSeqRegress
	}
	return nil
}

// GivenSeq is the release_seq an acquire with from records (NoSeq: none,
// the stored one stays): a given tenure's final checkpoint.
func GivenSeq(from From) int64 {
	if from.Given == nil {
		return NoSeq
	}
	return from.Given.Seq
}

// promotable reports whether an acquire by owner may be the promotion of
// its standby s: s is still the session's standby, or the session is
// owner's already with no standby at s's epoch (the promotion applied, its
// reply lost, and retried: only s's worker moves standby_epoch, and no
// acquire does).
func promotable(it *Item, owner string, s StandbyToken) bool {
	return it.StandbyEpoch == s.Epoch && it.Standby == owner || owner == s.Worker && PromotionApplied(it, s)
}

// PromotionApplied reports whether it shows standby s promoted: s's
// worker owns the session and no standby is named at s's epoch (only s's
// worker moves standby_epoch, and only its own acquire removes it while
// making it the owner). A read made while that acquire's reply is still
// on its way shows it too.
func PromotionApplied(it *Item, s StandbyToken) bool {
	return it.Owner == s.Worker && it.Standby == "" && it.StandbyEpoch == s.Epoch
}

// takeover reports whether an acquire by owner of it takes the session
// from another owner (as opposed to an unowned session, a hand-off's
// included, or one already owner's). A given tenure's acquire is one too,
// but its owner chose the receiver: the session's standby stays (as across
// a release and an acquire) unless the receiver is that standby.
func takeover(it *Item, owner string) bool { return it.Owner != "" && it.Owner != owner }

// standbyOf is it's current standby assignment.
func standbyOf(it *Item) StandbyToken {
	return StandbyToken{ConnectionID: it.ConnectionID, Worker: it.Standby, Epoch: it.StandbyEpoch}
}

// AcquireDropsStandby reports whether an acquire by owner with from, which
// CanAcquire allows on it, removes the session's standby: the acquirer is
// the standby (a worker is never its own session's standby: its
// promotion), or the acquire takes the session over from another owner
// and the standby is from.StandbyGone, a worker the acquirer saw not
// alive. Any other standby stays: an unowned session's (a hand-off's
// included) stands by for the new owner.
func AcquireDropsStandby(it *Item, owner string, from From) bool {
	return it.Standby != "" && (it.Standby == owner || (takeover(it, owner) && it.Standby == from.StandbyGone))
}

// ClassifyAcquire explains why an acquire's condition failed, given the item
// read after it.
func ClassifyAcquire(it *Item, owner string, from From) error {
	if err := CanAcquire(it, owner, from); err != nil {
		return err
	}
	return errConditionRaced
}

// AcquiredUnawares reports whether a failed acquire by owner finds the
// session it (read after the failure) owned by owner all the same: an
// earlier attempt of the same acquire was applied, its reply lost, and a
// stop (or a failure) landed before the retry, whose condition then failed.
// The caller is told the acquire failed, so the store ends that tenure.
func AcquiredUnawares(it *Item, owner string) bool {
	return it != nil && it.Owner == owner && CanAcquire(it, owner, From{}) != nil
}

// CanCheckpoint decides a checkpoint by t of lastSeq on a session item
// owned by (owner, epoch) whose last_seq is stored (NoSeq: none): the
// checkpoint shares the item with the tenure, so every acquire fences it
// (its epoch) in the same write, and a deposed owner's checkpoint fails.
func CanCheckpoint(owner string, epoch, stored int64, t Token, lastSeq int64) error {
	switch {
	case owner != t.Owner || epoch != t.Epoch:
		return ErrLeaseLost
	case stored > lastSeq:
		return ErrSeqRegress
	}
	return nil
}

// ResumeSeq is where a new tenure resumes: after the larger of the
// session's last_seq and its release_seq (NoSeq, the
// smallest, when a side has none). Every tenure starts from it, so a release
// never records less than any checkpoint before it, and a checkpoint
// written after a release (by a tenure that took over) never less than it.
func ResumeSeq(checkpointed, released int64) int64 { return max(checkpointed, released) }

// CanRelease decides a release (or fail) by t that records lastSeq as the
// session's release_seq: t's tenure, and never below a release_seq stored.
func CanRelease(it *Item, t Token, lastSeq int64) error {
	if err := CanOwnerWrite(it, t); err != nil {
		return err
	}
	if lastSeq != NoSeq && it.ReleaseSeq > lastSeq {
		return ErrSeqRegress
	}
	return nil
}

// Released reports whether session it shows t's tenure already ended with
// a final checkpoint of at least lastSeq, and, for a hand-off to worker to
// ("" for a release) of a STARTED session, reserved for to: no owner, at
// t's epoch (only t's own release, hand-off or fail removes the owner
// without a new epoch). A release retried after an attempt that was
// applied, its reply lost, finds this, and is done.
func Released(it *Item, t Token, lastSeq int64, to string) bool {
	return it != nil && it.Owner == "" && it.Epoch == t.Epoch && (lastSeq == NoSeq || it.ReleaseSeq >= lastSeq) &&
		(to == "" || it.HandoffTo == to || it.DesiredState != schema.StateStarted || it.Failed())
}

// FailedAs reports whether session it shows t's Fail of generation gen
// with reason at atMs already written: no owner at t's epoch, that error
// and time, FAILED at gen unless a stop landed (StopWinsOverFailed), and a
// release_seq of at least lastSeq. A Fail retried after an attempt that was
// applied, its reply lost, finds this, and is done.
func FailedAs(it *Item, t Token, gen, lastSeq int64, reason string, atMs int64) bool {
	return Released(it, t, lastSeq, "") && it.LastError == reason && it.LastErrorAtMs == atMs &&
		((it.FailedGeneration != nil && *it.FailedGeneration == gen) || it.DesiredState != schema.StateStarted)
}

// CanOwnerWrite decides a write by t on the session item (release, fail,
// note error): the session must still be t's tenure.
func CanOwnerWrite(it *Item, t Token) error {
	switch {
	case it == nil:
		return ErrNotFound
	case it.Owner != t.Owner || it.Epoch != t.Epoch:
		return ErrLeaseLost
	}
	return nil
}

// CanDisown decides a Disown of t's tenure by a worker that saw t.Owner
// not alive: the session must still be t's tenure, and not STARTED (a
// start landed since: its owner is taken over, Acquire from t, not
// cleared). A STARTED one fails with a *HeldError naming t, the tenure to
// take over.
func CanDisown(it *Item, t Token) error {
	if err := CanOwnerWrite(it, t); err != nil {
		return err
	}
	if it.DesiredState == schema.StateStarted {
		return &HeldError{Current: t}
	}
	return nil
}

// Disowned reports whether session it shows t's tenure already ended
// without a new one (no owner at t's epoch): a Disown retried after an
// attempt that was applied, its reply lost, finds this (or the tenure's own
// release), and is done.
func Disowned(it *Item, t Token) bool {
	return it != nil && it.Owner == "" && it.Epoch == t.Epoch
}

// CanFail decides a Fail by t of the configuration at generation gen,
// recording lastSeq as release_seq.
func CanFail(it *Item, t Token, gen, lastSeq int64) error {
	if err := CanRelease(it, t, lastSeq); err != nil {
		return err
	}
	if it.Generation != gen {
		return ErrNewGeneration
	}
	return nil
}

// ClassifyOwnerWrite explains a failed owner write; check is the write's
// rule.
func ClassifyOwnerWrite(it *Item, check func(*Item) error) error {
	if err := check(it); err != nil {
		return err
	}
	return errConditionRaced
}

// CheckpointHoldMax is the longest a worker's periodic checkpoints yield to
// a throttling store, in checkpoint intervals (CheckpointHold): at most this
// many intervals' more replay after a crash in a throttling storm.
const CheckpointHoldMax = 4

// CheckpointHold is how long periodic checkpoints yield after another
// throttled one, prev the yield before (0: none): one checkpoint interval,
// then twice the last, up to CheckpointHoldMax intervals.
func CheckpointHold(prev, every time.Duration) time.Duration {
	return min(max(2*prev, every), CheckpointHoldMax*every)
}

// FirstCheckpointRetryMax is the longest a session that has no checkpoint
// waits to retry a throttled checkpoint, in RetryEvery (FirstCheckpointRetry).
const FirstCheckpointRetryMax = 8

// FirstCheckpointRetry is how long a session that has no checkpoint yet
// waits after its n-th throttled checkpoint in a row (n ≥ 1): retry
// (RetryEvery), then twice the last, up to FirstCheckpointRetryMax × retry
// (4 s at the defaults). Such a session does not yield to CheckpointHold: a
// new owner of it cannot ask its source to resume, so a crash before its
// first checkpoint loses what the source sends until that owner dials
// (found by the fleet simulator, crash-throttled), where a later checkpoint
// only bounds a replay. Its cost is one write per session lifetime.
func FirstCheckpointRetry(n int, retry time.Duration) time.Duration {
	d := retry
	for i := 1; i < n && d < FirstCheckpointRetryMax*retry; i++ {
		d *= 2
	}
	return min(d, FirstCheckpointRetryMax*retry)
}
