package memstore_test

import (
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
		}
	}, leasetest.Options{})
}
