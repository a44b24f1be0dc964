# The README's commands. `make test` is what .ci/run runs.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := test

# Every module of the workspace: in workspace mode ./... alone covers only
# the root module.
GO_PACKAGES := ./... ./internal/... ./cmd/... ./examples/...

# gotestsum (pinned as a tool of the cmd module) prints each package's
# result as it finishes, and the failures in full, instead of go test's
# output held back package by package.
GOTESTSUM := go tool gotestsum --format pkgname-and-test-fails --format-hide-empty-pkg --

DYNALITE := tools/dynalite/run.sh
# One server state directory per target, so that make test and make
# reliability in the same checkout do not stop each other's server.
DYNALITE_STATE = out/dynalite/$@

# Dummy credentials and region for the local servers; real ones are never
# needed by the tests. IMDS is off so nothing reaches beyond loopback.
LOCAL_AWS_ENV := -u AWS_PROFILE -u AWS_SESSION_TOKEN \
	AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local AWS_REGION=us-east-1 \
	AWS_EC2_METADATA_DISABLED=true AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null

FUZZTIME ?= 30s

.PHONY: test test-short vet fmt-check example fuzz reliability dynalite-start dynalite-stop

# The send-rate limiter's tests in virtual time (sendrate_test.go): one
# goroutine drives a simulated service and clients, so the race detector
# finds nothing there and made them five times as slow (2m39s of CPU
# against 27 s, a quarter of make test's). They run in a pass of their own,
# without -race; a limiter test with goroutines is named otherwise. The
# allocation counts (allocs_test.go) run in that pass too: the race
# detector allocates, and under it they skip.
VIRTUAL_TIME_TESTS := ^(TestSendRate|TestLimiterSim)
NO_RACE_TESTS := $(VIRTUAL_TIME_TESTS)|^TestTheHotPathsAllocateNothing$$

## test: install and start dynalite, run go test -race over every module
## against it (the fault matrix in its short form), then the limiter's
## virtual-time tests and the allocation counts without -race, printing
## each package's result as it finishes, stop it (also when a test fails),
## and exit with the tests' status. -count=1: a second run in the same checkout runs the tests again
## rather than print cached results.
test:
	@endpoint="$$($(DYNALITE) start $(DYNALITE_STATE))"; \
	trap '$(DYNALITE) stop $(DYNALITE_STATE)' EXIT; \
	trap 'exit 130' INT TERM; \
	echo "dynalite listening at $$endpoint"; \
	env $(LOCAL_AWS_ENV) AWS_ENDPOINT_URL_DYNAMODB="$$endpoint" \
		$(GOTESTSUM) -race -count=1 -skip '$(NO_RACE_TESTS)' $(GO_PACKAGES); \
	echo "the send-rate limiter's tests in virtual time and the allocation counts, without -race:"; \
	$(GOTESTSUM) -count=1 -run '$(NO_RACE_TESTS)' .

## reliability: the fault matrix (toxiproxy faults on minidyn and dynalite),
## the end-to-end deadline tests and the Lambda example's tests, verbose, so
## that the matrix's table is printed. make test runs them too, quietly.
RELIABILITY_TESTS := TestFaultMatrix|TestDeadline|TestCancel|TestHandler
reliability:
	@endpoint="$$($(DYNALITE) start $(DYNALITE_STATE))"; \
	trap '$(DYNALITE) stop $(DYNALITE_STATE)' EXIT; \
	trap 'exit 130' INT TERM; \
	echo "dynalite listening at $$endpoint"; \
	env $(LOCAL_AWS_ENV) AWS_ENDPOINT_URL_DYNAMODB="$$endpoint" JITTERRETRY_FAULT_MATRIX=full \
		go test -race -count=1 -v -run '$(RELIABILITY_TESTS)' ./examples/internal/fault ./examples/lambda

## test-short: go test over every module without dynalite (its tests skip).
test-short:
	env -u AWS_ENDPOINT_URL_DYNAMODB go test $(GO_PACKAGES)

## vet: go vet over every module.
vet:
	go vet $(GO_PACKAGES)

## fmt-check: fail when a file is not gofmt-formatted.
fmt-check:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; \
	if [[ -n "$$out" ]]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi

## example: the README's main command.
example:
	go run ./examples/dynamodb

## fuzz: run every fuzz target of every module for FUZZTIME each.
fuzz:
	@for pkg in $$(go list $(GO_PACKAGES)); do \
		for target in $$(go test -list '^Fuzz' "$$pkg" | grep '^Fuzz' || true); do \
			echo "== $$pkg $$target"; \
			go test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) "$$pkg"; \
		done; \
	done

## lambda: run the Lambda example for real, as its test does: built as
## bootstrap, under the Lambda Runtime Interface Emulator (pinned as a tool
## of the examples module), 200 invocations on 8 emulated execution
## environments side by side, against DynamoDB that throttles and stalls;
## prints each invocation, a few log streams and the totals, and fails when
## an invocation timed out or an increment was lost or applied twice.
.PHONY: lambda
lambda:
	go run ./examples/lambda/cmd/emulate

## dynalite-start / dynalite-stop: a server for running tests by hand;
## export the printed URL as AWS_ENDPOINT_URL_DYNAMODB.
dynalite-start:
	@$(DYNALITE) start out/dynalite/manual

dynalite-stop:
	@$(DYNALITE) stop out/dynalite/manual
