// Package chaos is wsfleet's fault-injection and consistency harness (`make
// chaos`). It runs the local stack (package devstack) with N worker processes
// and M sessions on the demo feed, injects faults on a schedule drawn from a
// seed (plan.go): kill -9 of a worker, a SIGSTOP'd zombie woken after more
// than the liveness TTL, a SIGTERM rolling restart of every worker, DynamoDB
// down for 2 × TTL, one worker cut off from DynamoDB (not from its sources)
// for more than the TTL, SQS down, the source dropping and refusing
// connections, the source ending connections on a schedule (a max age of a
// few seconds, a shutdown notice 1 s before), start / stop / re-start churn
// through the API and a worker whose wall clock is off by seconds (the
// protocol reads no wall clock to decide anything). Every third session
// (Config.PlannedEvery) is started with planned reconnects
// (max_connection_age, reconnect_on the shutdown notice), so that
// make-before-break switches happen throughout every run: the workers name
// their tenure (worker id / lease epoch) in a handshake header the feed
// records, and the one-connection check accepts two connections of one
// tenure only as such a switch. Every fourth of the other sessions
// (Config.StandbyEvery) is started with a hot standby on a source that
// cannot replay (seq_mode none, or the seq field without resume), every
// eighth on such a source without (the control group), and the feed admits
// standby connections beside the owner's (run_standby.go). Then it judges
// the run (check*.go) only from
// evidence the workers do not produce about themselves: the feed's
// connection records, the sink lines as the harness received them from each
// worker's stdout (stamped with their arrival time), the harness's own log
// of what it did and when, and the sessions table read at the end. It writes
// a JSON result, a Markdown report and an SVG timeline (report.go, svg.go).
//
// Replaying a seed replays the schedule (the same faults, victims by worker
// slot, durations and gaps), not the exact interleaving of the processes.
//
// Files, by concern:
//
//   - chaos.go: Config, its defaults and its validation; kinds.go the
//     fault kinds; settings.go the Settings and Bounds a run is judged by.
//   - plan.go: the seeded schedule (Plan, Step) and the demo plan.
//   - run.go: Run: the stack up, the schedule step by step, the evidence
//     collected at the end. run_faults.go injects each fault kind (the sink
//     faults: sink.go), run_workers.go controls the worker processes,
//     run_sessions.go drives the sessions through the API and waits on what
//     the harness sees, run_standby.go picks the sessions on sources that
//     cannot replay (with a standby, the control group) and their fields,
//     run_table.go reads the sessions table.
//   - record.go: the evidence (Evidence and its records);
//     record_recorder.go the recorder of the deliveries as they arrive,
//     record_files.go the workers' logs and sink files read after the run,
//     record_pressure.go the CPU pressure samples, record_saved.go save
//     and load; sink.go what an AWS sink adds (the destination's records,
//     the workers' skips and releases) and its faults.
//   - check.go: Analyze, the check names and rules, the judge's index of
//     the evidence per session; how to add a check. check_passes.go: the
//     judge's passes in run order, each with the checks it judges and the
//     passes it runs after. A pass per file: check_delivery.go (no-loss,
//     order, stale epochs), check_connections.go (one connection),
//     check_transitions.go (the ownership changes, what caused each, their
//     repeats, the rebalancing moves), check_standby.go (the sessions
//     whose source cannot replay, by the feed seq in their data:
//     standby-no-loss, standby-repeats), check_onedeliverer.go,
//     check_faults.go (recovery after each fault; each family's measure in
//     check_faults_worker.go, check_faults_dynamo.go,
//     check_faults_source.go, check_faults_sink.go), check_poison.go (the
//     poisoned source), check_actions.go (claims and stops),
//     check_table.go (the table at the end: end-ownership, release),
//     check_sink.go (sink integrity), check_trust.go (the trust deadline
//     at the destination), check_prefix.go (the checkpoint prefix);
//     check_summary.go sums them up into the Result (result.go).
//   - report.go, svg.go: the Markdown report and the SVG timeline.
package chaos
