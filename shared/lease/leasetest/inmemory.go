package leasetest

import (
	"errors"
	"slices"
	"testing"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// InMemory is a store whose items the harness writes directly, as ingest
// would (shared/lease/memstore, and testkit/simddb on top of it).
type InMemory interface {
	lease.Store
	Put(it lease.Item)
	Update(id string, f func(*lease.Item))
	UpdateWorker(id string, f func(*lease.WorkerRecord))
}

// InMemoryHarness is the conformance harness of an in-memory store: ingest's
// stop writes the item, then the owner's mailbox; a restart of a FAILED
// session moves its generation on.
func InMemoryHarness(s InMemory) Harness {
	return Harness{
		Store: s,
		Put:   func(_ testing.TB, it lease.Item) { s.Put(it) },
		SetDesired: func(_ testing.TB, id, state string) {
			var owner string
			s.Update(id, func(it *lease.Item) { it.DesiredState, owner = state, it.Owner })
			if state == schema.StateStopped && owner != "" {
				s.UpdateWorker(owner, func(r *lease.WorkerRecord) {
					if r.Alive() && !slices.Contains(r.Mailbox, id) {
						r.Mailbox = append(r.Mailbox, id)
					}
				})
			}
		},
		SetSpec: func(_ testing.TB, id, spec string) {
			s.Update(id, func(it *lease.Item) { it.Spec, it.Generation = spec, it.Generation+1 })
		},
		Restart: func(_ testing.TB, id string) error {
			err := errors.New("condition failed: not FAILED")
			s.Update(id, func(it *lease.Item) {
				if it.Failed() {
					it.Generation, it.FailedGeneration, err = it.Generation+1, nil, nil
				}
			})
			return err
		},
	}
}
