package simddb_test

import (
	"testing"

	"github.com/wsfleet/wsfleet/shared/lease/leasetest"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/simddb"
)

// The fleet summary's items on the simulated table: the contract, and
// their reads and writes billed under their own partition key values.
func TestSummaryConformance(t *testing.T) {
	s := newStore(t, simddb.Off())
	leasetest.RunSummary(t, s)
	m := s.Meter()
	for _, key := range []string{schema.SummaryKey, schema.MembersKey(0)} {
		rw, ok := m.Partitions[key]
		if !ok || rw.Read.Total <= 0 || rw.Write.Total <= 0 {
			t.Fatalf("%s billed %+v", key, rw)
		}
	}
}
