package dynamostore_test

import (
	"testing"

	"github.com/wsfleet/wsfleet/shared/lease/leasetest"
)

// TestSummaryConformance holds the fleet summary's items on dynalite, through
// the SDK, to the contract memstore keeps.
func TestSummaryConformance(t *testing.T) {
	client, table := newTable(t)
	leasetest.RunSummary(t, harness(client, table).Store)
}
