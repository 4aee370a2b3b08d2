# sked — the two commands a newcomer needs are `make run` and `make test`.

CARGO ?= cargo
DATA_DIR ?= ./sked-data
LISTEN ?= 127.0.0.1:8080
WORKERS ?= 4

.PHONY: run build test lint fmt clean

## Build and start the local server (API + sweeper + workers) on $(LISTEN), data in $(DATA_DIR).
run:
	$(CARGO) run --release -p sked -- server --data-dir $(DATA_DIR) --listen $(LISTEN) --workers $(WORKERS)

## Build everything (debug).
build:
	$(CARGO) build --workspace --all-targets

## Lint (formatting and clippy with warnings as errors), then every test: unit, contract
## suites (in-memory and SQLite), API, and end-to-end tests of the real binary.
test: lint
	$(CARGO) test --workspace --no-fail-fast

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
