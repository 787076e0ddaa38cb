// The one-deliverer pass: one worker delivers under each lease epoch of a
// session (a standby never under its owner's), every session judged.

package chaos

// checkOneDeliverer holds one worker to each lease epoch of a session:
// two workers delivering under one epoch are two deliverers no stale-epoch
// rule sees (fencing judges the deliveries of an epoch older than one that
// delivered).
func (j *judge) checkOneDeliverer() {
	for _, id := range j.ids {
		v := j.sess[id]
		by := map[int64]*tenure{}
		for _, t := range v.tenures {
			if o := by[t.epoch]; o != nil {
				j.violate(CheckOneDeliverer, id, t.firstAt, "%s and %s both delivered under lease epoch %d", o.key(), t.key(), t.epoch)
				continue
			}
			by[t.epoch] = t
		}
	}
}
