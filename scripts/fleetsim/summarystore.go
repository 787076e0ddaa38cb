//go:build fleetsim

package fleetsim

import (
	"context"

	"github.com/wsfleet/wsfleet/shared/lease"
)

// The fleet summary's items (lease.SummaryStore, issue 37) through the
// worker's view of the table: counted, and cut off with the rest.

var _ lease.SummaryStore = (*memberStore)(nil)

func (m *memberStore) GetSummary(ctx context.Context) (lease.Summary, error) {
	if err := m.gate(ctx, false); err != nil {
		return lease.Summary{}, err
	}
	return m.st.GetSummary(ctx)
}

func (m *memberStore) PutSummary(ctx context.Context, s lease.Summary) error {
	if err := m.gate(ctx, true); err != nil {
		return err
	}
	return m.st.PutSummary(ctx, s)
}

func (m *memberStore) PutMembers(ctx context.Context, n int, version int64, writer string, ids []string) error {
	if err := m.gate(ctx, true); err != nil {
		return err
	}
	return m.st.PutMembers(ctx, n, version, writer, ids)
}

func (m *memberStore) GetMembers(ctx context.Context, n int) (int64, string, []string, error) {
	if err := m.gate(ctx, false); err != nil {
		return 0, "", nil, err
	}
	return m.st.GetMembers(ctx, n)
}
