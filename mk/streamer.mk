# workers/streamer: the worker (an ECS Fargate service; docs/worker.md).
# Included by the top Makefile (`-include mk/*.mk`).
RUNTIME_MODULES += workers/streamer
TEST_TARGETS += test-streamer
BUILD_TARGETS += build-streamer

# Length of the seq-parser fuzz run in `make test`: an execution count (a duration
# races the fuzz coordinator's deadline, golang/go#75804; see mk/ingest.mk).
# Longer: make test-streamer STREAMER_FUZZTIME=1m.
STREAMER_FUZZTIME ?= 300000x

.PHONY: tools-websocketd build-streamer test-streamer fuzz-streamer

## tools-websocketd: Debian's websocketd, a WebSocket server we did not write, for the
## end-to-end test (installed with apt only when missing).
tools-websocketd:
	@command -v websocketd >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi; \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq websocketd; }

## build-streamer: bin/streamer (the container image builds with workers/streamer/Dockerfile).
build-streamer:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/streamer ./workers/streamer/cmd/streamer

## test-streamer: unit and integration tests (dynalite + fauxqs + websocketd), all with
## -race: the integration tests run in parallel and mostly wait on lease timings, so
## -race costs little (the whole run is well under a minute on 2 cores). Then a short
## fuzz of the sequence-number parser.
test-streamer: deps tools-websocketd
	cd workers/streamer && $(GO) test -count=1 -race ./...
	$(MAKE) --no-print-directory fuzz-streamer

fuzz-streamer:
	cd workers/streamer && $(GO) test -run '^$$' -fuzz '^FuzzFind$$' -fuzztime=$(STREAMER_FUZZTIME) -fuzzminimizetime=1s ./internal/jsonseq
