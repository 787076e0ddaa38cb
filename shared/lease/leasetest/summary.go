package leasetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/wsfleet/wsfleet/shared/lease"
)

// RunSummary holds a store's fleet summary items (lease.SummaryStore) to
// their contract: a head never goes backwards (written only over a lower
// version), a membership page only over a version not above its own, both
// read back whole, and the largest head and page the Keeper writes fit in
// an item. The store may hold a summary already (a table shared with Run):
// the cases count from its version.
func RunSummary(t *testing.T, store lease.Store) {
	ss, ok := store.(lease.SummaryStore)
	if !ok {
		t.Fatalf("%T does not keep a fleet summary (lease.SummaryStore)", store)
	}
	ctx := context.Background()
	base := int64(0)
	switch cur, err := ss.GetSummary(ctx); {
	case err == nil:
		base = cur.Version
	case !errors.Is(err, lease.ErrNoSummary):
		t.Fatal(err)
	}

	t.Run("HeadNeverGoesBackwards", func(t *testing.T) {
		s := lease.Summary{
			Version: base + 1, Writer: "w-a", AtMs: 1700000000000, Alive: 3, Load: 30, Capacity: 3000, Imbalance: 1.5,
			Members: base + 1, MembersBy: "w-a", Pages: 1,
			Peers: []lease.SummaryPeer{{ID: "w-b", AdminAddr: "10.0.0.2:8081", Load: 5, Capacity: 1000}},
			Moves: []lease.SummaryMove{{From: "w-a", To: "w-b", Count: 4}},
		}
		if err := ss.PutSummary(ctx, s); err != nil {
			t.Fatal(err)
		}
		got, err := ss.GetSummary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(s) {
			t.Fatalf("read back %+v, wrote %+v", got, s)
		}
		for _, v := range []int64{base + 1, base} {
			older := s
			older.Version, older.Writer = v, "w-late"
			if err := ss.PutSummary(ctx, older); !errors.Is(err, lease.ErrSummarySuperseded) {
				t.Fatalf("head at version %d over %d: %v, want ErrSummarySuperseded", v, base+1, err)
			}
		}
		if got, _ := ss.GetSummary(ctx); got.Writer != "w-a" {
			t.Fatalf("a refused head changed the stored one: %+v", got)
		}
		s.Version, s.Writer, s.Peers, s.Moves = base+2, "w-b", nil, nil
		if err := ss.PutSummary(ctx, s); err != nil {
			t.Fatalf("a higher version: %v", err)
		}
		if got, _ := ss.GetSummary(ctx); got.Version != base+2 || len(got.Moves) != 0 || len(got.Peers) != 0 {
			t.Fatalf("read back %+v", got)
		}
	})

	t.Run("MembershipPages", func(t *testing.T) {
		v := base + 10
		ids := []string{"w-a", "w-b", "w-c"}
		if err := ss.PutMembers(ctx, 0, v, "w-a", ids); err != nil {
			t.Fatal(err)
		}
		gv, by, got, err := ss.GetMembers(ctx, 0)
		if err != nil || gv != v || by != "w-a" || !slices.Equal(sorted(got), ids) {
			t.Fatalf("page 0: %d %s %v %v", gv, by, got, err)
		}
		// Two writers of one version (both read the same head) may both
		// write their pages; the head names the one whose pages count.
		if err := ss.PutMembers(ctx, 0, v, "w-b", ids[:2]); err != nil {
			t.Fatalf("same version, another writer: %v", err)
		}
		if err := ss.PutMembers(ctx, 0, v-1, "w-c", ids); !errors.Is(err, lease.ErrSummarySuperseded) {
			t.Fatalf("an older page: %v, want ErrSummarySuperseded", err)
		}
		if _, by, got, _ := ss.GetMembers(ctx, 0); by != "w-b" || len(got) != 2 {
			t.Fatalf("page 0 after a refused write: %s %v", by, got)
		}
		if err := ss.PutMembers(ctx, 1, v, "w-a", nil); err != nil {
			t.Fatalf("an empty page: %v", err)
		}
		if gv, _, got, err := ss.GetMembers(ctx, 1); err != nil || gv != v || len(got) != 0 {
			t.Fatalf("empty page: %d %v %v", gv, got, err)
		}
		if _, _, _, err := ss.GetMembers(ctx, 999); !errors.Is(err, lease.ErrNoSummary) {
			t.Fatalf("a missing page: %v, want ErrNoSummary", err)
		}
	})

	t.Run("LargestHeadAndPageFit", func(t *testing.T) {
		id := func(i int) string { return fmt.Sprintf("%s-%05d", strings.Repeat("w", 57), i) } // 64 bytes
		s := lease.Summary{Version: base + 100, Writer: id(0), Members: base + 100, MembersBy: id(0), Pages: 1}
		for i := range lease.MaxSummaryMoves {
			s.Moves = append(s.Moves, lease.SummaryMove{From: id(i), To: id(i + 1), Count: 1000})
		}
		for i := range lease.MaxSummaryPeers + lease.MaxSummaryMoves {
			s.Peers = append(s.Peers, lease.SummaryPeer{ID: id(i), AdminAddr: "255.255.255.255:65535", Load: 1000, Capacity: 1000})
		}
		if err := ss.PutSummary(ctx, s); err != nil {
			t.Fatalf("the largest head: %v", err)
		}
		var page []string
		for i := range lease.MembersPerPage {
			page = append(page, id(i))
		}
		if err := ss.PutMembers(ctx, 0, base+100, id(0), page); err != nil {
			t.Fatalf("a full page: %v", err)
		}
		if _, _, got, err := ss.GetMembers(ctx, 0); err != nil || len(got) != lease.MembersPerPage {
			t.Fatalf("a full page read back: %d ids, %v", len(got), err)
		}
	})
}

func sorted(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}
