# bench: the benchmark driver (scripts/bench) and its report,
# docs/BENCHMARKS.md + docs/benchmarks.json. Not part of `make test`
# (figures are reported, never asserted); its own unit tests run with the
# scripts module's. Included by the top Makefile (`-include mk/*.mk`).
#
#   make bench        quick mode, ≤ 5 minutes (smaller counts, said so in the report)
#   make bench-full   full mode (19,000 sessions on one worker, dynalite stepped to its limit; ~20 min)
#   make bench BENCH_ARGS='-only claim,handoff'      one or more phases
#   make bench-full BENCH_ARGS='-wait-quiet 0.5'     wait (≤ 20 min) for a quiet machine first
BENCH_ARGS ?=

.PHONY: bench-bin bench bench-full

## bench-bin: the driver and every binary it runs, into bin/: the shipped
## bin/streamer (lease, cost and dynalite phases) and the capacity runs'
## bin/memstreamer (the worker on the in-memory store; bench only) and
## bin/bareclient (the bare coder/websocket reference they are set beside).
bench-bin: devstack-bins
	$(GO) build -o $(BIN)/bench ./scripts/bench/cmd/bench
	$(GO) build -o $(BIN)/memstreamer ./scripts/bench/cmd/memstreamer
	$(GO) build -o $(BIN)/bareclient ./scripts/bench/cmd/bareclient

## bench: quick benchmarks → docs/BENCHMARKS.md, docs/benchmarks.json (logs, profiles: out/bench/).
bench: deps bench-bin
	$(BIN)/bench -mode quick $(BENCH_ARGS)

## bench-full: the full-size benchmarks, same outputs.
bench-full: deps bench-bin
	$(BIN)/bench -mode full $(BENCH_ARGS)
