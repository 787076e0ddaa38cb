package memstore_test

import (
	"errors"
	"testing"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/leasetest"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
)

func TestConformance(t *testing.T) {
	s := memstore.New()
	leasetest.Run(t, func(t *testing.T) leasetest.Harness {
		return leasetest.Harness{
			Store: s,
			Put:   func(_ testing.TB, it lease.Item) { s.Put(it) },
			SetDesired: func(_ testing.TB, id, state string) {
				s.Update(id, func(it *lease.Item) { it.DesiredState = state })
			},
			Restart: func(_ testing.TB, id string) error {
				err := errors.New("condition failed: not FAILED")
				s.Update(id, func(it *lease.Item) {
					if it.Failed() {
						it.Generation, it.FailedGeneration, it.ExpiresAtMs, err = it.Generation+1, nil, 0, nil
					}
				})
				return err
			},
		}
	}, leasetest.Options{})
}
