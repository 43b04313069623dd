# sluice: make demo | make test | make bench
SHELL := /bin/bash
SANDBOX := scripts/sandbox.sh
GO ?= go
DSN = $$($(SANDBOX) env | sed -e "s/^export SLUICE_TEST_DSN='//" -e "s/'$$//")
ALT_DSN = $$(SLUICE_SANDBOX_PROFILE=alt $(SANDBOX) env | sed -e "s/^export SLUICE_TEST_ALT_DSN='//" -e "s/'$$//")
REPLICA_DSNS = $$($(SANDBOX) replicas env | sed -e "s/^export SLUICE_TEST_REPLICA_DSNS='//" -e "s/'$$//")
TLS_DIR = $$($(SANDBOX) tls-dir)
# The report test opens a benchmark report in this headless browser (installed once).
BROWSER = SLUICE_TEST_BROWSER=$$(scripts/browser.sh) SLUICE_TEST_REQUIRE_BROWSER=1

MARIADB11_DSN = $$(SLUICE_SANDBOX_PROFILE=mariadb11 $(SANDBOX) env | sed -e "s/^export SLUICE_TEST_DSN='//" -e "s/'$$//")
MARIADB10_DSN = $$(SLUICE_SANDBOX_PROFILE=mariadb10 $(SANDBOX) env | sed -e "s/^export SLUICE_TEST_DSN='//" -e "s/'$$//")
MARIADB11_REPLICA_DSNS = $$(SLUICE_SANDBOX_PROFILE=mariadb11 $(SANDBOX) replicas env | sed -e "s/^export SLUICE_TEST_REPLICA_DSNS='//" -e "s/'$$//")
MARIADB10_REPLICA_DSNS = $$(SLUICE_SANDBOX_PROFILE=mariadb10 $(SANDBOX) replicas env | sed -e "s/^export SLUICE_TEST_REPLICA_DSNS='//" -e "s/'$$//")

.PHONY: all build demo test test-mariadb test-all unit bench bench-scale bench-ddl bench-mdl bench-availability bench-redo sandbox sandbox-alt sandbox-replicas sandbox-mariadb sandbox-down clean

all: build

build:
	$(GO) build -o bin/sluice ./cmd/sluice
	$(GO) build -o bin/sluice-bench ./bench/cmd/sluice-bench

sandbox:
	@$(SANDBOX) up >/dev/null

sandbox-alt:
	@SLUICE_SANDBOX_PROFILE=alt $(SANDBOX) up >/dev/null

## sandbox-replicas: one replica of the sandbox server (127.0.0.1:13317), cloned from it (scripts/sandbox.sh replicas up 2 adds a second on 13318).
sandbox-replicas: sandbox
	@$(SANDBOX) replicas up 1 >/dev/null

## sandbox-mariadb: MariaDB 11.8 (127.0.0.1:13311) and 10.11 (127.0.0.1:13310), each from its own chroot, each with a replica (13321, 13320).
sandbox-mariadb:
	@SLUICE_SANDBOX_PROFILE=mariadb11 $(SANDBOX) up >/dev/null
	@SLUICE_SANDBOX_PROFILE=mariadb10 $(SANDBOX) up >/dev/null
	@SLUICE_SANDBOX_PROFILE=mariadb11 $(SANDBOX) replicas up 1 >/dev/null
	@SLUICE_SANDBOX_PROFILE=mariadb10 $(SANDBOX) replicas up 1 >/dev/null

sandbox-down:
	@$(SANDBOX) replicas down
	@SLUICE_SANDBOX_PROFILE=mariadb11 $(SANDBOX) replicas down
	@SLUICE_SANDBOX_PROFILE=mariadb10 $(SANDBOX) replicas down
	@$(SANDBOX) down
	@SLUICE_SANDBOX_PROFILE=alt $(SANDBOX) down
	@SLUICE_SANDBOX_PROFILE=mariadb11 $(SANDBOX) down
	@SLUICE_SANDBOX_PROFILE=mariadb10 $(SANDBOX) down

## demo: migrate a 200,000-row table on the sandbox while writers hammer it.
demo: sandbox build
	@SLUICE_TEST_DSN=$(DSN) bin/sluice-bench demo

## test: every test, against the sandbox MySQL 9.7 servers (default and alt profiles, and a replica of the default), with the race detector.
test: sandbox sandbox-alt sandbox-replicas
	$(BROWSER) SLUICE_TEST_DSN=$(DSN) SLUICE_TEST_ALT_DSN=$(ALT_DSN) SLUICE_TEST_REPLICA_DSNS=$(REPLICA_DSNS) SLUICE_TEST_TLS_DIR=$(TLS_DIR) GO=$(GO) scripts/gotest.sh -race -count=1 -timeout 45m ./...

## test-mariadb: every test against MariaDB 11.8 and its replica, then 10.11 and its replica (the sandbox has no alt server of MariaDB: those tests skip, saying so).
test-mariadb: sandbox-mariadb
	$(BROWSER) SLUICE_TEST_DSN=$(MARIADB11_DSN) SLUICE_TEST_REPLICA_DSNS=$(MARIADB11_REPLICA_DSNS) SLUICE_TEST_TLS_DIR=$(TLS_DIR) SLUICE_TEST_NO_EXTRAS="no MariaDB alt server in the sandbox" GO=$(GO) scripts/gotest.sh -race -count=1 -timeout 45m ./...
	$(BROWSER) SLUICE_TEST_DSN=$(MARIADB10_DSN) SLUICE_TEST_REPLICA_DSNS=$(MARIADB10_REPLICA_DSNS) SLUICE_TEST_TLS_DIR=$(TLS_DIR) SLUICE_TEST_NO_EXTRAS="no MariaDB alt server in the sandbox" GO=$(GO) scripts/gotest.sh -race -count=1 -timeout 45m ./...

## test-all: make test, then make test-mariadb.
test-all: test test-mariadb

## unit: the tests that need no server.
unit:
	$(GO) test -race -count=1 ./internal/...

## bench: sluice vs native ALTER vs pt-online-schema-change on a 1,000,000-row sysbench table, idle and under load (replicas down),
## then under load with one fresh replica (lag side by side), and sluice on composite and string keys; the replicas are put back as found.
bench: sandbox build
	@SLUICE_TEST_DSN=$(DSN) bin/sluice-bench run --pt-osc "$(SANDBOX) pt-osc" --replicas "$(SANDBOX) replicas" $(BENCH_ARGS)

## bench-scale: sluice's idle change on 1M, 5M and 10M-row tables beside the server's own rebuild, and a skewed BIGINT key.
bench-scale: sandbox build
	@SLUICE_TEST_DSN=$(DSN) bin/sluice-bench scale --replicas "$(SANDBOX) replicas" $(BENCH_ARGS)

## bench-availability: a rate-limited write load through a column widening (INT to BIGINT, VARCHAR(60) to VARCHAR(120)) for native ALTER, sluice and pt-online-schema-change: writes and p99 a second (report in bench/out/availability.html).
bench-availability: sandbox build
	@SLUICE_TEST_DSN=$(DSN) bin/sluice-bench availability --pt-osc "$(SANDBOX) pt-osc" $(BENCH_ARGS)

## bench-redo: innodb_log_writer_threads ON and OFF x binlog on and off (the sandbox restarts itself in each mode) x concurrency, update-heavy and read-write (report in bench/out/redo.html).
bench-redo: sandbox build
	@SLUICE_TEST_DSN=$(DSN) bin/sluice-bench redo --binlog-off "SLUICE_SANDBOX_BINLOG=off $(SANDBOX) up" --binlog-on "$(SANDBOX) up" --replicas "$(SANDBOX) replicas" $(BENCH_ARGS)

## bench-ddl: sweep the InnoDB parallel index-build settings for one and three indexes, beside the planner's choice.
bench-ddl: sandbox build
	@SLUICE_TEST_DSN=$(DSN) bin/sluice-bench ddl $(BENCH_ARGS)

## bench-mdl: a 100 s SELECT ... SLEEP() holds the table while 8 readers query it: worst reader latency and queue under native ALTER, sluice and pt-online-schema-change.
bench-mdl: sandbox build
	@SLUICE_TEST_DSN=$(DSN) bin/sluice-bench mdl --pt-osc "$(SANDBOX) pt-osc" $(BENCH_ARGS)

clean:
	rm -rf bin
