// Package bench is wsfleet's benchmark driver (`make bench`, `make
// bench-full`). It runs the real binaries on this machine and measures, in
// one report (docs/BENCHMARKS.md and docs/benchmarks.json):
//
//  1. claim latency: POST /sessions → first message at the sink, via the SQS
//     notification and via reconciliation alone (workers without a
//     consumer);
//  2. crash failover: kill -9 of the owner → first message delivered by the
//     new owner; and, beside that dial takeover, sessions on sources that
//     cannot replay with a hot standby and without (the control group):
//     their dark time at the sink, declared dead → first message, the feed
//     seqs lost and repeated, and what a standby costs (connections at the
//     feed, the holder's memory, DynamoDB units);
//  3. graceful handoff: SIGTERM of the owner → first message by the new
//     owner, with messages lost and duplicated counted from the feed's and
//     the sinks' records by the chaos harness's checks (package chaos);
//  4. one worker's capacity: sessions held, CPU per 1,000 messages/s and RSS
//     per session, with the no-I/O memory store and with dynalite (stepped
//     until dynalite is the bottleneck), with heap and CPU profiles of the
//     worker; on wss:// by default (-plain-ws: ws://), each size set beside
//     a bare coder/websocket client on the same feed with the same N
//     (bin/bareclient, one after the other, on wss and ws): RSS, heap,
//     stacks and CPU per session for both, their difference and ratio, and
//     charts the bench draws (SVG); and a worker holding N hot standbys
//     (standbymem) beside the bare client with N connections: RSS, heap
//     and stacks per standby above an idle holder (started and stopped
//     before the owner), each process settled until its RSS stops
//     falling, where the RSS goes by MemStats, and the window, against
//     issue 39's memory goal;
//  5. stop latency: POST stop → the connection closed at the source, when
//     the stop notification reaches the owner, a non-owner, or no worker
//     (the owner's mailbox alone);
//  6. DynamoDB cost: write and read units per session-hour by kind and
//     category (liveness, ownership, checkpoints, reads) as the workers'
//     stores meter them, for sessions at 1 msg/s and idle ones, the
//     on-demand cost they project, the table ceiling and the hot keys;
//  7. reads: the liveness protocol's read and write units per worker-hour
//     at 10 and 100 workers (Keepers on dynalite, no session);
//  8. throughput: one session as fast as the feed pushes into each sink
//     (discard, stdout, sqs unbatched and batched, kinesis) with 15 ms
//     added to every sink request, and 1,000 sessions × 10 msg/s into sqs
//     batched: msg/s, requests per message, lag;
//  9. bill: issue 38's workloads (exchange feed, transcript, market depth)
//     through sqs and kinesis with packing off and on ("unpacked",
//     "packed", in one run) and through stdout, what each AWS service
//     would bill counted at the engine boundary, priced per 1,000
//     sessions-month, and every message's delivery latency at the proxy
//     (-bill-label names the pair; -bill-env adds worker settings);
//
// and runs the Go microbenchmarks of the hot paths. The phases that run a
// local stack (claim, failover, handoff, stop, rebalance, cost) serve its
// feed on wss:// by default too (-plain-ws: ws://). Figures are reported,
// never asserted. The quick mode (the default of `make bench`) fits in
// about five minutes with smaller counts; the full mode runs the sizes the
// goals are stated for.
//
// Files: one per phase, each with the phase's run, its goals and its
// section of the report: micro.go, claim.go, handover.go (crash failover
// and graceful handoff; handover_round.go one round and what its logs and
// the feed's records say; handover_standby*.go the hot standby run),
// stop.go, rebalance.go, costphase.go (cost.go: the price model it
// applies), reads.go, capacity.go (profile.go: the worker's heap and CPU
// profiles; capacity_bare*.go: the bare client's runs, the side-by-side
// figures and their goals; capacity_svg.go: the charts;
// capacity_standby.go: the standbymem phase), dynalite.go, throughput.go
// (throughput_env.go: its engines and their own ceilings;
// throughput_proxy.go: the delaying proxy in front of the sinks), bill.go
// (billmeter.go: what the proxy counts as billed; billprice.go: the prices
// and the deployment priced; billreport.go: its section and chart). Shared
// by the phases: phase.go their shape; bench.go runs them and writes the
// report; config.go holds the modes, sizes and worker defaults; report.go
// the Report, the goals table and the Markdown frame (format.go: number
// formats); stack.go the lease phases' local stack and sink collector;
// capenv.go the feed and worker processes other phases start on their own
// and the window that measures one; worker.go a worker's admin endpoints
// and environment; sys.go the machine's and the processes' figures;
// stats.go the distributions.
package bench
