# sim: the fleet simulator (scripts/fleetsim, build tag fleetsim; issue 36):
# N real worker control planes on the simulated DynamoDB (testkit/simddb)
# in one process, in virtual time, judged from its own records. `make sim`
# writes docs/SCALE.md + docs/scale.json; test-fleetsim (part of `make
# test`) runs the short set: the behaviour checks of the short scenarios,
# the mutation check (broken fencing is caught), same-seed verdicts and
# figures.
# Included by the top Makefile (`-include mk/*.mk`); RUNTIME_MODULES is
# unaffected (the simulator is harness code in the scripts module).
#
#   make sim                                    every scenario, 10 workers × 1,000 sessions, 10 virtual minutes, seed 1
#   make sim SCENARIO=crash,az SEED=7           some scenarios, another seed
#   make sim WORKERS=100 SESSIONS=10000 MINUTES=3 RERUN=false SIM_OUT=out/sim
#   make sim SCENARIO=steady SIZES=100x100000,1000x1000000 RATE=0.1   each scenario at every size (in that order, size by size) in one report; SIZES overrides WORKERS and SESSIONS
#   make sim SCENARIO=az SIZES=100x100000 … WATCH=s-068045 RERUN=false   the same run, writing that session's ownership calls (the slowest of the run before)
#
# The test runs with -v: a progress line every virtual minute (scenario,
# size, virtual and real time, sessions delivering of started, the table's
# write and read units/s over the last minute, calls throttled so far).
TEST_TARGETS += test-fleetsim

SCENARIO ?= all
# SEED is shared with chaos (empty there: a random seed); the simulator's
# default is 1.
SIM_SEED = $(or $(SEED),1)
WORKERS ?= 10
SESSIONS ?= 1000
# SIZES: WORKERSxSESSIONS,… (e.g. 100x10000,1000x100000); empty: WORKERS × SESSIONS.
SIZES ?=
MINUTES ?= 10
RATE ?= 1
RERUN ?= true
# WARM=true: the table pre-warmed to its quota (40,000 write units/s) instead of a new on-demand table's 4,000.
WARM ?= false
# FLEET_CLAIMS=N: every worker runs with the fleet's claim budget of N claims/s (WSFLEET_FLEET_CLAIMS_PER_SECOND; docs/infra.md sizes prod's from its table); 0: none, the workers' default.
FLEET_CLAIMS ?= 0
# FEED=true: the sessions dial the test feed over in-memory pipes through the worker's WebSocket client (~100 KiB a session) instead of the light source.
FEED ?= false
# WATCH=s-000123,…: every ownership and work-queue call on these sessions written to stderr as it happens (worker, call, outcome, virtual time): a scale.json's faults[].slowest names a fault's slowest sessions, and the same seed replays them (at small sizes: a fleet of 1,000 workers does not take the same path twice).
# WATCH=slowest: every session's calls kept from the first fault, written for each fault's slowest sessions once the run is judged, each with its claimers' claims from the fault to their claim of it (by path and outcome, per 10 s).
WATCH ?=
SIM_OUT ?= $(ROOT)/docs

.PHONY: sim test-fleetsim

## sim: the scenarios (SCENARIO=steady,crash,az,term,az-onehost,scale-out,deploy-default,deploy-infra,scale-out-in,standby-crash,ddb-down,burst-start,crash-big,lag-sweep, or by name crash-throttled and source-limit; all: every one but those two; SEED=; SIZES=100x10000,1000x100000: each at every size, in one report) judged and measured → docs/SCALE.md, docs/scale.json; a progress line every virtual minute.
sim:
	@mkdir -p $(SIM_OUT)
	cd scripts && $(GO) test -v -count=1 -tags fleetsim -run '^TestSim$$' -timeout 300m ./fleetsim/ -args \
	  -sim.scenario=$(SCENARIO) -sim.seed=$(SIM_SEED) -sim.workers=$(WORKERS) -sim.sessions=$(SESSIONS) -sim.sizes=$(SIZES) \
	  -sim.minutes=$(MINUTES) -sim.rate=$(RATE) -sim.rerun=$(RERUN) -sim.warm=$(WARM) -sim.fleetclaims=$(FLEET_CLAIMS) -sim.feed=$(FEED) -sim.watch=$(WATCH) -sim.out=$(abspath $(SIM_OUT)) \
	  -sim.command="make sim SCENARIO=$(SCENARIO) SEED=$(SIM_SEED) $(if $(SIZES),SIZES=$(SIZES),WORKERS=$(WORKERS) SESSIONS=$(SESSIONS)) MINUTES=$(MINUTES) RATE=$(RATE) RERUN=$(RERUN)$(if $(filter true,$(WARM)), WARM=true)$(if $(filter-out 0,$(FLEET_CLAIMS)), FLEET_CLAIMS=$(FLEET_CLAIMS))$(if $(filter true,$(FEED)), FEED=true)"

## test-fleetsim: the simulator's short set (-race, virtual time, deterministic verdicts; well under a minute).
test-fleetsim:
	cd workers/streamer && $(GO) vet -tags fleetsim .
	cd scripts && $(GO) vet -tags fleetsim ./fleetsim/
	cd scripts && $(GO) test -count=1 -race -tags fleetsim -run '^(TestShortSet|TestTermHandsSessionsToReceivers|TestScaleOutRebalances|TestMutationCatchesDoubleOwner|TestSameSeedSameVerdicts|TestSameSeedSameFigures|TestJudgeDefinitions|TestKillAZKillsOneAZ|TestFullFleetRecoversAnAZByReplacements|TestScenariosLeaveHeadroom|TestFaultsFollowTheRamp|TestLaunchQuota|TestSpreadStopsAcrossAZs|TestDeploy|TestDeployKilledMidDrain|TestCrashBigRecovers|TestJudgeQuietSpanAndOwnBound|TestJudgeDarkTimeExact|TestJudgeDarkUnmeasured|TestDarkHistPrecision|TestDeployDarkIsExact|TestGoalDeployUsesExactDark|TestSizesFlag|TestGoalReadScalingSplitsBySize|TestGoalsComputedFromFigures|TestGoalAZLossWithoutASteadyWindowUsesTheHeldWritesBeforeTheFault|TestClaimRateBusiestWindow|TestClaimPathsFrom|TestClaimWindowsFrom|TestClaimPathsOfACrash|TestReadSplitSumsToReadUnits|TestSourceLimitPacedByTheWorkersNeverRefused|TestFleetClaimBudgetLeavesHeartbeatsTheirShare|TestDeployOfFullWorkersHandsOffWithinTheGoal|TestOpRatesPerWorkerHourOfTheWindow|TestStandbyCrashLosesNothing|TestGoalStandbyFromTakeoverP99|TestLightSourceAgreesWithTheFeed|TestWatchReplaysTheSlowestSession|TestWatchSlowestWritesTheRunsOwnSlowest)$$' -timeout 10m ./fleetsim/
