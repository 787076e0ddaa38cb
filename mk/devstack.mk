# scripts: the local stack (`make dev`), the failover demo (`make demo`: the
# chaos harness's demo plan, see mk/chaos.mk) and the demo feed; the wsfleet
# CLI is mk/cli.mk's. Included by the top Makefile (`-include mk/*.mk`). See
# docs/local-stack.md.
RUNTIME_MODULES += scripts
TEST_TARGETS += test-scripts

# Extra arguments: make dev DEV_ARGS='--workers 5 --fresh'; make demo DEMO_ARGS='-sessions 48 -workers 4'.
DEV_ARGS ?=
DEMO_ARGS ?=

.PHONY: devstack-bins dev demo test-scripts

## devstack-bins: every binary the local stack runs, into bin/ (go's cache makes a rebuild cheap).
## bin/streamer is the shipped build (no chaos hooks; the chaos harness builds its own).
devstack-bins: build-cli
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/streamer ./workers/streamer/cmd/streamer
	$(GO) build -o $(BIN)/ingest-local ./functions/ingest/cmd/ingest-local
	$(GO) build -o $(BIN)/feed ./testkit/feed/cmd/feed
	$(GO) build -o $(BIN)/dynamodel ./testkit/dynamodel/cmd/dynamodel
	$(GO) build -o $(BIN)/secretsmanager ./testkit/secretsmanager/cmd/secretsmanager
	$(GO) build -o $(BIN)/devstack ./scripts/devstack/cmd/devstack
	$(GO) build -o $(BIN)/chaos ./scripts/chaos/cmd/chaos

## dev: the whole system on this machine (data in .dev/data, logs in .dev/logs); Ctrl-C stops it.
dev: deps devstack-bins
	$(BIN)/devstack $(DEV_ARGS)

## demo: the chaos harness's demo plan (kill -9, a rolling restart, churn) on a fresh stack; report in out/demo; exits non-zero on any violation.
demo: deps devstack-bins
	$(BIN)/chaos -plan demo $(DEMO_ARGS)

## test-scripts: the scripts module's tests (the demo plan runs on a real stack in test-chaos).
test-scripts: deps devstack-bins
	cd scripts && $(GO) test -count=1 -race ./...
