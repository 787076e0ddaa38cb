package memstore

import (
	"context"
	"slices"

	"github.com/wsfleet/wsfleet/shared/lease"
)

// MembersPage is a fleet summary's membership page as stored.
type MembersPage struct {
	Version int64
	Writer  string
	IDs     []string
}

// fleetItems are the fleet summary's items: the head and the pages.
type fleetItems struct {
	head  *lease.Summary
	pages map[int]*MembersPage
}

func cloneSummary(s *lease.Summary) *lease.Summary {
	c := *s
	c.Peers, c.Moves = slices.Clone(s.Peers), slices.Clone(s.Moves)
	return &c
}

// GetSummary implements lease.SummaryStore.
func (s *Store) GetSummary(ctx context.Context) (lease.Summary, error) {
	var out lease.Summary
	err := s.do(ctx, "get_summary", func() error {
		if s.fleet.head == nil {
			return lease.ErrNoSummary
		}
		out = *cloneSummary(s.fleet.head)
		return nil
	})
	return out, err
}

// PutSummary implements lease.SummaryStore.
func (s *Store) PutSummary(ctx context.Context, sum lease.Summary) error {
	return s.do(ctx, "put_summary", func() error {
		if err := lease.CanPutSummary(s.fleet.head, sum.Version); err != nil {
			return err
		}
		s.fleet.head = cloneSummary(&sum)
		return nil
	})
}

// PutMembers implements lease.SummaryStore.
func (s *Store) PutMembers(ctx context.Context, n int, version int64, writer string, ids []string) error {
	return s.do(ctx, "put_members", func() error {
		p := s.fleet.pages[n]
		var stored int64
		if p != nil {
			stored = p.Version
		}
		if err := lease.CanPutMembers(p != nil, stored, version); err != nil {
			return err
		}
		if s.fleet.pages == nil {
			s.fleet.pages = map[int]*MembersPage{}
		}
		s.fleet.pages[n] = &MembersPage{Version: version, Writer: writer, IDs: slices.Clone(ids)}
		return nil
	})
}

// GetMembers implements lease.SummaryStore.
func (s *Store) GetMembers(ctx context.Context, n int) (int64, string, []string, error) {
	var p MembersPage
	err := s.do(ctx, "get_members", func() error {
		stored := s.fleet.pages[n]
		if stored == nil {
			return lease.ErrNoSummary
		}
		p = *stored
		p.IDs = slices.Clone(stored.IDs)
		return nil
	})
	return p.Version, p.Writer, p.IDs, err
}

// Summary is a copy of the stored summary head (nil: none).
func (s *Store) Summary() *lease.Summary {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fleet.head == nil {
		return nil
	}
	return cloneSummary(s.fleet.head)
}

// Members is a copy of membership page n (nil: none).
func (s *Store) Members(n int) *MembersPage {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.fleet.pages[n]
	if p == nil {
		return nil
	}
	return &MembersPage{Version: p.Version, Writer: p.Writer, IDs: slices.Clone(p.IDs)}
}

// RestoreSummary writes the head back as Summary returned it (nil: removed).
func (s *Store) RestoreSummary(sum *lease.Summary) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sum == nil {
		s.fleet.head = nil
		return
	}
	s.fleet.head = cloneSummary(sum)
}

// RestoreMembers writes page n back as Members returned it (nil: removed).
func (s *Store) RestoreMembers(n int, p *MembersPage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p == nil {
		delete(s.fleet.pages, n)
		return
	}
	if s.fleet.pages == nil {
		s.fleet.pages = map[int]*MembersPage{}
	}
	s.fleet.pages[n] = &MembersPage{Version: p.Version, Writer: p.Writer, IDs: slices.Clone(p.IDs)}
}

var _ lease.SummaryStore = (*Store)(nil)
