package streamer

import (
	"regexp"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/source"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/shared/spec/spectest"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
)

// Issue 35 finding 1: a message the destination fails each time, the same
// way (a transient code), while it takes the others, can not hold its
// session in a replay loop. Its owner crashes while retrying it; the next
// owner re-claims the session, replays from the checkpoint into the same
// message, and, after RepeatFailures, moves past it under its
// on_sink_refusal (skip): the checkpoint passes it, later messages flow,
// and the destination never got it. (Before, every owner retried it for
// as long as its tenure lasted and the checkpoint never passed it.)
func TestPoisonedMessageReplayedAfterACrashIsRefused(t *testing.T) {
	e := newEnv(t)
	const poisoned = 100 // after the first owner's first checkpoint (50 messages/s)
	dest := &destination{rec: e.sink, latency: 10 * time.Millisecond, refused: map[string]bool{}, poisoned: poisoned}
	e.handlerFor = func(string) sink.Handler {
		cfg := batch.DefaultConfig()
		cfg.RequestTimeout = testConfig("x").SafetyMargin / 2
		b, err := batch.New(dest, cfg, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a := e.worker(nil)
	id := e.session(func(it *lease.Item) {
		spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.OnSinkRefusal = source.RefusalSkip })
	})
	e.notify(schema.NotifyStart, id)
	testwait.Eventually(t, 10*time.Second, "a retrying the poisoned message", func() bool { return dest.poisonFailures() >= 2 })
	b := e.worker(nil)
	a.kill() // before its bound: the message is neither delivered nor refused
	failsByA := dest.poisonFailures()
	if ckpt := e.item(id).LastSeq; ckpt >= poisoned {
		t.Fatalf("checkpoint %d passed the poisoned message %d before it was refused", ckpt, poisoned)
	}
	testwait.Eventually(t, testTTL+testHeartbeat/2+slack+15*time.Second, "b past the poisoned message, checkpointed", func() bool {
		return e.owner(id) == b && e.item(id).LastSeq > poisoned+20
	})
	if n := dest.poisonFailures() - failsByA; n < batch.DefaultConfig().RepeatFailures {
		t.Fatalf("b refused the message after %d failures, want RepeatFailures = %d", n, batch.DefaultConfig().RepeatFailures)
	}
	for _, d := range e.sink.get(id) {
		if d.seq == poisoned {
			t.Fatalf("the poisoned message reached the destination (worker %s)", d.worker)
		}
	}
	if seqs := seqSet(byWorker(e.sink.get(id), b.ID())); !seqs[poisoned+1] || !seqs[poisoned+20] {
		t.Fatal("b did not deliver the messages after the poisoned one")
	}
	if !regexp.MustCompile(`"worker_id":"` + b.ID() + `".*"error":"refused: failed the same way.*"seq":100,.*"sink refused the message permanently: skipped"`).MatchString(e.logs.String()) {
		t.Fatal("the skip of the poisoned message is not logged with its seq")
	}
}
