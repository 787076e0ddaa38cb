# chaos: the fault-injection and consistency harness (scripts/chaos, see
# docs/chaos.md), the one judge of the demo, chaos and the bench. `make
# chaos` runs the long seeded schedule on a fresh local stack and writes
# result.json, report.md and timeline.svg (`make demo`, in mk/devstack.mk,
# runs its fixed demo plan); test-chaos (part of `make test`) runs the short
# schedule (the demo plan's steps and one round of every fault kind, about
# 140 s, sink faults included) as a Go test that fails on any violation. Included by the top
# Makefile (`-include mk/*.mk`).
TEST_TARGETS += test-chaos
ALONE_TARGETS += test-chaos # after the other suites, alone (the Makefile's test)

# make chaos SEED=42 DURATION=3m CHAOS_OUT=out/chaos CHAOS_ARGS='-workers 5'
SEED ?=
DURATION ?= 10m
CHAOS_OUT ?= $(ROOT)/docs/chaos
CHAOS_ARGS ?=
# The workers' sink: sqs (default: the batched sqs sink, a standard queue on
# a second fauxqs), kinesis (kinesalite) or stdout; the judge reads the
# destination. make chaos CHAOS_SINK=kinesis CHAOS_OUT=docs/chaos/kinesis
CHAOS_SINK ?= sqs

.PHONY: chaos test-chaos

## chaos: the long schedule (default 10 minutes, a random seed, printed); exits non-zero on any violation.
## The workers are the streamer's chaos build (bin/streamer-chaos: -tags chaos, the test-only lease
## clock offset); bin/streamer stays the shipped build.
chaos: deps devstack-bins
	$(GO) build -tags chaos -o $(BIN)/streamer-chaos ./workers/streamer/cmd/streamer
	$(BIN)/chaos -streamer $(BIN)/streamer-chaos -duration $(DURATION) -out $(CHAOS_OUT) -sink $(CHAOS_SINK) $(if $(SEED),-seed $(SEED)) $(CHAOS_ARGS)

## test-chaos: the short seeded run on a real stack (builds its own binaries, the streamer with -tags chaos).
test-chaos: deps
	cd scripts && $(GO) vet -tags chaos ./chaos/... ./sinkfault/...
	cd scripts && $(GO) test -count=1 -race -tags chaos -run '^TestShortChaos$$' -timeout 9m ./chaos/
