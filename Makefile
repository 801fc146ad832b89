# holdfast build. `make` builds the release binaries into build/; `make test` builds
# a sanitizer (address,undefined) copy into build/san/ and runs unit, fuzz-corpus and
# broker-backed integration tests. Dependencies come from pkg-config; whatever is missing
# is installed first (see deps-check).

CC      ?= cc
PKGS    := rdkafka rocksdb avro-c jansson libmicrohttpd gnutls libcrypto libcurl
BUILD   ?= build
SAN_BUILD := $(BUILD)/san

WARN    := -Wall -Wextra -Wshadow -Wformat=2 -Wstrict-prototypes -Wmissing-prototypes \
           -Wno-unused-parameter -Werror
# Layers point one way, and each directory sees only the layers below it:
#   common/   errors, limits, asserts, clock, logging (includes nothing of ours)
#   schemas/  records and the Avro codec        (common)
#   state/    the RocksDB store                 (common)
#   processor/, tools/, tests/                  (everything)
# A lower layer that includes a higher header fails to compile.
COMMON_INCS    := -Icommon
SCHEMAS_INCS   := -Icommon -Ischemas -I$(BUILD)/gen
STATE_INCS     := -Icommon -Istate
INCS           := -Icommon -Ischemas -Istate -Iprocessor -Itools -I$(BUILD)/gen
CFLAGS_BASE     = -std=c11 -D_GNU_SOURCE -g $(WARN) $(INCS) -MMD -MP
# librdkafka: the project's own static build of a pinned release (tools/librdkafka.sh
# builds it into .cache/ on first use; its rdkafka-static.pc names the archive and the
# Debian libraries it needs), or a system librdkafka >= 2.12 that pkg-config finds.
# HOLDFAST_RDKAFKA=own|system forces the choice; system takes an older one too, e.g.
# Debian's 2.0.2 for an A/B run: make HOLDFAST_RDKAFKA=system BUILD=build/rdk-system release
HOLDFAST_RDKAFKA ?= auto
export HOLDFAST_RDKAFKA
RDKAFKA_PC_DIR := $(shell HOLDFAST_RDKAFKA='$(HOLDFAST_RDKAFKA)' bash tools/librdkafka.sh --pc-dir)
ifneq ($(RDKAFKA_PC_DIR),)
RDKAFKA_ORIGIN := own
RDKAFKA_PC     := rdkafka-static
ifeq ($(findstring $(RDKAFKA_PC_DIR),$(PKG_CONFIG_PATH)),)
export PKG_CONFIG_PATH := $(RDKAFKA_PC_DIR)$(if $(PKG_CONFIG_PATH),:$(PKG_CONFIG_PATH))
endif
else
RDKAFKA_ORIGIN := system
RDKAFKA_PC     := rdkafka
endif
# $(shell) does not see exported variables (GNU make 4.3), so the path is passed inline.
# The own build's headers are system headers, as /usr/include's are: -Wextra's warnings
# about librdkafka's own declarations are not ours to fix.
PKG_CONFIG  := PKG_CONFIG_PATH='$(PKG_CONFIG_PATH)' pkg-config
# The include directory as the .pc file names it (its prefix is where the build was made,
# which differs from RDKAFKA_PC_DIR when .cache is a symlink: a worktree, make deb's copy).
RDKAFKA_INC = $(if $(RDKAFKA_PC_DIR),$(shell $(PKG_CONFIG) --variable=includedir $(RDKAFKA_PC) 2>/dev/null))
PKG_CFLAGS = $(patsubst -I$(RDKAFKA_INC),-isystem $(RDKAFKA_INC),$(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null))
PKG_LIBS   = $(shell $(PKG_CONFIG) --libs $(RDKAFKA_PC) $(filter-out rdkafka,$(PKGS)) 2>/dev/null) -lpthread -lm

OPT_CFLAGS := -O2
SAN_CFLAGS := -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined

# Library sources: everything under processor/, schemas/, state/ and tools/lib
# except the files that hold a main().
MAIN_SRCS := processor/main.c tools/hfctl.c tools/hfbench.c
LIB_SRCS  := $(filter-out $(MAIN_SRCS) $(LIB_EXCLUDE),$(wildcard common/*.c processor/*.c processor/*/*.c schemas/*.c state/*.c tools/lib/*.c))
GEN_SRC   := $(BUILD)/gen/schemas_gen.c
SCHEMAS   := $(sort $(wildcard schemas/*.avsc))
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
ITEST_SRCS := $(wildcard tests/integration/itest_*.c)
TESTLIB_SRCS := $(wildcard tests/lib/*.c)

objs = $(patsubst %.c,$(1)/obj/%.o,$(2))

# Keep intermediate objects (test and bench objects are otherwise deleted).
.SECONDARY:

.PHONY: all release san deps deps-check test test-unit test-fuzz-corpus test-integration \
        test-faults fuzz lint format format-check clean demo bench-counter bench-aggregator bench-gateway bench-gateway-cpu \
        bench-pipeline bench-hot bench-flash bench-scale bench-expiry bench-holds test-bench-pipeline help
all: deps-check release

help:
	@echo "make            build build/holdfast and build/hfctl"
	@echo "make test       unit + fuzz corpus + CLI + integration + secured-cluster + crash + Debian package tests (starts a broker if none answers)"
	@echo "make lint / format-check   cppcheck + clang-tidy (fail on any warning) / clang-format-14"
	@echo "make demo       broker, topics, processor, a burst of holds, a verdict"
	@echo "make kafka-up / kafka-down   local Apache Kafka (KRaft) on 127.0.0.1:9092"
	@echo "make test-faults-cluster     broker, controller and network faults on a local 3-broker cluster"
	@echo "make deps       install missing Debian packages, build the pinned librdkafka (every build target does this itself)"
	@echo "make deb        build/deb/holdfast_*.deb (debian/), lintian-clean; make test-deb runs it against the broker"

deps:
	bash tools/deps.sh
	bash tools/librdkafka.sh

# Installs what the build lacks, then checks it: Debian packages through tools/deps.sh
# (called only when pkg-config misses a library, so a complete machine makes no apt call),
# librdkafka through tools/librdkafka.sh (a no-op once its stamp matches the pins). Every
# compile waits for it (order-only through $(RDKAFKA_SIG) and $(VERSION_H)), so `make`,
# `make test` and each build or test target install what is missing first.
deps-check:
	@for p in $(filter-out rdkafka,$(PKGS)) cmocka; do pkg-config --exists $$p 2>/dev/null || { \
	  bash tools/deps.sh build || exit 1; break; }; done
	@bash tools/librdkafka.sh
	@for p in $(PKGS) cmocka; do pkg-config --exists $$p || { \
	  echo "missing library '$$p' (pkg-config) after tools/deps.sh build and tools/librdkafka.sh" >&2; exit 1; }; done

# Which librdkafka the objects are built against and linked with: rewritten only when
# that changes (the choice, its version, flags or build stamp), and then every object is
# rebuilt, so a build never mixes one librdkafka's headers with another's library.
RDKAFKA_SIG := $(BUILD)/gen/rdkafka.sig
$(RDKAFKA_SIG): FORCE | deps-check
	@mkdir -p $(dir $@)
	@{ echo "$(RDKAFKA_ORIGIN) $$(pkg-config --modversion rdkafka)"; echo '$(PKG_CFLAGS)'; echo '$(PKG_LIBS)'; \
	  cat "$(RDKAFKA_PC_DIR)/../../.stamp" 2>/dev/null || true; } > $@.tmp; \
	  if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi

# ---- generated version header: holdfast's version (git describe; HF_VERSION=...
# overrides; the fallback when built outside git) and the library versions built
# against. Rewritten only when its text changes, so a build without a new commit
# recompiles nothing.
HF_VERSION_FALLBACK := 0.0.0-unknown
HF_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo $(HF_VERSION_FALLBACK))
VERSION_H := $(BUILD)/gen/hf_version_gen.h
.PHONY: FORCE
$(VERSION_H): FORCE | deps-check
	@mkdir -p $(dir $@)
	@{ echo '/* generated by the Makefile: do not edit */'; \
	  echo '#define HF_VERSION "$(HF_VERSION)"'; \
	  echo '#define HF_RDKAFKA_BUILD_VERSION "'"$$(pkg-config --modversion rdkafka 2>/dev/null || echo unknown)"'"'; \
	  echo '#define HF_RDKAFKA_OWN_BUILD $(if $(filter own,$(RDKAFKA_ORIGIN)),1,0)'; \
	  echo '#define HF_ROCKSDB_BUILD_VERSION "'"$$(pkg-config --modversion rocksdb 2>/dev/null || echo unknown)"'"'; \
	  echo '#define HF_AVRO_BUILD_VERSION "'"$$(pkg-config --modversion avro-c 2>/dev/null || echo unknown)"'"'; \
	} > $@.tmp; if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
$(BUILD)/obj/processor/hf_version.o $(SAN_BUILD)/obj/processor/hf_version.o: $(VERSION_H)

# ---- generated schema table
$(GEN_SRC): $(SCHEMAS) tools/embed-schemas.sh
	@mkdir -p $(dir $@)
	bash tools/embed-schemas.sh $(SCHEMAS) > $@.tmp && mv $@.tmp $@

# Per-layer include paths (target-specific, so they reach CFLAGS_BASE).
$(BUILD)/obj/common/%.o $(SAN_BUILD)/obj/common/%.o: INCS := $(COMMON_INCS)
$(BUILD)/obj/schemas/%.o $(SAN_BUILD)/obj/schemas/%.o $(BUILD)/obj/gen/%.o $(SAN_BUILD)/obj/gen/%.o: INCS := $(SCHEMAS_INCS)
$(BUILD)/obj/state/%.o $(SAN_BUILD)/obj/state/%.o: INCS := $(STATE_INCS)

# ---- release build
REL_LIB_OBJS := $(call objs,$(BUILD),$(LIB_SRCS) $(GEN_SRC:$(BUILD)/%=%))
release: $(BUILD)/holdfast $(BUILD)/hfctl $(BUILD)/hfbench

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c $(RDKAFKA_SIG)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"; $(CC) $(CFLAGS_BASE) $(OPT_CFLAGS) $(PKG_CFLAGS) -c $< -o $@
$(BUILD)/obj/%.o: %.c $(GEN_SRC) $(RDKAFKA_SIG)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"; $(CC) $(CFLAGS_BASE) $(OPT_CFLAGS) $(PKG_CFLAGS) -c $< -o $@
$(BUILD)/libhf.a: $(REL_LIB_OBJS)
	@rm -f $@; ar rcs $@ $^
$(BUILD)/holdfast: $(BUILD)/obj/processor/main.o $(BUILD)/libhf.a
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)
$(BUILD)/hfctl: $(BUILD)/obj/tools/hfctl.o $(BUILD)/libhf.a
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)
$(BUILD)/hfbench: $(BUILD)/obj/tools/hfbench.o $(BUILD)/libhf.a
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)
# The fault suites' forger of violations (tests/faults/hfplant.c): a test tool, not
# shipped (not in release, so not in the runtime image).
$(BUILD)/hfplant: $(BUILD)/obj/tests/faults/hfplant.o $(BUILD)/libhf.a
	$(CC) -o $@ $^ $(PKG_LIBS)

# ---- sanitizer build (tests)
SAN_LIB_OBJS := $(call objs,$(SAN_BUILD),$(LIB_SRCS) $(GEN_SRC:$(BUILD)/%=%))
san: $(SAN_BUILD)/holdfast $(SAN_BUILD)/hfctl

$(SAN_BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c $(RDKAFKA_SIG)
	@mkdir -p $(dir $@)
	@echo "  CC san  $<"; $(CC) $(CFLAGS_BASE) $(SAN_CFLAGS) $(PKG_CFLAGS) -c $< -o $@
$(SAN_BUILD)/obj/%.o: %.c $(GEN_SRC) $(RDKAFKA_SIG)
	@mkdir -p $(dir $@)
	@echo "  CC san  $<"; $(CC) $(CFLAGS_BASE) $(SAN_CFLAGS) $(PKG_CFLAGS) -Itests/lib -c $< -o $@
$(SAN_BUILD)/libhf.a: $(SAN_LIB_OBJS)
	@rm -f $@; ar rcs $@ $^
$(SAN_BUILD)/holdfast: $(SAN_BUILD)/obj/processor/main.o $(SAN_BUILD)/libhf.a
	$(CC) -fsanitize=address,undefined -o $@ $^ $(PKG_LIBS)
$(SAN_BUILD)/hfctl: $(SAN_BUILD)/obj/tools/hfctl.o $(SAN_BUILD)/libhf.a
	$(CC) -fsanitize=address,undefined -o $@ $^ $(PKG_LIBS)

SAN_TESTLIB_OBJS := $(call objs,$(SAN_BUILD),$(TESTLIB_SRCS))
UNIT_BINS  := $(patsubst tests/unit/%.c,$(SAN_BUILD)/tests/%,$(UNIT_SRCS))
ITEST_BINS := $(patsubst tests/integration/%.c,$(SAN_BUILD)/tests/%,$(ITEST_SRCS))
$(SAN_BUILD)/tests/%: $(SAN_BUILD)/obj/tests/unit/%.o $(SAN_TESTLIB_OBJS) $(SAN_BUILD)/libhf.a
	@mkdir -p $(dir $@)
	$(CC) -fsanitize=address,undefined -o $@ $^ $(PKG_LIBS) -lcmocka
# Handler tests run on the fake stage; only they link it (it defines the stage_*
# functions processor/task.c defines too). A static pattern rule, so it wins.
UNIT_FAKE_BINS := $(filter $(SAN_BUILD)/tests/test_%_handlers,$(UNIT_BINS))
$(UNIT_FAKE_BINS): $(SAN_BUILD)/tests/%: $(SAN_BUILD)/obj/tests/unit/%.o $(SAN_BUILD)/obj/tests/unit/fake/fake_stage.o $(SAN_TESTLIB_OBJS) $(SAN_BUILD)/libhf.a
	@mkdir -p $(dir $@)
	$(CC) -fsanitize=address,undefined -o $@ $^ $(PKG_LIBS) -lcmocka
$(SAN_BUILD)/tests/itest_%: $(SAN_BUILD)/obj/tests/integration/itest_%.o $(SAN_TESTLIB_OBJS) $(SAN_BUILD)/libhf.a
	@mkdir -p $(dir $@)
	$(CC) -fsanitize=address,undefined -o $@ $^ $(PKG_LIBS) -lcmocka

# The fuzz target linked with a replay main: every file of its corpus runs once.
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_REPLAY_BINS := $(patsubst tests/fuzz/%.c,$(SAN_BUILD)/tests/replay_%,$(FUZZ_SRCS))
$(SAN_BUILD)/tests/replay_%: $(SAN_BUILD)/obj/tests/fuzz/%.o $(SAN_BUILD)/obj/tests/fuzz/replay_main.o $(SAN_BUILD)/libhf.a
	@mkdir -p $(dir $@)
	$(CC) -fsanitize=address,undefined -o $@ $^ $(PKG_LIBS)

# Benchmarks: drivers built like tests, the measured binary is the release build.
$(SAN_BUILD)/tests/bench_%: $(SAN_BUILD)/obj/tests/bench/bench_%.o $(SAN_TESTLIB_OBJS) $(SAN_BUILD)/libhf.a
	@mkdir -p $(dir $@)
	$(CC) -fsanitize=address,undefined -o $@ $^ $(PKG_LIBS) -lcmocka
bench-counter: deps-check release $(SAN_BUILD)/tests/bench_counter
	@LSAN_OPTIONS=use_unaligned=1 HOLDFAST_BIN=$(BUILD)/holdfast $(SAN_BUILD)/tests/bench_counter

bench-gateway: deps-check release $(SAN_BUILD)/tests/bench_gateway
	@LSAN_OPTIONS=use_unaligned=1 HOLDFAST_BIN=$(BUILD)/holdfast $(SAN_BUILD)/tests/bench_gateway

bench-aggregator: deps-check release $(SAN_BUILD)/tests/bench_aggregator
	@LSAN_OPTIONS=use_unaligned=1 HOLDFAST_BIN=$(BUILD)/holdfast $(SAN_BUILD)/tests/bench_aggregator

# The gateway's instructions per reservation lifecycle (tests/bench/bench_gateway_cpu.c):
# the real handlers over the fake stage, release (-O2) objects, counted by callgrind
# (only handlers, ticks and batch writes are collected). BENCH_N (default 20000);
# BENCH_VALGRIND=0 prints wall-clock figures instead.
BENCH_N ?= 20000
BENCH_VALGRIND ?= 1
$(BUILD)/bench_gateway_cpu: $(BUILD)/obj/tests/bench/bench_gateway_cpu.o $(BUILD)/obj/tests/unit/fake/fake_stage.o $(BUILD)/libhf.a
	$(CC) -o $@ $^ $(PKG_LIBS) -lcmocka
bench-gateway-cpu: deps-check $(BUILD)/bench_gateway_cpu
	@if [ "$(BENCH_VALGRIND)" = 1 ]; then \
	  valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file=$(BUILD)/callgrind.gwcpu.out \
	    $(BUILD)/bench_gateway_cpu $(BENCH_N) 2>$(BUILD)/callgrind.gwcpu.log && \
	  ir=$$(callgrind_annotate $(BUILD)/callgrind.gwcpu.out 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",","",$$1); print $$1}') && \
	  echo "  collected Ir $$ir: $$((ir / $(BENCH_N))) instructions per lifecycle (callgrind_annotate $(BUILD)/callgrind.gwcpu.out)"; \
	else $(BUILD)/bench_gateway_cpu $(BENCH_N); fi

# RocksDB state as a large seed drives it, no Kafka (tests/bench/bench_state.c):
# keys/s and bytes read a key as the state outgrows the block cache, then point reads.
# Env: BENCH_STATE_KEYS (default 10000000), BENCH_STATE_DIR, BENCH_STATE_CACHE_MIB.
$(BUILD)/bench_state: $(BUILD)/obj/tests/bench/bench_state.o $(BUILD)/libhf.a
	$(CC) -o $@ $^ $(PKG_LIBS)
.PHONY: bench-state
bench-state: deps-check $(BUILD)/bench_state
	@$(BUILD)/bench_state

# The full pipeline at a ladder of rates, the broker's ceiling beside it, an overload
# run; A/B over several holdfast builds (tests/bench/pipeline.py, docs/PERFORMANCE.md).
# Env: BENCH_RATES, BENCH_SECONDS, BENCH_BUILDS, BENCH_ROUNDS, BENCH_KEEP_TOPICS, ...
$(BUILD)/pipeline-topics: $(BUILD)/obj/tests/bench/pipeline_topics.o $(BUILD)/libhf.a
	$(CC) -o $@ $^ $(PKG_LIBS)
bench-pipeline: deps-check release $(BUILD)/pipeline-topics
	@python3 tests/bench/pipeline.py

# A flash sale on a large doorbuster (20,000 shoppers in 2 s for 5,000 units by default):
# the default config, direct and escrow pinned, builds compared (BENCH_BUILDS), alternating;
# BENCH_COLD=1 adds a default run per build on a restarted local broker (tests/bench/flash_sale.py).
.PHONY: bench-flash
bench-flash: deps-check release $(BUILD)/pipeline-topics
	@python3 tests/bench/flash_sale.py

# 40 concurrent one-unit reserves against 100 units on a warm broker, BENCH_ROUNDS rounds on
# the same topics: HELD / BUSY / REJECTED and latency per round (tests/bench/burst.py).
.PHONY: bench-burst
bench-burst: deps-check release $(BUILD)/pipeline-topics
	@python3 tests/bench/burst.py

# One hot pair (BENCH_HOT_WAREHOUSES=5: one SKU over 5 warehouses), direct against
# escrow side by side in one run: the same build, escrow_skus set for "escrow" only
# (docs/ESCROW.md), and "direct-unpaced" as the control (direct with transaction pacing
# off, its lowest-latency form). Env as bench-pipeline's; BENCH_RATES a hot ladder.
.PHONY: bench-hot
bench-hot: deps-check release $(BUILD)/pipeline-topics
	@BENCH_SKUS=1 BENCH_PER_SKU=$${BENCH_HOT_WAREHOUSES:-1} BENCH_STOCK=$${BENCH_STOCK:-1000000} \
	  BENCH_RATES="$${BENCH_RATES:-500 1000 2000 4000 8000}" BENCH_OVERLOAD_SECONDS=$${BENCH_OVERLOAD_SECONDS:-0} \
	  BENCH_BUILDS="direct=$(BUILD)/holdfast direct-unpaced=$(BUILD)/holdfast escrow=$(BUILD)/holdfast" \
	  BENCH_BUILD_CONFIG='{"direct": {"escrow_auto_reserves_s": 0}, "direct-unpaced": {"escrow_auto_reserves_s": 0, "counter_txn_period_max_ms": 0, "gateway_txn_period_max_ms": 0}, "escrow": {"escrow_skus": "SKU-00000"}}' \
	  python3 tests/bench/pipeline.py

# The pipeline on a large catalog next to a 10,000-SKU one (tests/bench/scale.py):
# seed rate, RSS and RocksDB size per stage, reserve p50/p99, a full counter restore's
# records/s, reconcile time and memory. SCALE_PAIRS (default 1000000), SCALE_PER_SKU, ...
.PHONY: bench-scale
bench-scale: deps-check release $(BUILD)/pipeline-topics
	@python3 tests/bench/scale.py

# A mass expiry (M holds lapsing within the same 60 s) while 1,000 reserves/s go on:
# expiry lag per second and reserve p99 before and during it (tests/bench/expiry.py).
.PHONY: bench-expiry
bench-expiry: deps-check release $(BUILD)/pipeline-topics
	@python3 tests/bench/expiry.py

# Many open holds at once (HOLDS_N, default 10M, ~1 hour to build at 3,000/s): RSS and
# state per stage and per hold, reserve p99 with them open against none, restores of a
# counter and a gateway, reconcile (tests/bench/holds.py).
.PHONY: bench-holds
bench-holds: deps-check release $(BUILD)/pipeline-topics
	@python3 tests/bench/holds.py

# The HTTP front against the same load sent to Kafka directly (tests/bench/http_front.py),
# and a front serving TLS against the plain one in the same run (front CPU per request
# from /proc/<pid>/stat, p99; BENCH_HTTP_TLS=0 skips it): BENCH_HTTP_RATES (default
# "500 2000"), BENCH_SECONDS. Needs the broker, wrk and openssl.
.PHONY: bench-http
bench-http: deps-check release $(BUILD)/pipeline-topics
	@command -v wrk >/dev/null || { echo "bench-http needs wrk: bash tools/deps.sh http" >&2; exit 1; }
	@python3 tests/bench/http_front.py

# The same bench in its quick form (one low rate, short runs): proves the tool works
# end to end and its JSON is complete. Part of `make test`; the ladder is not.
test-bench-pipeline: deps-check release $(BUILD)/pipeline-topics
	@bash tests/bench/test_pipeline.sh

test-unit: deps-check $(UNIT_BINS)
	@set -e; for t in $(UNIT_BINS); do echo "== $$t"; LSAN_OPTIONS=use_unaligned=1 $$t; done

test-fuzz-corpus: deps-check $(FUZZ_REPLAY_BINS)
	@set -e; for t in $(FUZZ_REPLAY_BINS); do n=$${t##*/replay_}; echo "== $$t (corpus tests/fuzz/corpus/$$n)"; \
	  LSAN_OPTIONS=use_unaligned=1 $$t tests/fuzz/corpus/$$n; done

test-integration: deps-check san $(BUILD)/holdfast $(BUILD)/hfctl $(BUILD)/hfbench $(ITEST_BINS)
	@bash tests/integration/run.sh $(ITEST_BINS)

# Structure of docker-compose.yml, Dockerfile, .dockerignore; nothing is built or run
# (no Docker engine here). Needs python3 with PyYAML (tools/deps.sh python).
.PHONY: test-docker
test-docker:
	@bash tests/docker/test_compose.sh

# Crash suite (tests/faults/run.sh): kill -9 under load, broker restart, partitions
# moving between two processors; each scenario ends with hfctl reconcile PASS. Needs
# the broker (make kafka-up). The full form restarts that broker (about 5 min); the
# quick form (about 2 min, in `make test`) leaves it alone.
.PHONY: test-faults-quick
test-faults: deps-check release $(BUILD)/hfplant
	@bash tests/faults/run.sh full
test-faults-quick: deps-check release $(BUILD)/hfplant
	@bash tests/faults/run.sh quick

# Cluster faults (tests/faults/cluster-run.sh): the local 3-broker, 3-controller cluster
# (tools/kafka/cluster-up.sh, brought up and wiped by the suite), topics with replication
# factor 3; kill -9 of the busiest partition leader and of the active controller, a
# clean broker restart, a network partition of one processor (a network namespace:
# root); each under hfbench load, each ending with reconcile PASS. About 14 min;
# never touches the broker on 9092. Not in `make test`.
.PHONY: test-faults-cluster
test-faults-cluster: deps-check release $(BUILD)/hfplant
	@bash tests/faults/cluster-run.sh full

# Holdfast-process faults among three processes with standbys (tests/faults/process.sh,
# issue 14): kill -9 of one of three, restarted, 3 times; then SIGSTOP of one past the
# session timeout and SIGCONT, 2 times; each under hfbench load, ending with reconcile
# PASS under the strict 5 s expiry bound. About 4 min; not in `make test`.
# test-soak: 100 kill -9 cycles of a random process over about 30 min (not in CI).
.PHONY: test-faults-process test-soak
test-faults-process: deps-check release $(BUILD)/hfplant
	@FT_MODE=kill FT_CYCLES=$${FT_CYCLES:-3} bash tests/faults/process.sh
	@FT_MODE=stop FT_CYCLES=$${FT_STOP_CYCLES:-2} bash tests/faults/process.sh
test-soak: deps-check release $(BUILD)/hfplant
	@FT_MODE=kill FT_VICTIM=random FT_CYCLES=$${FT_CYCLES:-100} FT_DOWN_S=$${FT_DOWN_S:-4} \
	  FT_GAP_S=$${FT_GAP_S:-10} FT_SECONDS=$${FT_SECONDS:-1850} FT_RATE=$${FT_RATE:-30} \
	  bash tests/faults/process.sh

# Command-line conventions of the three binaries (no broker needed).
.PHONY: test-cli test-suite
test-cli: deps-check release
	@bash tests/cli/test_cli.sh $(BUILD)

# Secured cluster (tests/secure/test_secure.sh): its own broker with SCRAM-SHA-512 over
# TLS, mutual TLS and ACLs on 19094-19096 (tools/kafka/kafka-secure-up.sh), started and
# removed by the test; holdfast as principal holdfast with either login, a checkout
# principal refused on internal topics, a wrong password and an unknown CA refused
# (docs/SECURITY.md). About 30 s; never touches the broker on 9092.
.PHONY: test-secure
test-secure: deps-check release
	@bash tests/secure/test_secure.sh

# HTTP front (tests/http/test_http.sh): `holdfast http` driven with curl against the
# pipeline on the broker at HOLDFAST_BOOTSTRAP, its own topic prefix; signed webhooks,
# overload (503 + Retry-After), a stopped pipeline; ends with hfctl reconcile PASS. About 45 s.
.PHONY: test-http
test-http: deps-check release
	@bash tests/http/test_http.sh
# API keys and rate limits of the front (401/403/429, SIGHUP revocation, nothing sent).
.PHONY: test-http-auth
test-http-auth: deps-check release
	@bash tests/http/test_auth.sh

# The HTTP front serving TLS itself (tests/http/test_https.sh): three listeners, a
# reservation's life over HTTPS, TLS 1.2+ only, mutual TLS, a certificate rotated by
# SIGHUP under load with no request lost, bad TLS settings exit 2; certificates made
# with openssl. Run twice: the release build, then the fronts from the sanitizer build
# (a credential freed under a connection is an ASan report there). About 55 s.
.PHONY: test-https
test-https: deps-check release san
	@bash tests/http/test_https.sh
	@echo "== again, the fronts from $(SAN_BUILD)/holdfast"
	@LSAN_OPTIONS=use_unaligned=1 HOLDFAST_HTTP_BIN=$(SAN_BUILD)/holdfast bash tests/http/test_https.sh

# docs/openapi.json as a tested contract (tests/http/test_contract.sh): Schemathesis,
# pinned, in a venv under .cache/, with every check and phase (stateful along the
# document's links) against a real pipeline and front; a fixed seed, about a minute.
.PHONY: test-http-contract
test-http-contract: deps-check release
	@bash tests/http/test_contract.sh

# The operations kit against a real Prometheus (tests/ops/test_ops.sh): Debian's
# prometheus 2.42 and blackbox exporter (tools/deps.sh ops) scrape two `holdfast run`
# processes and a `holdfast http` front; ops/prometheus/holdfast.rules.yml loaded (for:,
# windows and age thresholds shortened), every rule's series present with a finite point,
# alerts provoked (a stalled process, a hung gateway task ended by the stall watchdog and
# started again, dead letters, an overloaded front, BUSY) and seen firing and resolved,
# consumer lag seen above 0 and back to 0, every query of ops/grafana/holdfast.json with a
# finite point. About 50 s.
.PHONY: test-ops
test-ops: deps-check release
	@command -v prometheus >/dev/null && command -v prometheus-blackbox-exporter >/dev/null || \
	  bash tools/deps.sh ops
	@bash tests/ops/test_ops.sh

# The Debian package (debian/, tools/deb.sh): build/deb/holdfast_VERSION_ARCH.deb from
# a copy of the tree, then lintian (any warning fails). Installs the deb group of
# tools/deps.sh first (dpkg-dev, debhelper, lintian, systemd for systemd-analyze).
.PHONY: deb test-deb
deb: deps-check
	@bash tools/deps.sh deb >/dev/null
	@bash tools/deb.sh

# The package as an operator gets it (tests/deb/test_deb.sh): lintian, its contents,
# systemd-analyze verify of the units, the sysusers.d user, and its files unpacked with
# dpkg -x (never installed here) run against the broker: --version, holdfast-run@all's
# and holdfast-http's command lines with the packaged settings, a reserve HELD through
# each. In test-suite: 29-30 s with the package's build on 2 cores (2026-12-07; 122 s
# once while other builds shared the cores), plus the deb group's first apt install.
test-deb: deps-check
	@bash tools/deps.sh deb >/dev/null
	@HOLDFAST_DEB_LINTIAN=0 bash tools/deb.sh >/dev/null
	@bash tests/deb/test_deb.sh

# `make test` uses the broker at HOLDFAST_BOOTSTRAP when one answers, else starts a local
# one for the run and stops it afterwards (tools/kafka/with-broker.sh).
test: deps-check
	@bash tools/kafka/with-broker.sh $(MAKE) --no-print-directory test-suite
test-suite: test-unit test-fuzz-corpus test-cli test-integration test-http test-https \
            test-http-auth test-http-contract test-secure test-docker \
            test-faults-quick test-bench-pipeline test-ops test-deb

# libFuzzer builds (clang): make fuzz FUZZ_SECONDS=60
FUZZ_SECONDS ?= 30
fuzz: $(GEN_SRC) $(VERSION_H)
	@mkdir -p $(BUILD)/fuzz
	@set -e; for f in $(FUZZ_SRCS); do n=$$(basename $$f .c); \
	  clang-14 -std=c11 -D_GNU_SOURCE -g -O1 $(INCS) $(PKG_CFLAGS) -fsanitize=fuzzer,address,undefined \
	    $$f $(filter-out processor/main.c,$(LIB_SRCS)) $(GEN_SRC) -o $(BUILD)/fuzz/$$n $(PKG_LIBS); \
	  mkdir -p tests/fuzz/corpus/$$n; \
	  $(BUILD)/fuzz/$$n -max_total_time=$(FUZZ_SECONDS) tests/fuzz/corpus/$$n; done

# ---- style
ALL_C := $(shell git ls-files '*.c' '*.h' 2>/dev/null)
format:
	clang-format-14 -i $(ALL_C)
format-check:
	clang-format-14 --dry-run --Werror $(ALL_C)
lint: $(GEN_SRC) $(VERSION_H)
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
	  --inline-suppr --suppress=missingIncludeSystem $(INCS) common processor schemas state tools
	clang-tidy-14 --quiet --warnings-as-errors='*' $(filter %.c,$(ALL_C)) -- $(CFLAGS_BASE) $(PKG_CFLAGS) -Itests/lib -Wno-error

demo:
	bash tools/demo.sh

clean:
	rm -rf $(BUILD)

-include tools/kafka/kafka.mk
# Not build/deb: make deb's copy of the tree, with a build (and a sysusers.d) of its own.
-include $(shell find $(BUILD) -path $(BUILD)/deb -prune -o -name '*.d' -type f -print 2>/dev/null)
