package sessions_test

import (
	"context"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
)

// workers is the workers' side of the end-to-end tests: the ownership
// core (lease.Keeper) on dynamostore over the env's table, on one fake
// clock.
type workers struct {
	t   *testing.T
	ctx context.Context
	ls  *dynamostore.Store
	clk *clock.Fake
}

func (e *env) workers(t *testing.T, ctx context.Context) *workers {
	return &workers{t: t, ctx: ctx, ls: dynamostore.New(e.db, e.table), clk: clock.NewFake(time.UnixMilli(1_800_000_000_000))}
}

// keeper registers worker id and returns its Keeper.
func (w *workers) keeper(id string) *lease.Keeper {
	w.t.Helper()
	k, err := lease.NewKeeper(w.ls, w.clk, lease.DefaultConfig(id), nil, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := k.Register(w.ctx); err != nil {
		w.t.Fatal(err)
	}
	return k
}
