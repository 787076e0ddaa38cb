package lease

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// The rules below are the whole protocol. Stores express the Can* rules as
// write conditions and use the Classify* rules on a consistent read after a
// condition failed; memstore evaluates the Can* rules directly.

// errConditionRaced is returned when a condition failed but the item read
// afterwards satisfies it: the item changed in between. It is transient.
var errConditionRaced = errors.New("condition failed but the item now satisfies it")

// errSuperseded: a heartbeat's counter was not above the stored one (a later
// attempt was applied first). Transient: the next heartbeat carries a new one.
var errSuperseded = errors.New("heartbeat superseded by a later one")

// --- Liveness ---

// TrustedUntil is the monotonic instant after which a worker must no longer
// act as owner of any session, when its last successful heartbeat was sent
// at sentAt (its monotonic clock).
func TrustedUntil(sentAt time.Time, ttl, margin time.Duration) time.Time {
	return sentAt.Add(ttl - margin)
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

// --- Sessions ---

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
	return it.StandbyEpoch == s.Epoch && (it.Standby == owner || (it.Standby == "" && it.Owner == owner))
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

// CanFenceCheckpoint decides the acquire's second write, on the checkpoint
// item of session t.ConnectionID (ckptOwner and ckptEpoch as stored, epoch 0
// when there is none): no later tenure may have fenced it.
func CanFenceCheckpoint(ckptOwner string, ckptEpoch int64, t Token) error {
	if ckptEpoch < t.Epoch || (ckptEpoch == t.Epoch && ckptOwner == t.Owner) {
		return nil
	}
	return ErrLeaseLost
}

// CanCheckpoint decides a checkpoint by t of lastSeq on a checkpoint item
// fenced by (ckptOwner, ckptEpoch) holding stored (NoSeq: none).
func CanCheckpoint(ckptOwner string, ckptEpoch, stored int64, t Token, lastSeq int64) error {
	switch {
	case ckptOwner != t.Owner || ckptEpoch != t.Epoch:
		return ErrLeaseLost
	case stored > lastSeq:
		return ErrSeqRegress
	}
	return nil
}

// ResumeSeq is where a new tenure resumes: after the larger of the
// checkpoint item's last_seq and the session item's release_seq (NoSeq, the
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

// --- Hot standby ---

// MaxStandbyError bounds standby_error in bytes, as the worker bounds
// last_error: a short reason, never a URL, a header or a message.
const MaxStandbyError = 256

// StandbyReason is reason as standby_error records it: at most
// MaxStandbyError bytes, cut at a rune boundary.
func StandbyReason(reason string) string {
	if len(reason) <= MaxStandbyError {
		return reason
	}
	return strings.ToValidUTF8(reason[:MaxStandbyError], "")
}

// CanAssignStandby decides an assignment of worker as the standby of the
// session it at generation gen, replacing prev (nil: none) if that is the
// current standby: the session must be STARTED, not FAILED, at gen, owned
// by another worker, not refused a standby at gen, and without another
// standby than worker's or prev's.
func CanAssignStandby(it *Item, worker string, gen int64, prev *StandbyToken) error {
	switch {
	case it == nil:
		return ErrNotFound
	case it.DesiredState != schema.StateStarted:
		return ErrStopped
	case it.Failed():
		return ErrFailed
	case it.Generation != gen:
		return ErrNewGeneration
	case it.Owner == "":
		return ErrNoOwner
	case it.Owner == worker:
		return ErrOwnStandby
	case it.StandbyRefusedGen == gen:
		return ErrStandbyRefused
	case it.Standby == "" || it.Standby == worker:
	case prev != nil && it.Standby == prev.Worker && it.StandbyEpoch == prev.Epoch:
	default:
		return &StandbyHeldError{Standby: standbyOf(it)}
	}
	return nil
}

// ClassifyAssignStandby explains a failed assignment's condition from the
// item read after it.
func ClassifyAssignStandby(it *Item, worker string, gen int64, prev *StandbyToken) error {
	if err := CanAssignStandby(it, worker, gen, prev); err != nil {
		return err
	}
	return errConditionRaced
}

// CanDropStandby decides a drop of standby t: it must still be the
// session's standby (else ErrStandbyLost, which the dropper treats as
// done: a retry of a drop that applied finds this too).
func CanDropStandby(it *Item, t StandbyToken) error {
	switch {
	case it == nil:
		return ErrNotFound
	case it.Standby != t.Worker || it.StandbyEpoch != t.Epoch:
		return ErrStandbyLost
	}
	return nil
}

// ClassifyDropStandby explains a failed drop's condition.
func ClassifyDropStandby(it *Item, t StandbyToken) error {
	if err := CanDropStandby(it, t); err != nil {
		return err
	}
	return errConditionRaced
}

// --- Gone workers ---

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

// --- Watching ---

// Watchers ranks the workers that watch target among alive (rendezvous
// hashing: every worker computes the same answer from the same list) and
// returns the first n, never target itself.
func Watchers(target string, alive []string, n int) []string {
	// The first n by (score desc, id asc), kept in order as alive is
	// scanned once: O(len(alive) × n), not a sort of every worker (a
	// Keeper asks for every alive worker's watchers at each refresh).
	top := make([]ranked, 0, n)
	for _, w := range alive {
		if w == target {
			continue
		}
		r := ranked{w, rendezvous(target, w)}
		i := len(top)
		for i > 0 && r.before(top[i-1]) {
			i--
		}
		if i >= n {
			continue
		}
		if len(top) < n {
			top = append(top, ranked{})
		}
		copy(top[i+1:], top[i:])
		top[i] = r
	}
	out := make([]string, len(top))
	for i, r := range top {
		out[i] = r.id
	}
	return out
}

// OrphanClaimers is how many workers try an unowned session on their
// reconcile listing's first sight of it past Config.UnownedGrace
// (MayClaimUnowned).
const OrphanClaimers = 2

// MayClaimUnowned says whether self tries to acquire unowned session id
// that its reconcile listing (by_unowned) shows, past Config.UnownedGrace
// (a session within it is left to the work queue's fast path: Keeper.MayClaim):
// on that listing's first sight of it only when self ranks among the first
// OrphanClaimers of alive by rendezvous hashing of id (as Watchers ranks
// watchers; self counted when alive misses it, and alone when alive is
// empty); when an earlier listing of self showed it unowned past the grace
// too (relisted), always.
//
// Why: a session just started is claimed by the work queue's fast path
// (its start notification), while every worker's reconcile pass lists the
// same fresh entries of by_unowned; before this rule each pass tried them
// all, so the more workers the more claims lost each start (each a refused
// conditional write, its classifying read and a read of the holder's
// record: 16 acquires a session at 1,000 workers in the fleet simulator,
// 2.3 at 100). Now at most OrphanClaimers passes race the fast path on a
// session's first sighting, whatever the fleet's size; and with
// UnownedGrace set none does within it, which leaves a fresh start to its
// notification (with 2 workers both rank within OrphanClaimers, and their
// passes raced every start listed a moment before its fast-path acquire).
// Liveness: an orphan
// whose notification was lost is tried by its first OrphanClaimers
// workers' next passes, and, when they are full, gone or not listing it,
// by any worker on its next listing that shows it again: one reconcile
// pass later than before at most. Safety is the acquire's condition,
// unchanged: this only chooses which workers ask.
func MayClaimUnowned(id, self string, alive []string, relisted bool) bool {
	return relisted || ranksWithin(id, self, alive, OrphanClaimers)
}

// ranked is a watcher's rendezvous score for one target.
type ranked struct {
	id    string
	score uint64
}

// before: a ranks above b (the higher score; on a tie the smaller id).
func (a ranked) before(b ranked) bool {
	return a.score > b.score || (a.score == b.score && a.id < b.id)
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

// AliveView is the alive workers as self counts them for watching: the ALIVE
// list as listed (by_worker_list, an index that lags on DynamoDB), with self
// added (a worker that has just registered is missing from the list until
// the index shows it, and without itself in the list it would watch
// nobody until the next refresh) and without the workers self knows are
// gone (one just declared dead is still listed; as a watcher of others it
// would take a slot that a live worker should have). Found on the DynamoDB
// model: a worker three seconds old watched nobody when the only other
// worker froze, and the takeover came a refresh late.
func AliveView(self string, listed []string, gone func(string) bool) []string {
	out := make([]string, 0, len(listed)+1)
	for _, id := range listed {
		if id == self || !gone(id) {
			out = append(out, id)
		}
	}
	if !slices.Contains(out, self) {
		out = append(out, self)
	}
	return out
}

// Targets are the workers among alive that self watches.
//
// The answer is Watchers' (t is a target when self is among
// Watchers(t, alive, n)), found without ranking everyone for every t: for
// each t, alive is scanned until n workers rank above self. Self's rank
// for t is uniform, so that takes about n × ln(len(alive)) scores a target
// on average instead of a sort of alive: a 1,000-worker fleet's refresh
// costs each worker ~15,000 scores, not 1,000 sorts of 1,000 (the fleet
// simulator's CPU went there).
func Targets(self string, alive []string, n int) []string {
	if !slices.Contains(alive, self) {
		return nil // nobody's watcher: Watchers ranks only alive
	}
	var out []string
	for _, t := range alive {
		if t != self && ranksWithin(t, self, alive, n) {
			out = append(out, t)
		}
	}
	return out
}

// ranksWithin: self is among target's first n watchers in alive.
func ranksWithin(target, self string, alive []string, n int) bool {
	me := ranked{self, rendezvous(target, self)}
	above := 0
	for _, w := range alive {
		if w == target || w == self {
			continue
		}
		if (ranked{w, rendezvous(target, w)}).before(me) {
			if above++; above >= n {
				return false
			}
		}
	}
	return n > 0
}

// rendezvous is FNV-1a 64 of target, a separator and watcher, mixed.
func rendezvous(target, watcher string) uint64 {
	h := uint64(14695981039346656037)
	for _, s := range []string{target, "\x00", watcher} {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= 1099511628211
		}
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}
