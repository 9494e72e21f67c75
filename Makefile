# Chime: `make run` and `make test` are all a fresh Debian machine needs (see README.md).
SWIFT ?= swift
# Warnings are errors in every build (Package.swift leaves them out: an app adds the client library
# by version, and SwiftPM refuses unsafe flags there).
STRICT = -Xswiftc -warnings-as-errors
SWIFT_SOURCES = Package.swift Sources Tests
# The fuzz targets (make fuzz) are Swift too: formatted and linted with the rest.
SWIFT_SOURCES += Fuzz

.PHONY: bootstrap build plugin release container-binaries run test lint format bench bench-baseline bench-postgres bench-push bench-backend bench-slots bench-slot-load bench-routing bench-scale bench-small bench-quick bench-maxima bench-history fuzz soak clean

bootstrap:
	@scripts/bootstrap

build: bootstrap plugin
	$(SWIFT) build $(STRICT)

## The broker's device-token plugin (deploy/mosquitto/plugin/chime_auth.c, docs/accounts.md): C against
## Debian's mosquitto-dev headers (plugin API 5), libcrypto. The deploy tests load it into mosquitto.
CC ?= cc
PLUGIN = .build/plugin/chime_auth.so
PLUGIN_CFLAGS = -std=c11 -D_GNU_SOURCE -O2 -g -fPIC -shared -Wall -Wextra -Wshadow -Wconversion -Werror
plugin: bootstrap $(PLUGIN)

$(PLUGIN): deploy/mosquitto/plugin/chime_auth.c
	@mkdir -p $(dir $@)
	$(CC) $(PLUGIN_CFLAGS) -o $@ $< -lcrypto

release: bootstrap
	$(SWIFT) build -c release $(STRICT)

## chimed and chime for deploy/container/Dockerfile.prebuilt (an image without a Swift image to build
## in, docs/production.md "Container and compose"): release, the Swift runtime linked in, in .build/container.
container-binaries: bootstrap
	$(SWIFT) build -c release --static-swift-stdlib $(STRICT) --product chimed
	$(SWIFT) build -c release --static-swift-stdlib $(STRICT) --product chime
	install -D -m 0755 "$$($(SWIFT) build -c release --show-bin-path)/chimed" .build/container/chimed
	install -D -m 0755 "$$($(SWIFT) build -c release --show-bin-path)/chime" .build/container/chime

## Builds release, starts a local mosquitto on 127.0.0.1:1883 (unless one listens) and chimed.
run: release plugin
	@scripts/run-local

## Installs what is missing, builds everything and runs every test: the unit tests, then the
## integration tests (real mosquitto, real chimed) in processes of their own, so that the CPU-bound
## unit tests cannot starve their timeouts: first the worker's (durability, brokers, deploy: the
## ones that time outages), then PostgreSQL's, then the clients' (CLI, docs, libraries), so that fewer
## chimeds share the machine at once. The push tests (libcurl against nghttpd and s_server, chimed
## against the Python push stand-in) have a phase of their own: the stand-in takes a core, which
## would skew the timed outages of the worker's. Last, the Python client's tests, the console in
## headless Chromium (Tests/ConsoleBrowser) and the push stand-in's own (Tests/PushStandin).
## Each phase is a pattern over test target names (swift test matches it against `Target.Suite/test`):
## a target that starts servers or processes is named `…IntegrationTests` (Package.swift) and runs in
## the integration phase that names it; every other test target is a unit target and runs in the
## first. scripts/check-test-phases fails when a test is in no phase or in two.
UNIT_TESTS = --skip '^\w+IntegrationTests\.'
WORKER_TESTS = --filter '^Chime(HTTP|MQTT|Worker|Deploy)IntegrationTests\.'
PUSH_TESTS = --filter '^Chime(HTTPClient|WorkerPush)IntegrationTests\.'
# PostgreSQL's tests wait in libpq's blocking calls (a lock held by another session, for seconds),
# which holds threads of Swift's cooperative pool (two on two cores): in a process of their own, so
# that they cannot starve the clients' tests of it. The Patroni failover's (ChimeWorkerPatroni) are
# PostgreSQL's too: etcd, two Patroni nodes and two chimeds would skew the worker phase's timed outages.
POSTGRES_TESTS = --filter '^Chime(Postgres|PostgresStore|WorkerPatroni)IntegrationTests\.'
CLIENT_TESTS = --filter '^Chime(CLI|Client|WorkerScenario)IntegrationTests\.'

test: bootstrap plugin
	$(SWIFT) build --build-tests $(STRICT)
	scripts/check-test-phases
	$(SWIFT) test --skip-build $(UNIT_TESTS)
	$(SWIFT) test --skip-build $(WORKER_TESTS)
	$(SWIFT) test --skip-build $(PUSH_TESTS)
	$(SWIFT) test --skip-build $(POSTGRES_TESTS)
	$(SWIFT) test --skip-build $(CLIENT_TESTS)
	scripts/test-python
	scripts/test-console-browser -q
	scripts/push-standin --selftest -q

lint:
	$(SWIFT) format lint --strict --recursive --parallel $(SWIFT_SOURCES)
	scripts/check-commits

format:
	$(SWIFT) format --in-place --recursive --parallel $(SWIFT_SOURCES)

clean:
	rm -rf .build

## libFuzzer targets (Fuzz/): the command decoder and engine, the RRULE parser and expansion, the
## read-back of whatever is acknowledged (journal record, snapshot, replay), the metrics endpoint's
## HTTP server (any bytes as a request), each for FUZZ_SECONDS (default 60). New inputs stay in .build/fuzz/corpus, crashes in .build/fuzz/artifacts.
fuzz: bootstrap
	@FUZZ_SECONDS=$${FUZZ_SECONDS:-60} scripts/fuzz

## Longer durability runs than `make test`: SOAK_KILLS kill -9s of chimed under load (default 200)
## and SOAK_MUTATIONS mutated commands (default 30000). A failure prints the seed that replays it.
soak: bootstrap
	$(SWIFT) build --build-tests $(STRICT)
	CHIME_KILLS=$${SOAK_KILLS:-200} CHIME_MUTATIONS=$${SOAK_MUTATIONS:-30000} \
		$(SWIFT) test --skip-build --filter 'DurabilityKillTests|DurabilityMutationTests'
	CHIME_HOSTILE_SECONDS=$${SOAK_HOSTILE_SECONDS:-120} CHIME_HOSTILE_SEEDS=$${SOAK_HOSTILE_SEEDS:-10} \
		$(SWIFT) test --skip-build --filter 'HostileNeighbourTests'

## The performance benchmark (docs/benchmarks.md): starts its own mosquitto and release chimed,
## prints a table, writes bench-results/results.json and plots the lateness to lateness.svg.
## bench-small runs the workloads at a tenth of the size (a few minutes) into quick.json and quick-lateness.svg.
bench: release
	scripts/nats-peer --install
	.build/release/chime-bench system --json bench-results/results.json
	scripts/plot-lateness bench-results/results.json bench-results/lateness.svg

## This build against an earlier chimed in the same run (docs/benchmarks.md): ingest, burst and
## batch, round after round, each figure as this build ÷ the baseline. REF: any commit, tag or branch
## (default: the chimed of 2026-11-30); scripts/build-baseline builds it once into .build/baseline.
REF ?= e3c9362
bench-baseline: release
	.build/release/chime-bench system --only ingest,burst,batch --baseline "$$(scripts/build-baseline $(REF))" \
		--json bench-results/baseline.json

## The same on PostgreSQL: ingest and burst on both stores in one run, then memory, cancel by tag,
## steady lateness and recovery of a million pending on PostgreSQL (docs/benchmarks.md, "In PostgreSQL").
bench-postgres: release
	.build/release/chime-bench system --store postgres --only ingest,burst,steady --json bench-results/store-postgres.json

## Slot mode (docs/benchmarks.md, "Slots"): ingest and burst with 1, 2 and 3 workers on one PostgreSQL, failover
## and hand-over times with 3 (about ten minutes).
bench-slots: release
	.build/release/chime-bench system --only slots --json bench-results/slots.json

## Slot mode, broadcast against routing by slot, 1 to 8 workers: deliveries and CPU a command (docs/benchmarks.md).
bench-routing: release
	.build/release/chime-bench system --only routing --json bench-results/routing.json

## Slot mode's loads (docs/benchmarks.md, "Loading a slot"): a slot of 10,000, 100,000 and 1,000,000 notifications
## taken by a second worker; one worker's start and memory on --slots 1 to 65,536. BENCH_QUICK=1 stops at 100,000 and 4,096.
bench-slot-load: release
	.build/release/chime-bench system --only slot-load $${BENCH_QUICK:+--quick} --json bench-results/slot-load.json

## Push delivery (docs/benchmarks.md, "Push"): 1,000, 10,000 and 100,000 due at one instant pushed to the
## APNs stand-in (Tests/PushStandin), against the same burst without pushes; BENCH_QUICK=1 stops at 10,000.
bench-push: release
	.build/release/chime-bench system --only push $${BENCH_QUICK:+--quick} --json bench-results/push.json

## One ChimeBackend connection against the raw load client, alternating rounds: ok replies/s (docs/benchmarks.md).
bench-backend: release
	.build/release/chime-bench system --only backend $${BENCH_QUICK:+--quick} --json bench-results/backend.json

## The cost curve (docs/benchmarks.md, "At ten million"): the steady workload at 1, 2, 5 and 10 million pending,
## each with a snapshot and a recovery from kill -9; plotted to bench-results/scale.svg (about 40 minutes).
bench-scale: release
	.build/release/chime-bench system --only scale --json bench-results/scale.json
	scripts/plot-scale bench-results/scale.json bench-results/scale.svg

bench-small: release
	scripts/nats-peer --install
	.build/release/chime-bench system --quick --json bench-results/quick.json
	scripts/plot-lateness bench-results/quick.json bench-results/quick-lateness.svg

## The guard before a commit (CONTRIBUTING.md): the loop's CPU a command in process, no broker and no
## disk, in seconds, against the figures recorded for this machine class in docs/bench/hot-path.json.
bench-quick: release
	.build/release/chime-bench hot-path

## The delivery history every device keeps (docs/benchmarks.md, "History"): RSS a device and an entry with
## histories full, and the CPU it adds to a delivery, in process. HISTORY_DEVICES=1000000 for a million.
bench-history: release
	.build/release/chime-bench history --devices $${HISTORY_DEVICES:-100000}

## One command's hold on the loop at the largest values of the limits (docs/benchmarks.md, "Limits at
## their maxima"), in process: bench-results/maxima.json.
bench-maxima: release
	.build/release/chime-bench maxima
