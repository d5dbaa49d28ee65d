# Two commands matter: `make run` and `make test` (see README.md).
VENV    ?= .venv
PY      := $(VENV)/bin/python
PIP     := $(VENV)/bin/pip
HASH    := $(shell sha1sum < pyproject.toml | cut -c1-12)
# Two stamps per pyproject hash. BASE: the package alone, all `make run` needs. FULL: with the
# test, spark, bench, celery and dramatiq extras, for `make test` and the rest; making it makes BASE too, so
# `make run` after `make test` installs nothing, and `make test` after `make run` adds the extras.
BASE_STAMP := $(VENV)/.installed-base-$(HASH)
FULL_STAMP := $(VENV)/.installed-full-$(HASH)
# pip --quiet still shows setuptools' warnings. An editable install of this layout (package-dir
# maps folders from outside horologe/) always gets the notice "Editable installation ... be
# careful with folders in your working directory": nothing to act on, so it is filtered out.
PIP_INSTALL := PYTHONWARNINGS="ignore:Editable installation" $(PIP) install --quiet
# Drops the stamps of other pyproject versions.
DROP_OLD_STAMPS := find $(VENV) -maxdepth 1 -name '.installed-*' ! -name '*-$(HASH)' -delete
# Debian packages the test suites need: faketime (clock skew), iproute2 (ss, which a test asks
# for a node's sockets), fuse3 (the lazyfs power-loss mounts), and libfuse3-dev + pkg-config,
# without which pip cannot build pyfuse3 (test extra);
# for the compose test, docker.io (dockerd, containerd, runc), debootstrap (a base image
# without a registry) and docker-compose (Debian's, 1.29); prometheus for promtool; chromium and
# chromium-driver, which the dashboard's browser test drives through selenium.
DEB_PACKAGES := faketime iproute2 fuse3 libfuse3-dev pkg-config docker.io debootstrap docker-compose prometheus \
	chromium chromium-driver

.PHONY: help install bytecode test lint unit bench bench-parts run fuzz chaos task-queues soak sim sim-pins compose-check compose-test deb-tools clean

help:
	@echo "make run    - start a local 3-node cluster, show messages scheduled and delivered; Ctrl-C stops it"
	@echo "make test   - install everything the tests need, then lint and run the default suite"
	@echo "make bench  - Horologe against a Redis sorted-set queue at the user's edge (~20 min); ratios"
	@echo "make bench-parts - the component benchmarks (bench/bench_*.py) that explain edge figures"
	@echo "make fuzz   - the API fuzzed against a live cluster, 300 cases per operation (FUZZ_EXAMPLES=N)"
	@echo "make chaos  - every chaos scenario (~15 min), then make task-queues; reports in chaos-report/"
	@echo "make task-queues - Celery and Dramatiq at full size with faults, beside Redis (~15 min)"
	@echo "make soak   - 30 min of mixed load, a fault every 2 min; report in soak-report/"
	@echo "make sim    - the deterministic simulator: SEEDS=N or MINUTES=M of seeds; SEED=S replays one"
	@echo "make sim-pins - every seed the scenario tests pin, with each fix and without (make test: the first)"
	@echo "make compose-check - validate both compose layouts offline and their node command lines"
	@echo "make compose-test - the compose deployment for real: own dockerd, images built offline,"
	@echo "                    3 nodes on the host network, SIGKILL/stop/down-up/isolate; prints timings"
	@echo "make clean  - remove .venv, build leftovers and compiled bytecode"

$(PY):
	@echo "creating $(VENV)"
	@python3 -m venv $(VENV)
	@$(PIP) install --quiet --upgrade pip

# The package alone, timed: no extras and no Debian packages (every dependency has a wheel).
$(BASE_STAMP): pyproject.toml | $(PY)
	@echo "installing horologe and its dependencies into $(VENV) (no extras: make test adds them)"
	@t0=$$(date +%s.%N); $(PIP_INSTALL) -e . && \
		awk -v t0=$$t0 -v t1=$$(date +%s.%N) 'BEGIN { printf "installed in %.1f s\n", t1 - t0 }'
	@$(DROP_OLD_STAMPS); touch $@

# deb-tools first: the test extra's pyfuse3 compiles against libfuse3-dev.
$(FULL_STAMP): pyproject.toml | $(PY) deb-tools
	$(PIP_INSTALL) -e '.[test,spark,bench,celery,dramatiq]'
	$(DROP_OLD_STAMPS); touch $(BASE_STAMP) $@

# Everything the tests, chaos suite and benchmarks need.
install: $(FULL_STAMP)

# Where PYTHONDONTWRITEBYTECODE is set (these machines set it), no process writes bytecode, and
# each of the hundreds of node, simulator and command-line processes a suite starts would compile
# our sources again: about a quarter of a second of CPU each, an eighth of the suite's CPU. Python
# still reads bytecode that is there, so it is compiled once here, beside the sources in the
# __pycache__ folders git ignores; a source changed later is compiled as before, in memory.
SOURCES := horologe storage wheel cluster node pipeline sim testkit chaos_tests bench
bytecode: | $(PY)
	@$(PY) -m compileall -q -j 0 $(SOURCES)

# Installs only what is missing, so a warm machine skips apt entirely. A policy-rc.d that
# answers 101 keeps apt from starting the daemons it installs (docker.io's dockerd would
# make its docker0 bridge on a host with an init system); the compose test starts its own.
deb-tools:
	@missing=""; for p in $(DEB_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		policy=""; if [ ! -e /usr/sbin/policy-rc.d ]; then \
			policy=/usr/sbin/policy-rc.d; printf '#!/bin/sh\nexit 101\n' > $$policy; chmod +x $$policy; \
		fi; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
		status=$$?; [ -z "$$policy" ] || rm -f $$policy; exit $$status; \
	fi

# The import contracts (pyproject's [tool.importlinter]) run on a copy laid out as installed.
lint: install
	$(VENV)/bin/ruff check .
	$(PY) tools/lint_imports.py

# Three workers (pytest-xdist) on two cores, each test to whichever is free: most tests
# spend their time waiting on real node processes, and two workers kept the cores about
# two-thirds busy; then, alone, the tests marked solo, which load both cores on purpose.
test: deb-tools install lint bytecode
	$(VENV)/bin/pytest -q -n 3 --dist worksteal -m "not solo" --durations=25
	$(VENV)/bin/pytest -q -m solo --durations=5

# The API fuzzed deeper than in the default suite: 300 generated cases per operation and mode
# (FUZZ_EXAMPLES=N to choose), against a live 3-node cluster.
fuzz: deb-tools install bytecode
	HOROLOGE_FUZZ_EXAMPLES=$(or $(FUZZ_EXAMPLES),300) $(VENV)/bin/pytest -q -s \
		tests/integration/test_fuzz_api.py::test_every_route_answers_as_its_document_says

# Every fault scenario, each on a fresh cluster; CHAOS_SEED=N repeats a run.
chaos: deb-tools install bytecode
	$(PY) -m chaos_tests.run --out chaos-report $(if $(CHAOS_SEED),--seed $(CHAOS_SEED))
	$(MAKE) --no-print-directory task-queues

# Celery and Dramatiq on Horologe at full size, with faults, beside the same on Redis (~15 min);
# TASK_QUEUES_ARGS="--queue celery --tasks 2000" for a try. Report in task-queues-report/.
task-queues: install bytecode
	@command -v redis-server >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; }
	$(PY) -m bench.task_queues --out task-queues-report $(TASK_QUEUES_ARGS)

# Half an hour of mixed load with a fault every 2 minutes; SOAK_ARGS="--minutes 4" for a try.
soak: deb-tools install bytecode
	$(PY) -m chaos_tests.soak --out soak-report $(SOAK_ARGS)

# Offline: Debian's docker-compose parses the files; the node command lines go through the CLI.
compose-check: deb-tools install
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) deploy/compose_check.py

# The compose test of the default suite alone, its step timings shown (docs/deploy.md).
compose-test: deb-tools install bytecode
	$(VENV)/bin/pytest -q -s tests/deploy/test_compose_deploy.py

# The edge benchmarks (bench/edge/): both systems in one run, Debian's redis-server as the peer.
# BENCH_ARGS="--only hot,lateness" or "--quick" runs part of it.
bench: install bytecode
	@command -v redis-server >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; }
	$(PY) -m bench $(BENCH_ARGS)

bench-parts: install bytecode
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# Starts 3 nodes on 127.0.0.1 (HTTP 8081-8083, Raft 7081-7083), schedules messages at
# +2 s .. +10 s, shows them delivered with their lateness, and runs until Ctrl-C. It installs the
# package alone, and says how long after `make run` began the first delivery came.
# RUN_ARGS="--http-port 9081 --raft-port 9071" moves it where those ports are taken.
run: export RUN_STARTED := $(shell date +%s.%N)
run: $(BASE_STAMP) bytecode
	@$(VENV)/bin/horologe local-cluster --nodes 3 --data data/local --demo --make-run-began $$RUN_STARTED $(RUN_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache .hypothesis
	find $(SOURCES) tests tools -name __pycache__ -type d -prune -exec rm -rf {} +

# The deterministic simulator (sim/, docs/simulator.md): SEEDS=N seeds from START (default 1),
# or MINUTES=M of seeds; NODES=5 for five nodes; CANARY=name takes a fix away (sim/canaries.py);
# SCENARIO=name runs a scripted scenario's steps instead of the drawn faults (sim/scenarios/).
# POWER=1: seeds draw power losses of one node or all, and failed fsyncs, too (sim/disk.py);
# OUT_OF_ORDER=1: a power loss may keep unsynced sectors in no order.
# SERVICE=1: every node runs the whole NodeService, with a producer and consumers (sim/service.py).
# COMMIT_AT_ONCE=1: a leader sends its new commit index right after each apply (pysyncobj's way).
# TIMED_WAITS=1: a node ticks when its tick thread's wait would end, or when a message arrives.
# HOLD=1 (with SERVICE=1): the workload's calls take the routes' master check, with its hold.
# SYNC_INTERVAL_MS=50 (with SERVICE=1): the nodes' sync_interval_ms (default: the node's, 250).
# SCHEDULES=1 (with SERVICE=1): the workload creates, pauses and resumes a recurring schedule.
# LATENESS=1 (with SERVICE=1): a third of the messages carry a lateness policy (drop or dlq).
# RETENTION=1 (with SERVICE=1): retention cuts within a run (ready logs trimmed, the first hour removed).
# PUSH=1 (with SERVICE=1): a push subscription, pushed to a simulated receiver (sim/push.py).
# SEED=S replays one seed in a fresh process and prints the last steps of its trace; KEEP=0,2
# makes only those of its drawn faults (`python -m sim shrink SEED` finds the fewest that fail).
sim: install bytecode
ifdef SEED
	$(PY) -m sim replay $(SEED) $(if $(NODES),--nodes $(NODES)) $(if $(CANARY),--canary $(CANARY)) \
		$(if $(SCENARIO),--scenario $(SCENARIO)) $(if $(POWER),--power-loss) $(if $(SERVICE),--service) \
		$(if $(MEMBERS),--membership) $(if $(SPARES_FIRST),--spares-first) \
		$(if $(COMMIT_AT_ONCE),--commit-at-once) $(if $(OUT_OF_ORDER),--out-of-order) \
		$(if $(TIMED_WAITS),--timed-waits) $(if $(HOLD),--hold) $(if $(SYNC_INTERVAL_MS),--sync-interval-ms $(SYNC_INTERVAL_MS)) \
		$(if $(SCHEDULES),--schedules) $(if $(LATENESS),--lateness) $(if $(RETENTION),--retention) \
		$(if $(PUSH),--push) $(if $(KEEP),--keep $(KEEP))
else
	$(PY) -m sim run $(if $(SEEDS),--seeds $(SEEDS)) $(if $(MINUTES),--minutes $(MINUTES)) \
		$(if $(START),--start $(START)) $(if $(NODES),--nodes $(NODES)) $(if $(CANARY),--canary $(CANARY)) \
		$(if $(SCENARIO),--scenario $(SCENARIO)) $(if $(POWER),--power-loss) $(if $(SERVICE),--service) \
		$(if $(MEMBERS),--membership) $(if $(SPARES_FIRST),--spares-first) $(if $(COMMIT_AT_ONCE),--commit-at-once) \
		$(if $(OUT_OF_ORDER),--out-of-order) $(if $(TIMED_WAITS),--timed-waits) $(if $(HOLD),--hold) \
		$(if $(SYNC_INTERVAL_MS),--sync-interval-ms $(SYNC_INTERVAL_MS)) $(if $(SCHEDULES),--schedules) \
		$(if $(LATENESS),--lateness) $(if $(RETENTION),--retention) $(if $(PUSH),--push)
endif

# Every seed tests/sim/test_scenarios.py pins, with each fix and without it;
# the default suite replays the first seed of each.
sim-pins: install bytecode
	HOROLOGE_SIM_PINS=all $(VENV)/bin/pytest -q -n 2 tests/sim/test_scenarios.py
