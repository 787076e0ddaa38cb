# stress: every runtime module's tests with -race -count=N while a CPU hog
# keeps one core busy (a loaded CI runner), to shake out timing-dependent
# tests. Every module runs even after one fails; the summary names the
# failing ones. The chaos-tagged short chaos run (one real stack, ~100 s) is
# not repeated here: `make test` runs it. Not part of `make test`. Included
# by the top Makefile.
#
#   make stress                 N = 10
#   make stress STRESS_COUNT=3 STRESS_MODULES=shared
STRESS_COUNT ?= 10
STRESS_MODULES ?= $(RUNTIME_MODULES)
STRESS_TIMEOUT ?= 90m

.PHONY: stress

## stress: go test -race -count=$(STRESS_COUNT) of every runtime module, one core kept busy.
stress: deps tools-websocketd tools-rie devstack-bins
	@yes >/dev/null & hog=$$!; trap 'kill $$hog 2>/dev/null' EXIT; \
	echo "stress: -race -count=$(STRESS_COUNT), one core kept busy by yes(1), pid $$hog"; \
	failed=; for m in $(STRESS_MODULES); do \
	  echo "== $$m"; \
	  (cd $$m && $(GO) test -race -count=$(STRESS_COUNT) -timeout $(STRESS_TIMEOUT) ./...) || failed="$$failed $$m"; \
	done; \
	if [ -n "$$failed" ]; then echo "stress: FAILED in:$$failed"; exit 1; fi; echo "stress: every module passed $(STRESS_COUNT) times"
