package lease

import "context"

// Test hooks: the Keeper's loop steps, run synchronously by the tests
// (compiled into test binaries only).

func (k *Keeper) HeartbeatNow(ctx context.Context) {
	k.lmu.Lock()
	k.hbBusy = true
	k.lmu.Unlock()
	k.heartbeat(ctx)
}

func (k *Keeper) TickNow(ctx context.Context) error {
	err := k.tick(ctx, true)
	k.wg.Wait()
	return err
}

func (k *Keeper) WatchNow(ctx context.Context) { k.watchPass(ctx) }

// GoneRemembered is how many workers k remembers gone.
func (k *Keeper) GoneRemembered() int {
	k.gmu.Lock()
	defer k.gmu.Unlock()
	return len(k.gone)
}
