//go:build fleetsim

// Package fleetsim owns the fleet simulator (issue 36): N real worker control
// planes (workers/streamer's New and Run, the code the binary runs) on one
// simulated DynamoDB table (testkit/simddb: billing, throttling, latency,
// index lag), in one process, in virtual time (a testing/synctest bubble),
// with simulated sessions, scenarios of faults, and a judge that reads only
// the simulator's own records.
//
// What it models:
//
//   - Workers: streamer.Worker with the default configuration, no admin
//     listener (no hand-off over TCP: a drain releases and the others find
//     the session by reconciliation) and no work queue (claims by
//     reconciliation only); each on its own clock, the bubble's offset by a
//     skew drawn from the seed.
//   - Sessions: the test feed (testkit/feed) serves every session's stream
//     over in-memory pipes (net.Pipe through an http.Transport), a seq per
//     message at Config.Rate, resuming from the checkpoint (from=K) with
//     the backlog; the workers dial it through the fleetsim build's seam
//     (streamer.Worker.SimSetSessionTransport, -tags fleetsim: the shipped
//     binary has no such hook and always dials through netguard).
//   - The destination: every worker's sink is the Record, which numbers each
//     delivery (its place in a total order) and folds it into its session's
//     figures as it arrives (the tenures' first and last place, the highest
//     epoch, the seqs as an interval set, the silences, the recoveries of
//     the faults that hit the session): it keeps no delivery, so its memory
//     is per session, not per delivery.
//   - Faults: a kill -9 (the worker cut off the table at once, its sessions
//     abandoned without close or release: SimCrash, then its goroutines
//     end), a SIGTERM (the graceful shutdown), workers added, sessions
//     started as ingest writes them (simddb's harness writes).
//
// The judge (Fleet.Judge) reports double owners (two tenures of a session
// delivering within each other's span in the destination's order), fenced
// deliveries apart (an epoch below one already received), replays and gaps
// (loss), every faulted session's time to deliver again (p50/p99/max), and
// the table's meters (peak units per partition key, index key value and
// table against the limits, throttles by reason, coordination reads and
// writes per worker-hour, write units per tenure).
//
// Determinism: the seed fixes the table's draws and the skews; what it
// cannot fix is the order in which goroutines runnable at the same virtual
// instant run (simddb's Meter.Contended counts the calls that met another
// on one item). Figures reports it (Contended); see docs/SCALE.md.
//
// It is harness code (the scripts module, build tag fleetsim): no shipped
// binary imports it.
package fleetsim
