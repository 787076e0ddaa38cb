# sam-invoke-cmd: the `sam local invoke` command for the ingest function
# against the template `make synth` writes (docs/infra.md, "sam local
# invoke"). Included by the top Makefile (`-include mk/*.mk`). Printing needs
# neither the SAM CLI nor Docker; running what it prints needs both, and
# nothing in `make test` runs it: the same event files run under the Runtime
# Interface Emulator in test-ingest (functions/ingest/rie_test.go), and
# infra/stacks' TestSamInvokeCommand checks the command against a synthesized
# template.

# Which environment's template (one of INFRA_ENVS).
SAM_ENV ?= dev
# Which event of SAM_EVENTS_DIR, without .json.
SAM_EVENT ?= start
# The --env-vars file giving the function its table and queue (written by
# hand from the deployed stack's outputs: docs/infra.md); gitignored.
SAM_ENV_VARS ?= sam-env.json
# The ingest function's logical id: infra/stacks.IngestLogicalID
# (TestSamInvokeCommand holds the two equal).
SAM_FUNCTION := IngestFunction
SAM_EVENTS_DIR := functions/ingest/testdata/events
SAM_TEMPLATE = $(patsubst $(ROOT)/%,%,$(INFRA_OUT))/$(SAM_ENV)/wsfleet-$(SAM_ENV).template.json

.PHONY: sam-invoke-cmd

## sam-invoke-cmd: print the `sam local invoke` command for the ingest function (SAM_ENV, SAM_EVENT, SAM_ENV_VARS); runs nothing.
sam-invoke-cmd:
	@if [ -z "$(filter $(SAM_ENV),$(INFRA_ENVS))" ]; then \
	  echo "SAM_ENV=$(SAM_ENV): not an environment (known: $(INFRA_ENVS))" >&2; exit 2; fi
	@if [ ! -f "$(SAM_EVENTS_DIR)/$(SAM_EVENT).json" ]; then \
	  echo "SAM_EVENT=$(SAM_EVENT): no $(SAM_EVENTS_DIR)/$(SAM_EVENT).json (known: $(basename $(notdir $(wildcard $(SAM_EVENTS_DIR)/*.json))))" >&2; exit 2; fi
	@echo "# needs the SAM CLI and a Docker engine able to run linux/arm64 images; nothing in make test runs it"
	@echo "# template: make synth (offline, no credentials) writes $(SAM_TEMPLATE)"
	@echo "# $(SAM_ENV_VARS): {\"$(SAM_FUNCTION)\": {\"WSFLEET_TABLE\": \"<stack output TableName>\", \"WSFLEET_QUEUE_URL\": \"<stack output WorkQueueUrl>\"}}"
	@echo "sam local invoke -t $(SAM_TEMPLATE) $(SAM_FUNCTION) -e $(SAM_EVENTS_DIR)/$(SAM_EVENT).json --env-vars $(SAM_ENV_VARS)"
