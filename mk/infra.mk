# infra: the CDK app (its own Go module; cold build ~90 s, so it is NOT in
# RUNTIME_MODULES and `make lint` / `make build` never touch it).
# Included by the top Makefile (`-include mk/*.mk`). See docs/infra.md.
TEST_TARGETS += test-infra

INFRA_ENVS := dev prod
CDK := $(ROOT)/node_modules/.bin/cdk
CFN_LINT ?= cfn-lint
INFRA_OUT := $(ROOT)/cdk.out
# cfn-lint exit status is a bit field: 2 = errors, 4 = warnings, 8 = informational.
# Errors and warnings fail the build; informational findings are printed only.
# W3005 (a DependsOn already implied by a GetAtt) is ignored: CDK itself writes
# those redundant DependsOn (Lambda function -> its role) and they are harmless.
INFRA_LINT_FAIL_MASK := 6
INFRA_LINT_IGNORE := W3005

# Synthesis is offline and credential-free: no credentials, no profile, no
# config files, no IMDS probe (which would hang off EC2), no version check or
# telemetry (exported by the top Makefile).
INFRA_OFFLINE := env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN \
	-u AWS_PROFILE -u AWS_DEFAULT_PROFILE -u AWS_REGION -u AWS_DEFAULT_REGION \
	AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true

.PHONY: infra-assets infra-app synth test-infra lint-infra

## infra-assets: bin/ingest/bootstrap (mk/ingest.mk's build-ingest) for the Lambda asset.
infra-assets: build-ingest

## infra-app: the CDK app binary cdk.json runs (bin/infra) and its assets.
infra-app: infra-assets
	$(GO) build -o $(BIN)/infra ./infra

## synth: cdk.out/<env>/wsfleet-<env>.template.json for every environment, offline.
synth: deps-node infra-app
	@for e in $(INFRA_ENVS); do \
	  echo "cdk synth -c env=$$e -> cdk.out/$$e"; \
	  $(INFRA_OFFLINE) $(CDK) synth --quiet -c env=$$e -o $(INFRA_OUT)/$$e || exit 1; \
	done

## lint-infra: gofmt, go vet, staticcheck and govulncheck (mk/lint.mk) on the infra module.
lint-infra: tools-lint
	@out=$$(gofmt -l infra); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	cd infra && $(GO) vet ./...
	$(call lint-go-tools,infra)

## test-infra: infra unit tests (template assertions), then synth and cfn-lint both templates.
test-infra: lint-infra infra-assets
	cd infra && $(GO) test -count=1 ./...
	$(MAKE) --no-print-directory synth
	@for e in $(INFRA_ENVS); do \
	  t=$(INFRA_OUT)/$$e/wsfleet-$$e.template.json; \
	  echo "cfn-lint $${t#$(ROOT)/}"; \
	  rc=0; $(CFN_LINT) --ignore-checks $(INFRA_LINT_IGNORE) -- "$$t" || rc=$$?; \
	  if [ $$((rc & $(INFRA_LINT_FAIL_MASK))) -ne 0 ] || [ $$rc -eq 1 ] || [ $$rc -gt 15 ]; then \
	    echo "cfn-lint failed on $$t (exit $$rc)"; exit 1; \
	  fi; \
	done
