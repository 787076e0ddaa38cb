// Package clock owns time for wsfleet: a Clock interface, the real clock, a
// clock with a fixed wall offset (to test skew) and a fake clock for tests.
// Times returned by the real clock carry Go's monotonic reading, so durations
// measured with Sub are immune to wall-clock steps.
//
// # The control plane on virtual time
//
// The worker's control plane (shared/lease and its stores, shared/notify,
// shared/rebalance, the workers/streamer package itself and its
// internal/claim) reads time in one of two ways, and nothing else:
//
//   - The worker's injected Clock (streamer.Deps.Clock, handed to the lease
//     Keeper, the claim consumer and reconciler, the pacer): every now, every
//     timer and every deadline the control plane computes itself (Since and
//     Until here are time.Since and time.Until on a Clock). This is what lets
//     one worker run on a skewed clock (Offset: the chaos build's
//     WSFLEET_TEST_CLOCK_OFFSET, and a fleet simulator's per-worker skew) and
//     the pure rules run on a Fake.
//   - context deadlines (context.WithTimeout, WithDeadline) bounding a call
//     to a collaborator (a store RPC, a queue acknowledgement, a sink flush).
//     These bound real I/O, so real time is right in production; they do not
//     take a Clock.
//
// A fleet simulator runs N real control planes in one process in virtual
// time with testing/synctest (GA since Go 1.25): inside a bubble
// (synctest.Test) time.Now, timers, tickers and context deadlines all read
// the bubble's fake clock, which advances only when every goroutine of the
// bubble is durably blocked (on a channel, a select, a sync.WaitGroup, a
// sync.Cond or time.Sleep, all of the bubble's making). Real is therefore
// virtual in a bubble too, and so are the context deadlines above and what
// libraries read internally (x/time/rate's limiters). An injected Fake is
// not the simulator's clock: it would have to be advanced by hand while
// synctest advances time by itself. So for the control plane in a bubble:
//
//   - every goroutine must start in the bubble (the Worker is created and
//     Run inside it; a goroutine started earlier, or a package-level one
//     started lazily by another bubble, is outside and may not touch the
//     bubble's channels or timers);
//   - nothing may block on real I/O (a socket, a pipe to a process, a
//     listener): a goroutine blocked there is not durably blocked, so time
//     stands still until it returns. The memory store (shared/lease/memstore)
//     and no admin listener (Config.AdminAddr "") keep the worker's control
//     plane off the network; a session dials its source, so a simulator's
//     sessions need an in-memory source: net.Pipe is durably blocking, and
//     the test feed (testkit/feed) serves over pipes as well as sockets.
//
// workers/streamer's TestControlPlaneRunsInVirtualTime (two workers on
// skewed clocks, a kill -9 and its takeover) and
// TestSessionsStreamInVirtualTime (sessions streaming from the test feed
// over pipes) each run ten virtual minutes in about a second.
//
// The Clock is still needed beside synctest for what synctest cannot give:
// a different clock per worker (skew) in one bubble, and the pure rules'
// unit tests on a Fake. shared/archtest's TestControlPlaneReadsNoWallClock
// fails when a control-plane package calls time.Now, Since, Until, After,
// AfterFunc, NewTimer, NewTicker, Tick or Sleep outside its allow-list.
package clock
