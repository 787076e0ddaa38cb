package simddb

import (
	"strings"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
	"github.com/wsfleet/wsfleet/testkit/ddbrules"
)

// The items as the table holds them: what the memory store keeps, encoded
// with the schema's own encoders (sessionitem), so that their sizes, index
// entries and units are those of the items dynamostore writes. An attribute
// DynamoDB keeps at a zero value where the encoder omits it (a heartbeat's
// draining = false, say) is absent here: a size can differ by a few bytes,
// a unit only at a 1 KB boundary.

// bootIDPlaceholder stands for the boot id dynamostore draws (rand.Text:
// 26 characters) when a registration carries none.
var bootIDPlaceholder = strings.Repeat("B", 26)

// sessionItem is session it's item (nil: absent), it as the memory store
// keeps it (memstore.Store.Session: LastSeq the checkpoint).
func sessionItem(it *lease.Item) ddbrules.Item {
	if it == nil {
		return nil
	}
	gen := it.Generation
	r := sessionitem.Item{
		ConnectionID: it.ConnectionID, DesiredState: it.DesiredState, SpecRef: dynamostore.SpecRef(*it),
		Generation: &gen, CheckpointEveryMs: it.CheckpointEvery.Milliseconds(), LeaseOwner: it.Owner, LeaseEpoch: it.Epoch,
		HandoffTo: it.HandoffTo, HandoffAtMs: it.HandoffAtMs,
		UpdatedAtMs: it.UpdatedAtMs, FailedGeneration: it.FailedGeneration, LastError: it.LastError, LastErrorAtMs: it.LastErrorAtMs,
		LastErrorGen: it.LastErrorGen, LastErrorEpoch: it.LastErrorEpoch,
		Standby: it.Standby, StandbyEpoch: it.StandbyEpoch, StandbyRefusedGen: it.StandbyRefusedGen, StandbyError: it.StandbyError,
		TenureKey: it.TenureKey,
	}
	if it.DesiredState != "" {
		r.IndexShard = schema.IndexShardFor(it.DesiredState, it.ConnectionID)
	}
	if it.DesiredState == schema.StateStarted && it.Owner == "" && !it.Failed() {
		r.UnownedShard = schema.UnownedShardOf(it.ConnectionID)
	}
	if it.ReleaseSeq != lease.NoSeq {
		seq := it.ReleaseSeq
		r.ReleaseSeq = &seq
	}
	if it.LastSeq != lease.NoSeq { // as the memory store keeps it: the checkpoint
		seq := it.LastSeq
		r.LastSeq = &seq
	}
	m, err := sessionitem.Encode(r)
	if err != nil {
		panic("simddb: encoding a session item: " + err.Error()) // plain fields: cannot fail
	}
	return m
}

// specItem is session it's spec item and its key (nil, "": it has no
// Spec). The session item names it (sessionItem: spec_ref), as ingest
// writes them.
func specItem(it *lease.Item) (ddbrules.Item, string) {
	if it == nil || it.Spec == "" {
		return nil, ""
	}
	m, err := dynamostore.EncodeSpec(*it)
	if err != nil {
		panic("simddb: encoding a spec item: " + err.Error())
	}
	return m, schema.SpecKey(it.ConnectionID, dynamostore.SpecRef(*it))
}

// workerItem is worker record r's item (nil: absent), as Register and the
// later writes leave it.
func workerItem(r *lease.WorkerRecord) ddbrules.Item {
	if r == nil {
		return nil
	}
	w := sessionitem.Worker{
		Key: schema.WorkerKey(r.ID), State: r.State, Epoch: r.Epoch, HeartbeatSeq: r.HeartbeatSeq, HeartbeatAt: r.HeartbeatAtMs,
		TTLMs: r.TTL.Milliseconds(), Load: r.Load, Capacity: r.Capacity, AdminAddr: r.AdminAddr, Draining: r.Draining,
		MovesPerMin: r.MovesPerMin, Mailbox: r.Mailbox, List: r.List, StartedAtMs: r.StartedAtMs, EndedAtMs: r.EndedAtMs,
		DeclaredBy: r.DeclaredBy, BootID: r.BootID, Host: r.Host, Pid: r.Pid, Zone: r.Zone,
	}
	if w.State == "" {
		w.State = schema.WorkerAlive
	}
	if w.List == "" {
		w.List = schema.WorkerListAlive
	}
	if w.BootID == "" {
		w.BootID = bootIDPlaceholder
	}
	if r.EndedAtMs != 0 && r.State != schema.WorkerAlive {
		w.ExpiresAt = lease.EndedExpiresAt(r.EndedAtMs)
	}
	m, err := sessionitem.EncodeWorker(w)
	if err != nil {
		panic("simddb: encoding a worker record: " + err.Error())
	}
	return m
}
