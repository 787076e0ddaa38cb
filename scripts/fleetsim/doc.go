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
//   - Workers: streamer.Worker with the default configuration, each on its
//     own clock, the bubble's offset by a skew drawn from the seed. Each has
//     its admin server (AdminHandler, POST /handoff among it) on a listener
//     of its own on the fleet's in-memory mesh (testkit/pipenet.Mesh), at
//     the address its worker record advertises, and a hand-off client that
//     dials through the mesh (streamer.Worker.SimSetAdmin, -tags fleetsim):
//     rebalancing rounds (RebalanceEvery), a drain's directed hand-offs
//     (rebalance.Drain) and takeovers handed to receivers run as in a
//     fleet. Every worker consumes one shared work queue
//     (testkit/memqueue: SQS's visibility timeout, at-least-once delivery,
//     long polls, a latency per call drawn from the seed): the fast path
//     of a start, and a drain's start notifications for the sessions not
//     handed to a receiver. A kill -9 cuts a worker off the queue and
//     closes its admin port too.
//   - Sessions: each is the worker's own session code (workers/streamer's
//     internal/session: admission, dial gates, the read loop, dedupe, the
//     sink, checkpoints, planned reconnects, the standby's window) above
//     a connection the light source (lightsrc.go) makes on each read, with
//     no socket, HTTP, WebSocket client or source goroutine (issue 36:
//     "simulated sessions that dial, deliver at a rate, checkpoint and
//     resume without sockets"): seq N of a session produced at t0 + N/Rate
//     (t0 its first connection), the backlog from the resume parameter
//     (from=K) at once, then live; the test feed's rules for its
//     per-IP connection limit, standby admission and overlaps. The workers
//     dial it through the fleetsim build's seam
//     (streamer.Worker.SimSetSessionDialer, session.Dialer: the shipped
//     binary has no such hook and always dials coder/websocket through
//     netguard). Config.Feed dials the test feed (testkit/feed) over
//     in-memory pipes instead, through the worker's WebSocket client and
//     HTTP transport (SimSetSessionTransport); TestLightSourceAgreesWithTheFeed
//     runs the crash, hand-off and standby scenarios on both and finds the
//     same verdicts.
//   - The destination: every worker's sink is the Record, which numbers each
//     delivery (its place in a total order) and folds it into its session's
//     figures as it arrives (the tenures' first and last place, the highest
//     epoch, the seqs as an interval set, the silences, the recoveries of
//     the faults that hit the session): it keeps no delivery, so its memory
//     is per session, not per delivery.
//   - Faults: a kill -9 (the worker cut off the table at once, its sessions
//     abandoned without close or release: SimCrash, then its goroutines
//     end), a SIGTERM (the graceful shutdown), workers added, sessions
//     started as ingest starts them (simddb's harness writes, then a start
//     notification each on the work queue); the table
//     unreachable for every worker (outage.go: each call hangs to its
//     deadline and fails as the SDK does), an index lag episode, a source
//     limiting connections per worker address (each worker dials from an
//     IP of its own, feed.ConnLimit's rule); faults.go.
//   - Hot standbys (standby.go, issue 39): with Config.StandbyShare every
//     source cannot replay (no resume parameter) and that share of the
//     sessions asks for a standby; the source admits a standby's connection
//     beside the owner's by the tenure header every worker names, and the
//     standby protocol (POST /standby, /standby/owner-dead,
//     /standby/positions) runs between the admin servers on the mesh. The
//     judge counts the standby and the control sessions' loss apart and
//     times each takeover from the dead owner's declaration
//     (standby-crash).
//   - ECS (ecs.go; an operation in progress ecs_tasks.go, the operations
//     ecs_ops.go): every worker is a task of one service, placed over 3
//     AZs (ECS's spread by AZ: the AZ with the fewest tasks, round robin
//     from an even start). Launches go through Fargate's task launch rate
//     quota (a token bucket of 100, refilled at 20 a second, per account
//     and Region: https://docs.aws.amazon.com/AmazonECS/latest/developerguide/throttling.html)
//     and take 30–45 s from the quota to the worker's Run (drawn from the
//     seed; an assumption: AWS states no figure, its answer on re:Post is
//     "30-45 seconds or longer",
//     https://repost.aws/questions/QUjZAzJd27SZWxXM7MgyxOZw/how-to-speed-up-provisioning-of-ecs-fargate-task).
//     A rolling deploy (Fleet.Deploy) starts replacements within
//     maximumPercent and stops old tasks within minimumHealthyPercent, a
//     task healthy once its worker record is ALIVE (the infra's container
//     health check, every 15 s after a 30 s start period, is not
//     modelled); a stopped task gets SIGTERM (the graceful shutdown) and
//     SIGKILL (a kill -9, as Kill: table, queue and admin port cut at
//     once; the task is gone at its kill) if still running at the stop
//     timeout. ECSDefaults are ECS's (100 %/200 %, 30 s), InfraRolling the
//     infra's for prod (100 %/129 %, 120 s, the workers' shutdown deadline
//     110 s; restated from infra/stacks, not imported). Scale-out
//     launches through the quota; scale-in stops tasks from the AZ with
//     the most, the newest first. The loss of an AZ
//     (KillAZ) kills its tasks at once, and the service scheduler launches
//     as many replacements in the other AZs ("replace"): a fleet too full
//     to absorb a third of its sessions (100 workers × 1,000 sessions at
//     WSFLEET_MAX_SESSIONS 1,000) waits for them. Found
//     with a deploy that kills every old task in its drain
//     (TestDeployKilledAtStopTimeout): a killed task whose watchers were
//     all old tasks killed too is declared dead only after them, a TTL and
//     a listing refresh more per dead watcher (seed 1: 30 s instead of a
//     crash's ~11 s); the watch graph's matter, issue 37 (docs/worker.md,
//     Graceful shutdown).
//
// The judge (Fleet.Judge) reports double owners (two tenures of a session
// delivering within each other's span in the destination's order), fenced
// deliveries apart (an epoch below one already received), replays and gaps
// (loss), every faulted session's time to deliver again (p50/p99/max), the
// exact dark time of each tenure change (dark.go: of the tenure change
// ending a faulted session's recovery, and of every rebalancing move), and
// the table's meters (peak units per partition key, index key value and
// table against the limits, throttles by reason, coordination reads and
// writes per worker-hour, the read units split into the worker records'
// and the sessions' (readsplit.go), write units per tenure).
//
// The dark time of a tenure change is exact from what the Record and the
// source know: the source produces seq N at t0 + N/rate
// (feed.Server.ProducedAt), and a message read live reaches the Record at
// that virtual instant. From is the first seq the destination had not
// received when the new tenure began; the dark time is the new tenure's
// first delivery of a seq >= from − from's production: how late the first
// undelivered message was (0 when the new tenure read before it was
// produced; the replays from the checkpoint do not end it). The time from
// a SIGTERM to delivering again, which the judge reports too, is an upper
// bound of it: it includes the session's streaming on the draining task
// until its turn. When the old tenure stopped reading is known to neither
// the Record nor the source (the benchmark's dark time, docs/BENCHMARKS.md,
// starts at the old connection's close at the source and includes the wait
// for the source's next message). A fault hit's dark times are kept
// exactly (one per session hit, as its times to deliver again); the moves'
// exactly up to 16,384, then in a histogram of 1 ms buckets to 1 s and
// 10 ms buckets to 60 s whose p50 and p99 are a bucket's upper edge (at most
// 1 ms, or 10 ms, above the exact figure), the max exact.
//
// Determinism: the seed fixes the table's draws, the skews, the start gaps
// and every worker's own draws: its streamer.Deps.Rand is derived from the
// seed and its id (shared/draw), one stream per component and per tenure
// (the reconciler's shuffle and jitter, rebalancing's jitter, the sessions'
// ping, planned-reconnect, dial-gate and back-off draws), so one stream's
// draws do not depend on how another's interleave. A drain hands sessions
// off by id and a peak's tie goes to the smaller key, not to a map's
// order. What the seed cannot fix is the order in which goroutines
// runnable at the same virtual instant run (the reconciler's concurrent
// claims, the claim pacer's head; simddb's Meter.Contended counts the
// calls that met another on one item): Figures reports Contended, and
// make sim's second run of each scenario names the figures it changed
// (docs/SCALE.md).
//
// Size and cost (issue 36 asks for 100 × 100,000 and 1,000 × 1,000,000).
// make sim SIZES=100x100000,1000x1000000 runs every scenario at both
// sizes into one report (the read-scaling goal compares its two steady
// runs), with a progress line every virtual minute (progress.go).
// The Record keeps no delivery, so a run's memory is per session.
//
// On the light source (the default), measured at 10 workers × 10,000
// sessions × 0.1 msg/s, 3 virtual minutes (make sim SCENARIO=steady
// SIZES=10x10000 RATE=0.1 MINUTES=3 RERUN=false; -sim.heapprofile near the
// peak): ~8 KiB of live heap a session (its Session and proto, its
// Held, the simulated table's item, index entries and meters, its
// connection's few hundred bytes and timer) and one goroutine, the
// worker's session, whose stack is ~4 KiB in steady state (~8 KiB while
// the fleet claims). Peak heap in use (GOGC=100: live heap plus as much
// garbage) 163 MiB and peak stacks 79 MiB: 24.8 KiB a session, 10.7 s
// real for the 3 virtual minutes. The same run on the test feed over pipes
// (FEED=true): 776 + 365 MiB, 116.9 KiB a session, 16.4 s. At
// 100 × 100,000 on a warm table (WARM=true): 1,784 + 795 MiB, 26.4 KiB a
// session, every session delivering within the first virtual minute, 151 s
// real for 3 virtual minutes (the feed's run of that size, before the
// light source, took 483–646 s and ~110 KiB a session).
//
// At 1,000 workers × 1,000,000 sessions (steady, 0.05 msg/s, 10 virtual
// minutes, pre-warmed table; GOMEMLIMIT=20GiB make sim SCENARIO=steady
// SIZES=1000x1000000 RATE=0.05 MINUTES=10 WARM=true RERUN=false;
// docs/scale/1000x1000000-warm-steady): 4,285 s real, 6,672 s CPU, peak
// heap in use 14.8 GiB (held at the memory limit: the collector ran more
// often, not the heap grew) and peak stacks 8.8 GiB (~8 KiB a session
// goroutine while the fleet claims: it shrinks to ~4 KiB at a collection
// once the claims are done), 24.1 KiB a session. The size fits this
// machine only with the memory limit. A scenario's first fault comes at
// a third of its run or at 1.5 × its ramp, whichever is later (375 s at
// this size: scenario.go, faultAt), so 10 virtual minutes leave 225 s
// after it; such a run takes ~1.2–1.5 hours here. The first (az, 11
// virtual minutes) had every session delivering by 6 virtual minutes, as
// the steady run, and ended at the fault, 41 minutes in: the worker that
// declared the AZ's workers dead panicked planning its takeover, whose
// fleet listing named every worker twice (testkit/simddb answered a
// throttled query's retry with every attempt's entries; both fixed, with
// TestThrottledQueryAnswersOnce and TestDrainCountsAWorkerListedTwiceOnce).
// The second (the same command on the fixed code, workers sized for the
// 70 % target then) had all 1,000,000 delivering at 6 virtual minutes
// (42 minutes real), and after the fault at 375 s its 7th virtual minute
// took more than 30 minutes: the process at its 20 GiB memory limit
// (19.7 GiB resident) collected garbage continuously (half its CPU time
// in the kernel) while the takeover and ECS's 334 replacement workers
// added their goroutines; it was stopped there, with no report. A fault
// scenario at this size needed more memory than this machine has, or a
// smaller session.
//
// The third (session 36, the same command, workers sized for 65 %, with a
// session goroutine's stack at 4 KiB: below) held its memory: every
// session delivering at 6 virtual minutes (42m45s real, as before), the
// resident set at 18.5–19.9 GiB under the 20 GiB limit, no collection
// storm. After the fault its virtual minutes took 15.4, 13.7 and more than
// 22 minutes real, and a profile of the process (perf, 15 s) found the
// simulator's work queue, not the workers: the takeover's start
// notifications for the sessions no receiver was told of, hundreds of
// thousands, most of them in flight, and testkit/memqueue scanned every
// queued message on each receive (take, nextVisible: 72 % of the CPU), on
// each delete and requeue (35 % a minute earlier). It was stopped at 8
// virtual minutes, with no report; the queue now keeps its visible
// messages in a heap by the order sent and its invisible ones in a heap by
// the time they show again (O(log n) a call; the same order: make sim's
// figures unchanged). In the two minutes after the loss of the AZ the
// table had refused 433,637 calls (which ones, the stopped run did not
// report). The scenario runs the workers' default of no fleet claim
// budget (WSFLEET_FLEET_CLAIMS_PER_SECOND): 667 survivors at up to 50
// claims/s each may ask for ~33,000 acquires a second, ~107,000 write
// units at 3.22 a claim, against the table's 40,000; prod's infra sets the
// budget (docs/infra.md).
//
// The fourth (session 37) ran with the fleet claim budget sized for this
// table as prod's infra sizes its own (FLEET_CLAIMS=3462: (40,000 −
// 17,700) × 0.5 ÷ 3.22): the same command with FLEET_CLAIMS=3462. The
// claims paced to the budget, the ramp's sessions waited longer for their
// claim (586,876 of 760,000 started delivering at 4 virtual minutes,
// 999,458 of 1,000,000 at 6, 39m44s real), 0 calls throttled through
// minute 6. Its memory did not hold: 18.3 GiB resident at 4 virtual
// minutes, at the 20 GiB limit from 5, and after the fault the collector
// took 77 % of the CPU (perf: mark workers 52 %, assists 25 %); minute 7
// passed 14 minutes real and the run was stopped, with no report. A heap
// profile of the same scenario at 100 × 100,000 (budget 346/s, the same
// per session) named the largest holder: every Keeper's memory of the
// unowned sessions its last 32 listings showed (lease discovery's
// sightings: up to 32,000 a worker while a paced ramp keeps the listings
// full), 257 MB of a 1,051 MB heap at its peak. A real worker's share is
// a few megabytes; a thousand of them in one process are gigabytes. A
// sighting is now 16 bytes (48 before).
//
// The fifth (session 38, the same command, GOMEMLIMIT=20GiB) finished,
// the first fault scenario at this size with a report
// (docs/scale/1000x1000000-warm-az-budget): 999,461 of 1,000,000
// delivering at 6 virtual minutes (27m28s real), the resident set at
// 18.9–21.0 GiB from then on without a collection storm (peak heap in
// use 17.0 GiB, stacks 5.5 GiB), 11 virtual minutes in 65 minutes real.
// The loss of the AZ missed its goal: 323,312 of 334,058 sessions
// delivering again by the end (p99 165.3 s, bound 85.1 s), the table's
// reads at its account limit after the kill (224,232 refused). At
// 100 × 100,000 with the same budget per worker the cause showed: a
// reconcile pass worked through a listing of 1,000 at 3.46 claims/s, and
// most of its late candidates were taken by others meanwhile (refused
// acquires, each a claim slot); a pass now lists what its claim rate
// takes in 20 s (docs/scale/README.md).
//
// The sixth (session 39, the same command, at 371ff90: that listing
// bound, each worker visiting the GONE list in its own order, a
// takeover's announcements batched) ran 11 virtual minutes in 60 minutes
// real (4,261 s CPU, peak heap 15.9 GiB + stacks 5.5 GiB): 334,026 of the
// 334,035 sessions hit delivering again by the end (10,746 not, the fifth
// time), p99 172.3 s, max 194.1 s against a bound of 145.3 s; the table's
// reads at the account limit again after the kill, now from the 334
// takeovers each reading every alive worker's record
// (docs/scale/1000x1000000-warm-az-announce).
//
// The seventh (session 40, the same command, at 5ce8cf0: a takeover reads
// a sample of at most 64 alive records, lease.FleetSample) ran in 73
// minutes real (5,827 s CPU, its first 20 minutes beside 100 × 100,000
// runs; peak heap 14.9 GiB + stacks 7.1 GiB): the reads refused at the
// account limit 45,862 (255,524 the sixth), 334,036 of the 334,037
// sessions hit delivering again by the end, p99 155.9 s, max 176.4 s
// against a bound of 143.7 s (docs/scale/1000x1000000-warm-az-sample).
//
// The eighth (session 41, the same command, at 1b3e7e8: a worker's first
// reconcile pass, before it knows its claim rate, lists 10 candidates,
// not 1,000) ran in 87 minutes real (5,979 s CPU, beside 100 × 100,000
// runs for most of it; peak heap 14.8 GiB + stacks 7.1 GiB): every one of
// the 334,029 sessions hit delivering again by the end, p99 149.4 s, max
// 186.9 s against a bound of 141.6 s, refused acquires 0.54 → 0.33 per
// session started (docs/scale/1000x1000000-warm-az-firstpass).
//
// The ninth (session 42, the same command, at 2d47740: the takeover's
// grace, reconcile passes leaving a dead worker's sessions to its takeover
// for 2 minutes while the work queue flows) ran in 76 minutes real (6,170
// s CPU, its first 35 minutes beside 100 × 100,000 runs): every one of the
// 334,021 sessions hit delivering again, p99 161.9 s, max 196.1 s against
// a bound of 140.8 s, no better than the eighth; the reconcile passes'
// refused claims 152,633 (0.46 a session hit, 0.2 at 100 × 100,000): the
// recovery outlasts the grace (docs/scale/1000x1000000-warm-az-grace).
//
// The later runs are in docs/scale/README.md. One of them (session 45, at
// b9a40ba) reached its last virtual minute and then sat at its 20 GiB
// memory limit for 20 minutes without writing its report: after the judge,
// the fleet's Close stopped every worker gracefully, 1,000 drains at once
// planning moves to receivers that were draining too, then about
// 1,000,000 releases (inferred from the code, not profiled). Close now
// kills the fleet (Fleet.Close): the next run of the same command
// (48d0500) wrote its report 73.5 minutes in
// (docs/scale/1000x1000000-warm-az-stop47).
//
// The first light run found the session goroutine's stack at 14.7 KiB a
// session: the anchor's store write (the first checkpoint of a session
// without one) ran on the session's goroutine, whose stack the store's
// call chain grew for the session's life; it now runs on a fresh stack
// (workers/streamer/internal/session: anchor.go), as the dial does.
//
// A session goroutine's stack was then still 8 KiB for the session's life
// (at 10 × 10,000 × 0.1 msg/s, 3 virtual minutes: peak stacks 79.7 MiB,
// 8 KiB for each of the 10,106 goroutines from the first virtual minute to
// the end; a stack shrinks at a collection only below a quarter used, and
// a parked session uses more than that of 4 KiB): two call chains on it
// passed 4 KiB, the dial before its handshake (the URL, the source host's
// admission, the secrets' expansion) and the Record's bookkeeping under
// the sink's Handle. Now the whole dial runs on a fresh stack (session's
// dialOn) and the Record does its work on a goroutine of its own, as a
// destination does: peak stacks 41.1 MiB at that size (4 KiB a session),
// the same CPU (13.9 s against 14.2 s); at 1,000,000 sessions ~4 GiB less.
// Since issue 40's fourth part the host's admission is waited for on the
// session's goroutine (a queued session then holds no second goroutine,
// whose descriptor the runtime would keep), with the gate's deep calls
// (the token bucket's reservation) on quick fresh stacks: with the
// reservation on the session's goroutine peak stacks were 80 MiB at that
// size; as built, 45 MiB (41 before the change).
//
// On the test feed (FEED=true), profiled at 10 × 10,000 × 0.1 msg/s
// before the light source: a session cost ~30 KiB of live heap and ~27
// KiB of goroutine stacks (three goroutines): the worker's session with
// its coder/websocket client (4 KiB read and write buffers, ~21 KiB with
// its goroutine) and the test feed's side (HTTP server connection,
// coder/websocket's server state, two goroutines: ~29 KiB).
//
// It is harness code (the scripts module, build tag fleetsim): no shipped
// binary imports it.
package fleetsim
