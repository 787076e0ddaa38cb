//go:build !fleetsim

package streamer

import "github.com/wsfleet/wsfleet/workers/streamer/internal/claim"

// noteClaim: the shipped binary counts claims by outcome in its metrics
// only (the fleet simulator's build counts them by path: fleetsim.go).
func (w *Worker) noteClaim(claimPath, string, claim.Outcome) {}
