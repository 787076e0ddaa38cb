# wsfleet — top-level build. `make test` is the CI entry point; `make dev` runs
# the local stack. Every install step lives here (never done by hand).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
ROOT := $(CURDIR)
BIN := $(ROOT)/bin
GO ?= go
# The Go release every target builds and tests with: the newest patch release
# without a known standard-library vulnerability (govulncheck, mk/lint.mk).
# The go command downloads it from the module proxy once; it overrides a
# GOTOOLCHAIN=local setting. `make GO_TOOLCHAIN=local` uses the go on PATH.
GO_TOOLCHAIN ?= go1.26.11
export GOTOOLCHAIN := $(GO_TOOLCHAIN)
# Offline (or with GOPROXY unreachable) and that release not in the module
# cache, the go command cannot run: say so once, naming the way out.
ifneq ($(GO_TOOLCHAIN),local)
ifneq ($(shell GOTOOLCHAIN=$(GO_TOOLCHAIN) $(GO) version >/dev/null 2>&1 && echo ok),ok)
$(error Go $(GO_TOOLCHAIN), the release every target builds with, is not cached and cannot be downloaded (offline, or GOPROXY unreachable; `GOTOOLCHAIN=$(GO_TOOLCHAIN) go version` says why). Run `make GO_TOOLCHAIN=local ...` to build with the go on PATH ($(shell GOTOOLCHAIN=local $(GO) env GOVERSION 2>/dev/null || echo none found)))
endif
endif
export GOFLAGS := -buildvcs=false
export CDK_DISABLE_VERSION_CHECK := 1
export CDK_DISABLE_CLI_TELEMETRY := true
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export WSFLEET_ROOT := $(ROOT)

# Runtime modules (fast); infra is its own module (cold build ~90 s).
# Each component adds itself in mk/<component>.mk: RUNTIME_MODULES += dir,
# TEST_TARGETS += its test target (ALONE_TARGETS += it too: run after the
# others, alone), BUILD_TARGETS += its build target.
RUNTIME_MODULES := shared
TEST_TARGETS := test-shared
ALONE_TARGETS :=
BUILD_TARGETS :=

-include mk/*.mk

.PHONY: all deps deps-node engines test test-shared lint build clean
all: build

## deps: install the pinned local engines (npm ci) and tools.
deps: deps-node
deps-node: node_modules/.package-lock.json
node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

## engines: run dynalite + fauxqs in the foreground (for humans; tests start their own).
engines: deps
	scripts/engines/run.sh

## lint: gofmt, go vet, staticcheck and govulncheck (mk/lint.mk) on every runtime module.
lint: tools-lint
	@out=$$(gofmt -l $(addprefix ./,$(RUNTIME_MODULES))); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@for m in $(RUNTIME_MODULES); do (cd $$m && $(GO) vet ./...); done
	$(call lint-go-tools,$(RUNTIME_MODULES))

build: $(BUILD_TARGETS)
	@for m in $(RUNTIME_MODULES); do (cd $$m && $(GO) build ./...); done

# TEST_JOBS test targets run at once (their output kept whole per target):
# most of the time a suite waits on lease timings and engines, so two
# overlap well on two cores. make test TEST_JOBS=1 runs them one by one.
# ALONE_TARGETS run after the others, one at a time, on a machine nothing
# else of `make test` loads: the short chaos run judges recovery bounds of
# about a second, and beside the -race suites on two cores (CPU pressure
# ~0.9 for its whole run) it measured its neighbours (docs/chaos.md).
TEST_JOBS ?= 2

test: deps lint
	$(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=target $(filter-out $(ALONE_TARGETS),$(TEST_TARGETS))
	$(MAKE) --no-print-directory $(filter $(ALONE_TARGETS),$(TEST_TARGETS))

test-shared:
	cd shared && $(GO) test -count=1 -race ./...

clean:
	rm -rf $(BIN) cdk.out
