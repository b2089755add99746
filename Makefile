# PocketMQ: `make run` starts a broker with an embedded name server; `make test` passes every test.
# Each creates the virtualenv in $(VENV) from PyPI on first use and installs only what it needs (idempotent):
# `make run` the broker alone (seconds), `make test` adds the test and Spark extras (PySpark and pyarrow, about
# 700 MB), `make check` the checking tools.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
BROKER_STAMP := $(VENV)/.installed-broker
TEST_STAMP := $(VENV)/.installed-test
PIP := $(BIN)/python -m pip install --disable-pip-version-check
DATA_DIR ?= ./data
ARGS ?=

.PHONY: run test check venv java-check etcd browser screenshots bench bench-peers pipeline spark-cluster sim soak fuzz failover chaos clean

venv: $(BROKER_STAMP)

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || \
		{ echo "PocketMQ needs Python 3.11+: $(PYTHON) is $$($(PYTHON) --version 2>&1); run make PYTHON=python3.11 ..."; exit 1; }
	@echo "== creating the virtualenv $(VENV)"
	$(PYTHON) -m venv $(VENV)

$(BROKER_STAMP): pyproject.toml | $(BIN)/python
	@echo "== installing PocketMQ into $(VENV)"
	$(PIP) -e .
	@touch $@

# The tests, and the targets that run Spark (bench, pipeline).
$(TEST_STAMP): $(BROKER_STAMP)
	@echo "== installing the test and Spark extras into $(VENV) (PySpark and pyarrow: about 700 MB, once)"
	$(PIP) -e '.[test,spark]'
	@touch $@

run: $(BROKER_STAMP)
	$(BIN)/pocketmq serve --data-dir $(DATA_DIR) $(ARGS)

# Spark needs Java 17+ (Debian: apt-get install openjdk-17-jre-headless). `make test` without it runs everything but
# the Spark tests and names them as skipped (tests/spark/conftest.py); with CI=true it fails them.
java-check: $(BROKER_STAMP)
	@$(BIN)/python -m pocketmq.testing.java

# The failover tests (docs/failover.md) start a real etcd 3.x. Without one, this installs Debian's etcd-server when
# it can (root and apt-get), else says how; the tests then skip (with CI=true they fail, like Spark without Java).
etcd: $(BROKER_STAMP)
	@$(BIN)/python -m pocketmq.testing.etcd 2>/dev/null || \
		{ if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "== installing etcd-server (apt-get)"; apt-get install -y etcd-server >/dev/null 2>&1 || \
				{ apt-get update >/dev/null && apt-get install -y etcd-server >/dev/null; }; \
		fi; $(BIN)/python -m pocketmq.testing.etcd || echo "== the failover tests will be skipped (they fail with CI=true)"; }

# The web console's browser tests (docs/console.md) drive a headless Chromium with its driver. Without them, this
# installs Debian's chromium and chromium-driver when it can (root and apt-get), else says how; the tests then skip
# (with CI=true they fail, like etcd's).
browser: $(TEST_STAMP)
	@$(BIN)/python -m pocketmq.testing.browser 2>/dev/null || \
		{ if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "== installing chromium and chromium-driver (apt-get, a few minutes)"; \
			apt-get install -y chromium chromium-driver >/dev/null 2>&1 || \
				{ apt-get update >/dev/null && apt-get install -y chromium chromium-driver >/dev/null; }; \
		fi; $(BIN)/python -m pocketmq.testing.browser || echo "== the browser tests will be skipped (they fail with CI=true)"; }

# The console's pictures in docs/img/ (console-*.png): the browser tests save a screenshot of each page.
screenshots: browser
	POCKETMQ_SCREENSHOTS=docs/img $(BIN)/python -m pytest tests/integration/test_console_browser.py

# Static checks (docs/development.md): lint and format (ruff), types (mypy), layers (import-linter).
# mypy checks the Spark modules against the installed PySpark, as CI does after it.
CHECK_STAMP := $(VENV)/.installed-check
$(CHECK_STAMP): $(TEST_STAMP)
	@echo "== installing the checking tools into $(VENV)"
	$(PIP) -e '.[check]'
	@touch $(CHECK_STAMP)

check: $(CHECK_STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples
	$(BIN)/lint-imports
	$(BIN)/mypy

# TEST_WORKERS test processes (pytest-xdist, a test module to one worker whole: tests/conftest.py); 0 runs them in
# this one process.
TEST_WORKERS ?= 3
test: $(TEST_STAMP) etcd browser
	PYSPARK_PYTHON=$(abspath $(BIN)/python) $(BIN)/python -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

# The deterministic simulation (docs/ha.md): SEEDS seeds from FIRST, a summary line, exit 1 on a failure;
# SIM_ARGS passes more flags (e.g. --bug NAME, --flush-latency-ms 50,400).
SEEDS ?= 1000
FIRST ?= 0
SIM_ARGS ?=
sim: $(BROKER_STAMP)
	$(BIN)/python -m pocketmq.testing.sim --seeds $(SEEDS) --first $(FIRST) $(SIM_ARGS)

# The soak (docs/limits.md): a real broker under a steady mixed load (sends, pulls, POP with acks) for SOAK_MINUTES,
# its RSS printed over time; exit 1 when it keeps growing after the warm-up. Not part of `make test`.
SOAK_MINUTES ?= 30
SOAK_ARGS ?=
soak: $(BROKER_STAMP)
	$(BIN)/python -m pocketmq.testing.soak --minutes $(SOAK_MINUTES) $(SOAK_ARGS)

# The protocol fuzzer (tests/integration/test_protocol_fuzz.py) for FUZZ_SECONDS against a real broker; `make test`
# runs a few seconds of it. FUZZ_SEED=<seed> [FUZZ_FIRST=<case>] replays a failure it printed.
FUZZ_SECONDS ?= 300
fuzz: $(TEST_STAMP)
	FUZZ_SECONDS=$(FUZZ_SECONDS) $(BIN)/python -m pytest tests/integration/test_protocol_fuzz.py -q $(PYTEST_ARGS)

# Failovers in a row under the controller (tests/integration/test_failover_repeated_etcd.py, docs/failover.md):
# FAILOVERS kills of the master under SYNC traffic, then the checker; `make test` runs 2 of them. Needs etcd.
FAILOVERS ?= 10
failover: $(TEST_STAMP) etcd
	FAILOVERS=$(FAILOVERS) $(BIN)/python -m pytest -m failover tests/integration -q $(PYTEST_ARGS)

# The real-process fault harness (docs/chaos.md): SEEDS seeds from FIRST (default 2 from 0), or one SEED to
# replay, each DURATION seconds of faults and traffic; CHAOS_ARGS passes more flags (e.g. --kinds kill,partition).
chaos: SEEDS = 2
DURATION ?= 45
SEED ?=
CHAOS_ARGS ?=
chaos: $(BROKER_STAMP)
	$(BIN)/python -m pocketmq.testing.chaos $(if $(SEED),--seed $(SEED),--seeds $(SEEDS) --first $(FIRST)) \
		--duration $(DURATION) $(CHAOS_ARGS)

bench: $(TEST_STAMP)
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# PocketMQ beside its peers (docs/benchmarks.md): the peer benchmarks in PEERS_DIR run PEERS (Redis Streams, NATS
# JetStream; installed by their setup.sh), then bench/peers.py runs the same workloads on PocketMQ, and one table
# gives PocketMQ's ratio to each peer. The peer benchmarks are not part of PocketMQ: without them it runs PocketMQ's
# side alone and says so. PEERS_BENCH_ARGS passes options to bench/peers.py (e.g. --n 20000). Not in `make test`.
PEERS_DIR ?= ../shared/bench-peers
PEERS ?= nats redis
PEERS_WORK ?= $(or $(TMPDIR),/tmp)/bench-peers
PEERS_RESULTS ?= $(PEERS_WORK)/make-bench-peers.jsonl
PEERS_BENCH_ARGS ?=
bench-peers: SHELL := /bin/bash
bench-peers: .SHELLFLAGS := -o pipefail -c
bench-peers: $(BROKER_STAMP)
	@mkdir -p $(PEERS_WORK) && : > $(PEERS_RESULTS); skipped=""; \
	if [ ! -f $(PEERS_DIR)/run_all.sh ]; then \
		skipped="there is no $(PEERS_DIR) (the peer benchmarks; give their folder with PEERS_DIR=...)"; \
	elif [ ! -x $(PEERS_WORK)/venv/bin/python ]; then \
		skipped="$(PEERS_DIR) is not set up: run 'PEERS_WORK=$(abspath $(PEERS_WORK)) bash $(PEERS_DIR)/setup.sh' (as root: it apt-gets the brokers) first"; \
	fi; \
	if [ -n "$$skipped" ]; then echo "== peers SKIPPED: $$skipped; PocketMQ's side alone"; else \
		echo "== peers: $(PEERS) ($(PEERS_DIR)/run_all.sh, a few minutes)"; \
		PEERS_WORK=$(abspath $(PEERS_WORK)) OUT=$(abspath $(PEERS_RESULTS)) bash $(PEERS_DIR)/run_all.sh $(PEERS) || exit 1; \
	fi; \
	echo "== pocketmq: bench/peers.py $(PEERS_BENCH_ARGS)"; \
	$(BIN)/python bench/peers.py $(PEERS_BENCH_ARGS) | tee -a $(PEERS_RESULTS) || exit 1; \
	echo "== PocketMQ's ratio to each peer (all results: $(PEERS_RESULTS))"; \
	$(BIN)/python -m pocketmq.testing.peer_ratios $(PEERS_RESULTS) || exit 1; \
	if [ -n "$$skipped" ]; then echo "== peers SKIPPED: $$skipped"; fi

# The example pipeline of docs/spark.md: orders -> Spark streaming aggregation -> topic + Parquet, checked,
# with a stop and restart of the job halfway. CLUSTER=standalone runs the job on a Spark standalone cluster (a master
# and two workers on 127.0.0.1) instead of local[2].
CLUSTER ?=
pipeline: $(TEST_STAMP) java-check
	cd examples/pipeline && PYSPARK_PYTHON=$(abspath $(BIN)/python) $(abspath $(BIN)/python) run_pipeline.py \
		$(if $(CLUSTER),--cluster $(CLUSTER))

# The long tests on a Spark standalone cluster (docs/spark.md): the example pipeline, and exactly once across a killed
# executor and a restarted driver; about 8 minutes. `make test` runs their short form (executors copy a few messages).
spark-cluster: $(TEST_STAMP) java-check
	PYSPARK_PYTHON=$(abspath $(BIN)/python) $(BIN)/python -m pytest -m spark_cluster tests/spark $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(DATA_DIR)
