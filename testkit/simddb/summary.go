package simddb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/ddbrules"
)

// The fleet summary's items (lease.SummaryStore), billed as dynamostore
// sends them (its summary.go): a conditional PutItem of the whole item (a
// refused one at the stored item's size, which the failure returns: no
// classifying read), and an eventually consistent GetItem.

// fleetImage is the raw state of one fleet summary item: the head (page
// < 0) or membership page n.
type fleetImage struct {
	page   int
	s0, s1 *lease.Summary
	p0, p1 *memstore.MembersPage
}

func summaryImage() *image { return &image{key: schema.SummaryKey, fleet: &fleetImage{page: -1}} }
func membersImage(n int) *image {
	return &image{key: schema.MembersKey(n), fleet: &fleetImage{page: n}}
}

func (s *Store) snapFleet(im *image, after bool) {
	f := im.fleet
	var it ddbrules.Item
	if f.page < 0 {
		sum := s.mem.Summary()
		it = summaryItem(sum)
		if after {
			f.s1 = sum
		} else {
			f.s0 = sum
		}
	} else {
		p := s.mem.Members(f.page)
		it = membersItem(f.page, p)
		if after {
			f.p1 = p
		} else {
			f.p0 = p
		}
	}
	if after {
		im.after = it
	} else {
		im.before = it
	}
}

func (s *Store) restoreFleet(im *image) {
	if im.fleet.page < 0 {
		s.mem.RestoreSummary(im.fleet.s0)
		return
	}
	s.mem.RestoreMembers(im.fleet.page, im.fleet.p0)
}

func summaryItem(sum *lease.Summary) ddbrules.Item {
	if sum == nil {
		return nil
	}
	m, err := dynamostore.EncodeSummary(*sum)
	if err != nil {
		panic("simddb: encoding the fleet summary: " + err.Error())
	}
	return m
}

func membersItem(n int, p *memstore.MembersPage) ddbrules.Item {
	if p == nil {
		return nil
	}
	m, err := dynamostore.EncodeMembers(n, p.Version, p.Writer, p.IDs)
	if err != nil {
		panic("simddb: encoding a membership page: " + err.Error())
	}
	return m
}

// putFleet bills a conditional PutItem of a fleet item: the write, or the
// refused write at the stored item's size.
func (s *Store) putFleet(ctx context.Context, op string, im *image, apply func() error) error {
	return s.call(ctx, op, "PutItem", im.key, im, apply, func(p *plan, _ time.Time, err error) {
		if errors.Is(err, lease.ErrSummarySuperseded) {
			p.reqs = append(p.reqs, request{op: "PutItem", key: im.key, write: true, failed: true, units: ddbrules.WriteUnits(sizeOf(im.before))})
			return
		}
		p.write("PutItem", im.key, im.before, im.after)
	}, false)
}

// GetSummary implements lease.SummaryStore (an eventually consistent
// GetItem).
func (s *Store) GetSummary(ctx context.Context) (lease.Summary, error) {
	var out lease.Summary
	err := s.call(ctx, dynamostore.OpGetSummary, "GetItem", schema.SummaryKey, nil, func() (err error) {
		out, err = s.mem.GetSummary(ctx)
		return err
	}, func(p *plan, _ time.Time, _ error) {
		p.get(schema.SummaryKey, summaryItem(s.mem.Summary()), false)
	}, false)
	if err != nil {
		return lease.Summary{}, fmt.Errorf("get fleet summary: %w", err)
	}
	return out, nil
}

// PutSummary implements lease.SummaryStore.
func (s *Store) PutSummary(ctx context.Context, sum lease.Summary) error {
	if err := s.putFleet(ctx, dynamostore.OpPutSummary, summaryImage(), func() error { return s.mem.PutSummary(ctx, sum) }); err != nil {
		return fmt.Errorf("put fleet summary %d: %w", sum.Version, err)
	}
	return nil
}

// PutMembers implements lease.SummaryStore.
func (s *Store) PutMembers(ctx context.Context, n int, version int64, writer string, ids []string) error {
	if err := s.putFleet(ctx, dynamostore.OpPutMembers, membersImage(n), func() error { return s.mem.PutMembers(ctx, n, version, writer, ids) }); err != nil {
		return fmt.Errorf("put membership page %d: %w", n, err)
	}
	return nil
}

// GetMembers implements lease.SummaryStore (an eventually consistent
// GetItem).
func (s *Store) GetMembers(ctx context.Context, n int) (int64, string, []string, error) {
	var (
		version int64
		writer  string
		ids     []string
	)
	key := schema.MembersKey(n)
	err := s.call(ctx, dynamostore.OpGetMembers, "GetItem", key, nil, func() (err error) {
		version, writer, ids, err = s.mem.GetMembers(ctx, n)
		return err
	}, func(p *plan, _ time.Time, _ error) {
		p.get(key, membersItem(n, s.mem.Members(n)), false)
	}, false)
	if err != nil {
		return 0, "", nil, fmt.Errorf("get membership page %d: %w", n, err)
	}
	return version, writer, ids, nil
}

var _ lease.SummaryStore = (*Store)(nil)
