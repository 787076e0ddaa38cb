# lint: staticcheck and govulncheck for `make lint` (every runtime module) and
# `make lint-infra`. Included by the top Makefile (`-include mk/*.mk`).
#
# The tools are pinned by the `tool` directives of tools/go.mod, a module of its
# own (not in go.work, so the runtime modules' builds never see its
# dependencies); `go install tool` builds them into bin/ from the module proxy.
#
# govulncheck's default database (vuln.go.dev) is not reachable from where we
# build, so it reads a local one: the OSV files of golang.org/x/vulndb (a
# module on the proxy, pinned in tools/go.mod; bump it with
# `cd tools && GOWORK=off go get golang.org/x/vulndb@latest`), indexed by that
# module's cmd/indexdb into bin/vulndb, built only when missing or when
# tools/go.mod changes.
#
# Findings in the Go standard library are fixed by the toolchain: see
# GO_TOOLCHAIN in the top Makefile.

STATICCHECK := $(BIN)/staticcheck
GOVULNCHECK := $(BIN)/govulncheck
VULNDB := $(BIN)/vulndb
LINT_TOOLS_STAMP := $(BIN)/.lint-tools

.PHONY: tools-lint staticcheck govulncheck

## tools-lint: staticcheck, govulncheck and the local vulnerability database, into bin/.
tools-lint: $(LINT_TOOLS_STAMP) $(VULNDB)/index/db.json

$(LINT_TOOLS_STAMP): tools/go.mod tools/go.sum
	@mkdir -p $(BIN)
	cd tools && GOWORK=off GOBIN=$(BIN) $(GO) install tool
	@touch $@

$(VULNDB)/index/db.json: $(LINT_TOOLS_STAMP)
	@rm -rf $(VULNDB) $(VULNDB).tmp
	osv=$$(cd tools && GOWORK=off $(GO) mod download golang.org/x/vulndb && GOWORK=off $(GO) list -m -f '{{.Dir}}' golang.org/x/vulndb)/data/osv; \
	  $(BIN)/indexdb -vulns "$$osv" -out $(VULNDB).tmp
	mv $(VULNDB).tmp $(VULNDB)

# lint-go-tools DIRS: staticcheck over the module dirs DIRS in one run (the
# workspace resolves them), then govulncheck in each (it wants one module);
# every module is checked before the target fails.
define lint-go-tools
	@rc=0; echo "staticcheck $(1)"; $(STATICCHECK) $(addprefix ./,$(addsuffix /...,$(1))) || rc=1; \
	for m in $(1); do \
	  echo "govulncheck $$m"; (cd $$m && $(GOVULNCHECK) -db file://$(VULNDB) ./...) >$(BIN)/govulncheck.out 2>&1 || { rc=1; cat $(BIN)/govulncheck.out; }; \
	done; exit $$rc
endef
