# sked — the two commands a newcomer needs are `make run` and `make test`.

CARGO ?= cargo
DATA_DIR ?= ./sked-data
LISTEN ?= 127.0.0.1:8080
WORKERS ?= 4

.PHONY: run build test lint fmt clean bench bench-quick

## Build and start the local server (API + sweeper + workers) on $(LISTEN), data in $(DATA_DIR).
run:
	$(CARGO) run --release -p sked -- server --data-dir $(DATA_DIR) --listen $(LISTEN) --workers $(WORKERS)

## Build everything (debug).
build:
	$(CARGO) build --workspace --all-targets

## Lint (formatting and clippy with warnings as errors), then every test: unit, contract
## suites (in-memory, SQLite, DynamoDB/SQS on moto), API, and end-to-end tests of the real
## binary — locally and, with `sked/aws`, as the AWS deployment on moto (tests/aws_*.rs).
## SKED_SIM_WINDOW: the simulation's moving window of seeds starts where the commit's hash says.
test: lint
	SKED_SIM_WINDOW="$$(git rev-parse HEAD 2>/dev/null)" $(CARGO) test --workspace --no-fail-fast --features sked/aws

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --features sked/aws -- -D warnings

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean

## Benchmarks: build release, run every scenario, print JSON lines and a table.
## Not part of `make test`. BENCH_ARGS passes flags to sked-bench (see `sked-bench --help`).
bench:
	$(CARGO) build --release -p sked -p sked-bench
	$(CARGO) run --release -q -p sked-bench -- $(BENCH_ARGS)

## The same with reduced sizes, in under two minutes.
bench-quick:
	$(CARGO) build --release -p sked -p sked-bench
	$(CARGO) run --release -q -p sked-bench -- --quick $(BENCH_ARGS)

## The ceiling of any PostgreSQL queue on this machine: pgbench against the barest SKIP LOCKED
## queue on a private cluster, durability on (crates/sked-bench/pg-ceiling; not sked: a yardstick
## for the PostgreSQL burst figure). About 40 s.
.PHONY: bench-pg-ceiling
bench-pg-ceiling:
	crates/sked-bench/pg-ceiling/run.sh

## The AWS deployment's figures on moto (not part of `make test`; debug build, as the tests):
## how long a create takes through the API function's event, a per-second cron against a
## one-shot (functions/api/tests/handler.rs, bench_*). moto is not AWS: these figures compare
## sked's work per request before and after a change, not what AWS answers in.
.PHONY: bench-aws
bench-aws: moto
	$(CARGO) test -p sked-fn-api --test handler bench_ -- --ignored --nocapture

## Install moto server (PyPI `moto[server]`) into .venv-moto/ for the AWS adapter's tests
## (crates/sked-aws); idempotent. A prerequisite of `test`.
.PHONY: moto
moto:
	scripts/moto-env.sh
test: moto

## The API contract: schemathesis (PyPI, pinned in scripts/schemathesis-requirements.txt,
## installed into .venv-schemathesis/) against a real `sked server` on a free 127.0.0.1 port
## with a temporary data dir and no workers (nothing generated is ever run), with every
## check, a fixed seed and a bounded number of examples (scripts/schemathesis.sh; what is
## configured and why: scripts/schemathesis.toml). About 30 s. A prerequisite of `test`.
.PHONY: schemathesis
schemathesis:
	CARGO="$(CARGO)" SCHEMATHESIS_EXAMPLES=100 scripts/schemathesis.sh
test: schemathesis

## The web dashboard in a real browser: headless Chromium (Debian's `chromium`, installed by
## apt-get when /usr/bin/chromium is missing) driven by playwright-core (npm, pinned in
## scripts/dashboard/package-lock.json, installed into .tools/dashboard/), against a real
## `sked server` on a free 127.0.0.1 port with a temporary data dir and 2 workers: sign in, a
## run succeeding, a log followed while it prints, pausing a job, the failed runs, a 375 px
## window (scripts/dashboard-test.sh; screenshots in target/dashboard/). About 15 s once
## installed. A prerequisite of `test`.
.PHONY: dashboard-test
dashboard-test:
	CARGO="$(CARGO)" scripts/dashboard-test.sh
test: dashboard-test

## AWS deployment tools: SAM CLI, cfn-lint, cargo-lambda and zig, installed once into
## .venv-aws/ by scripts/aws-tools.sh; their bin directory goes first on PATH for these targets.
AWS_ENV = SAM_CLI_TELEMETRY=0 PATH="$$(scripts/aws-tools.sh):$$PATH"
## Architecture of `make build-lambda`. This machine builds x86_64 only (no aarch64 std);
## template.yaml defaults to arm64 for deployments built elsewhere.
LAMBDA_ARCH ?= x86_64
.PHONY: lint-template build-lambda deploy local-aws

## cfn-lint and `sam validate --lint` on template.yaml (offline; a prerequisite of `test`).
lint-template:
	$(AWS_ENV) cfn-lint template.yaml
	$(AWS_ENV) sam validate --lint --template-file template.yaml
test: lint-template

## The Helm chart (deploy/helm/sked), offline: helm lint and helm template under several sets of
## values, every object against the Kubernetes 1.25 and 1.37 schemas (strict) and KEDA's CRD
## schemas, and the values the chart must refuse (scripts/helm-validate.sh, which installs a
## pinned helm and the schemas into .tools/helm-validate/ once). About a second once installed.
## A prerequisite of `test`.
.PHONY: helm-validate
helm-validate:
	scripts/helm-validate.sh
test: helm-validate

## Build the three Lambda functions with cargo-lambda through SAM (.aws-sam/build), without
## the release profile's debug info (a ~100 MB binary becomes ~20 MB: smaller zip, faster cold start).
build-lambda:
	CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_PROFILE_RELEASE_STRIP=symbols \
	$(AWS_ENV) sam build --beta-features --template-file template.yaml \
		--parameter-overrides Architecture=$(LAMBDA_ARCH)

## Deploy to the AWS account of your credentials; asks for the parameters (not run in CI).
deploy: build-lambda
	$(AWS_ENV) sam deploy --guided --parameter-overrides Architecture=$(LAMBDA_ARCH)

## AWS mode without an account: moto server on 127.0.0.1, the resources, the API, a sweeper
## loop and workers against it (scripts/local-aws.sh; Ctrl-C stops everything).
local-aws:
	scripts/local-aws.sh

## Long reliability runs, not part of `make test`: 100,000 simulation seeds in
## release mode, the 10-minute crash soak with real processes, 5 minutes of each fuzz target,
## and the AWS deployment's 10-minute high-frequency soak (soak-aws).
.PHONY: soak soak-aws
soak:
	SKED_SIM_SEEDS=100000 $(CARGO) test --release -p sked-testkit --test sim -- --nocapture
	$(CARGO) test --release -p sked --test crash_soak -- --ignored --nocapture
	scripts/fuzz.sh 300
	$(MAKE) soak-aws

## The AWS deployment on moto as `make local-aws` runs it (the API function, the sweeper every
## 10 s, 2 `sked worker --backend aws` processes × 4 worker loops) with a per-second cron and
## 100 one-shots for 10 minutes; fails on any API error or timeout, a run that did not
## succeed on its first attempt, a gap or a duplicate, an abandoned attempt; prints create
## latencies, start lags and SQS receives (crates/sked/tests/aws_high_frequency.rs).
soak-aws: moto
	$(CARGO) test -p sked --features aws --test aws_high_frequency -- --ignored --nocapture

## Fuzzing with cargo-fuzz (libFuzzer): the targets in fuzz/ (sked-core's cron, duration and
## timestamp parsers and job validation, each checking properties, not only for panics), run by
## scripts/fuzz.sh, which installs a pinned cargo-fuzz into .tools/ once. `make fuzz` runs each
## target FUZZ_SECONDS and keeps what it finds in fuzz/target/corpus/; failing inputs go to
## fuzz/artifacts/.
FUZZ_SECONDS ?= 60
.PHONY: fuzz fuzz-quick
fuzz:
	scripts/fuzz.sh $(FUZZ_SECONDS)

## 10 s of each target from the committed seeds (fuzz/corpus/) alone: about 50 s once built.
## Not a prerequisite of `test`: a fuzzer's search is random, so a new finding would fail CI
## at random rather than on the change that caused it; `make soak` runs every target 300 s.
fuzz-quick:
	FUZZ_FRESH=1 scripts/fuzz.sh 10
