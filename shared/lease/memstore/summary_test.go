package memstore_test

import (
	"testing"

	"github.com/wsfleet/wsfleet/shared/lease/leasetest"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
)

func TestSummaryConformance(t *testing.T) { leasetest.RunSummary(t, memstore.New()) }
