# functions/ingest: the start / stop / status API (Lambda behind an API Gateway
# HTTP API). Included by the top Makefile (`-include mk/*.mk`).
RUNTIME_MODULES += functions/ingest
TEST_TARGETS += test-ingest
BUILD_TARGETS += build-ingest

# The Lambda Runtime Interface Emulator the ingest tests run `bootstrap` under.
RIE_VERSION := v0.0.0-20261030222936-bef5c4ba774d
RIE := $(BIN)/aws-lambda-rie
# Length of each fuzz target's run in `make test`: an execution count, not a duration
# (a duration -fuzztime races the fuzz coordinator's deadline on a loaded runner and
# fails with "context deadline exceeded", golang/go#75804, fixed only in Go 1.27).
# Longer: make fuzz-ingest INGEST_FUZZTIME=5m.
INGEST_FUZZTIME ?= 200000x
INGEST_FUZZ_TARGETS := FuzzDecodeStart FuzzRequest

.PHONY: tools-rie build-ingest test-ingest fuzz-ingest

## tools-rie: install aws-lambda-rie into bin/ (only when missing).
tools-rie: $(RIE)
$(RIE):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$(RIE_VERSION)

## build-ingest: the Lambda bundle the infra app deploys (bin/ingest/bootstrap, arm64).
build-ingest:
	@mkdir -p $(BIN)/ingest
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' -o $(BIN)/ingest/bootstrap ./functions/ingest

## test-ingest: unit + integration (dynalite, fauxqs) + RIE tests, then a short fuzz.
test-ingest: tools-rie deps
	cd functions/ingest && $(GO) test -count=1 -race ./...
	$(MAKE) --no-print-directory fuzz-ingest

fuzz-ingest:
	@for f in $(INGEST_FUZZ_TARGETS); do \
	  (cd functions/ingest && $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime=$(INGEST_FUZZTIME) -fuzzminimizetime=1s ./internal/api) || exit 1; \
	done
