# testkit: the test harness, its own module (github.com/wsfleet/wsfleet/testkit):
# the seq-numbered feed (and bin/feed, built by mk/devstack.mk), the local
# engines, the DynamoDB model (testkit/dynamodel), the process supervisor, the
# freezing TCP proxy and the test waits.
# The tests of shared, ingest and the worker, and scripts/, import it; no
# shipped binary does (shared/archtest).
# Included by the top Makefile (`-include mk/*.mk`).
RUNTIME_MODULES += testkit
TEST_TARGETS += test-testkit

.PHONY: test-testkit

## test-testkit: the harness's own tests (the engines' from the pinned node_modules).
test-testkit: deps
	cd testkit && $(GO) test -count=1 -race ./...
