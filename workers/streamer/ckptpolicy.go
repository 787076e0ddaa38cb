// Which sessions get periodic checkpoints: those that can use one.

package streamer

import (
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/spec"
)

// periodicCheckpoints is the Keeper's Config.Periodic: a session gets
// periodic checkpoints when a new connection can ask its source to resume
// from one (spec.Resumable) or its start gave checkpoint_every (read from
// the item's checkpoint_every_ms or the spec: stored twice, why in
// schema.AttrCheckpointEvery). The others
// (seq_mode none; a live stream without a resume parameter or placeholder)
// write only the final checkpoint of a release, hand-off or fail and the one
// before a new generation: after a crash their source could not replay
// anyway, and under seq_mode none the next tenure numbers above
// (lease_epoch - 1) × 2^32 whatever was checkpointed. A spec that does not
// decode keeps them (the session fails at its dial).
func periodicCheckpoints(it lease.Item) bool {
	if it.CheckpointEvery > 0 {
		return true
	}
	sp, err := spec.Decode(it.Spec)
	if err != nil {
		return true
	}
	return sp.Resumable() || sp.CheckpointInterval() > 0
}
