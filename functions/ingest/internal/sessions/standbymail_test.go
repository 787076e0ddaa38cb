package sessions_test

import (
	"slices"
	"testing"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/spec"
)

// A stop of a session with a hot standby puts the id in the standby's
// worker's mailbox as well as the owner's, so that the standby's
// connection closes at that worker's next heartbeat even when the owner
// does not tell it (a hand-off in flight, an owner cut off or dead); a
// repeated stop tells it again. A session without a standby writes no
// second mailbox.
func TestStopTellsTheStandbysWorker(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	ws := e.workers(t, ctx)
	ls, keeper := ws.ls, ws.keeper
	on := true
	d := desired("s1", "wss://a.example.com/")
	d.Spec.Standby = &spec.Standby{Enabled: &on}
	res, err := e.store.Start(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	wa, wb := keeper("wa"), keeper("wb")
	if _, err := wa.Acquire(ctx, "s1", nil); err != nil {
		t.Fatalf("wa acquires s1: %v", err)
	}
	if _, _, err := wb.AssignStandby(ctx, "s1", res.Generation, nil); err != nil {
		t.Fatalf("wb stands by for s1: %v", err)
	}
	mailbox := func(w string) []string {
		t.Helper()
		rec, err := ls.GetWorker(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		return rec.Mailbox
	}
	entry := func(gen int64) string { return schema.MailboxEntry("s1", gen, schema.StateStopped) }
	stopped, err := e.store.Stop(ctx, "s1")
	if err != nil || stopped.Owner != "wa" || !stopped.OwnerNotified || stopped.Standby != "wb" || !stopped.StandbyNotified || stopped.StandbyMailboxErr != nil {
		t.Fatalf("stop of wa's session with wb's standby: %+v %v", stopped, err)
	}
	if got := mailbox("wb"); !slices.Contains(got, entry(stopped.Generation)) {
		t.Fatalf("wb's mailbox %v, want the stop's entry %q", got, entry(stopped.Generation))
	}
	if got := mailbox("wa"); !slices.Contains(got, entry(stopped.Generation)) {
		t.Fatalf("wa's mailbox %v, want the stop's entry", got)
	}
	again, err := e.store.Stop(ctx, "s1")
	if err != nil || !again.StandbyNotified || again.Standby != "wb" {
		t.Fatalf("repeated stop: %+v %v", again, err)
	}

	// Without a standby: no standby named, nothing more written.
	if _, err := e.store.Start(ctx, desired("s2", "wss://b.example.com/")); err != nil {
		t.Fatal(err)
	}
	if _, err := wa.Acquire(ctx, "s2", nil); err != nil {
		t.Fatal(err)
	}
	if plain, err := e.store.Stop(ctx, "s2"); err != nil || plain.Standby != "" || plain.StandbyNotified {
		t.Fatalf("stop of a session without a standby: %+v %v", plain, err)
	}
	if got := mailbox("wb"); len(got) != 1 {
		t.Fatalf("wb's mailbox %v after a stop of a session it does not stand by for, want only s1's entry", got)
	}
}
