package memstore_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/leasetest"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/schema"
)

func TestConformance(t *testing.T) {
	s := memstore.New()
	leasetest.Run(t, func(t *testing.T) leasetest.Harness {
		return leasetest.Harness{
			Store: s,
			Put:   func(_ testing.TB, it lease.Item) { s.Put(it) },
			SetDesired: func(_ testing.TB, id, state string) {
				// Ingest's stop: the item, then the owner's mailbox.
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
	}, leasetest.Options{RaceRounds: 200, Racers: 64})
}
