# cmd/wsfleet: the wsfleet command line, the product's user interface (its
# own module; it imports shared, never a deployable). Included by the top
# Makefile (`-include mk/*.mk`). See README.md and docs/local-stack.md.
RUNTIME_MODULES += cmd/wsfleet
TEST_TARGETS += test-cli
BUILD_TARGETS += build-cli

.PHONY: build-cli test-cli

## build-cli: bin/wsfleet.
build-cli:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/wsfleet ./cmd/wsfleet

## test-cli: the CLI and its API client against a fake ingest API.
test-cli:
	cd cmd/wsfleet && $(GO) test -count=1 -race ./...
