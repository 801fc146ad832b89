# holdfast build. `make` builds the release binaries into build/; `make test` builds
# a sanitizer (address,undefined) copy into build/san/ and runs unit, fuzz-corpus and
# broker-backed integration tests. Dependencies come from pkg-config (see deps-check).

CC      ?= cc
PKGS    := rdkafka rocksdb avro-c jansson
BUILD   ?= build
SAN_BUILD := $(BUILD)/san

WARN    := -Wall -Wextra -Wshadow -Wformat=2 -Wstrict-prototypes -Wmissing-prototypes \
           -Wno-unused-parameter -Werror
INCS    := -Iprocessor -Ischemas -Istate -Itools -I$(BUILD)/gen
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -g $(WARN) $(INCS) -MMD -MP
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread -lm

OPT_CFLAGS := -O2
SAN_CFLAGS := -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined

# Library sources: everything under processor/, schemas/, state/ and tools/lib
# except the files that hold a main().
MAIN_SRCS := processor/main.c tools/hfctl.c tools/hfbench.c
LIB_SRCS  := $(filter-out $(MAIN_SRCS) $(LIB_EXCLUDE),$(wildcard processor/*.c processor/*/*.c schemas/*.c state/*.c tools/lib/*.c))
GEN_SRC   := $(BUILD)/gen/schemas_gen.c
SCHEMAS   := $(sort $(wildcard schemas/*.avsc))
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
ITEST_SRCS := $(wildcard tests/integration/itest_*.c)
TESTLIB_SRCS := $(wildcard tests/lib/*.c)

objs = $(patsubst %.c,$(1)/obj/%.o,$(2))

# Keep intermediate objects (test and bench objects are otherwise deleted).
.SECONDARY:

.PHONY: all release san deps deps-check test test-unit test-fuzz-corpus test-integration \
        test-faults fuzz lint format format-check clean demo bench-counter bench-aggregator bench-gateway \
        bench-pipeline test-bench-pipeline help
all: deps-check release

help:
	@echo "make            build build/holdfast and build/hfctl"
	@echo "make test       unit + fuzz corpus + integration + secured-cluster tests (needs make kafka-up)"
	@echo "make demo       broker, topics, processor, a burst of holds, a verdict"
	@echo "make kafka-up / kafka-down   local Apache Kafka (KRaft) on 127.0.0.1:9092"
	@echo "make deps       install missing Debian packages"

deps:
	bash tools/deps.sh

deps-check:
	@for p in $(PKGS) cmocka; do pkg-config --exists $$p || { \
	  echo "missing library '$$p' (pkg-config). Run 'make deps' (or bash tools/deps.sh) to install Debian packages." >&2; exit 1; }; done

# ---- generated schema table
$(GEN_SRC): $(SCHEMAS) tools/embed-schemas.sh
	@mkdir -p $(dir $@)
	bash tools/embed-schemas.sh $(SCHEMAS) > $@.tmp && mv $@.tmp $@

# ---- release build
REL_LIB_OBJS := $(call objs,$(BUILD),$(LIB_SRCS) $(GEN_SRC:$(BUILD)/%=%))
release: $(BUILD)/holdfast $(BUILD)/hfctl $(BUILD)/hfbench

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"; $(CC) $(CFLAGS_BASE) $(OPT_CFLAGS) $(PKG_CFLAGS) -c $< -o $@
$(BUILD)/obj/%.o: %.c $(GEN_SRC)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"; $(CC) $(CFLAGS_BASE) $(OPT_CFLAGS) $(PKG_CFLAGS) -c $< -o $@
$(BUILD)/libhf.a: $(REL_LIB_OBJS)
	@rm -f $@; ar rcs $@ $^
$(BUILD)/holdfast: $(BUILD)/obj/processor/main.o $(BUILD)/libhf.a
	$(CC) -o $@ $^ $(PKG_LIBS)
$(BUILD)/hfctl: $(BUILD)/obj/tools/hfctl.o $(BUILD)/libhf.a
	$(CC) -o $@ $^ $(PKG_LIBS)
$(BUILD)/hfbench: $(BUILD)/obj/tools/hfbench.o $(BUILD)/libhf.a
	$(CC) -o $@ $^ $(PKG_LIBS)

# ---- sanitizer build (tests)
SAN_LIB_OBJS := $(call objs,$(SAN_BUILD),$(LIB_SRCS) $(GEN_SRC:$(BUILD)/%=%))
san: $(SAN_BUILD)/holdfast $(SAN_BUILD)/hfctl

$(SAN_BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	@echo "  CC san  $<"; $(CC) $(CFLAGS_BASE) $(SAN_CFLAGS) $(PKG_CFLAGS) -c $< -o $@
$(SAN_BUILD)/obj/%.o: %.c $(GEN_SRC)
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

# The full pipeline at a ladder of rates, the broker's ceiling beside it, an overload
# run; A/B over several holdfast builds (tests/bench/pipeline.py, docs/PERFORMANCE.md).
# Env: BENCH_RATES, BENCH_SECONDS, BENCH_BUILDS, BENCH_ROUNDS, BENCH_KEEP_TOPICS, ...
$(BUILD)/pipeline-topics: $(BUILD)/obj/tests/bench/pipeline_topics.o $(BUILD)/libhf.a
	$(CC) -o $@ $^ $(PKG_LIBS)
bench-pipeline: deps-check release $(BUILD)/pipeline-topics
	@python3 tests/bench/pipeline.py

# The same bench in its quick form (one low rate, short runs): proves the tool works
# end to end and its JSON is complete. Part of `make test`; the ladder is not.
test-bench-pipeline: deps-check release $(BUILD)/pipeline-topics
	@bash tests/bench/test_pipeline.sh

test-unit: deps-check $(UNIT_BINS)
	@set -e; for t in $(UNIT_BINS); do echo "== $$t"; LSAN_OPTIONS=use_unaligned=1 $$t; done

test-fuzz-corpus: deps-check $(FUZZ_REPLAY_BINS)
	@set -e; for t in $(FUZZ_REPLAY_BINS); do n=$${t##*/replay_}; echo "== $$t (corpus tests/fuzz/corpus/$$n)"; \
	  LSAN_OPTIONS=use_unaligned=1 $$t tests/fuzz/corpus/$$n; done

test-integration: deps-check san $(BUILD)/holdfast $(BUILD)/hfctl $(ITEST_BINS)
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
test-faults: deps-check release
	@bash tests/faults/run.sh full
test-faults-quick: deps-check release
	@bash tests/faults/run.sh quick

# Secured cluster (tests/secure/test_secure.sh): its own broker with SASL over TLS and
# ACLs on 19094/19095 (tools/kafka/kafka-secure-up.sh), started and removed by the test;
# holdfast as principal holdfast, a checkout principal refused on internal topics
# (docs/SECURITY.md). About 1.5 min; never touches the broker on 9092.
.PHONY: test-secure
test-secure: deps-check release
	@bash tests/secure/test_secure.sh

test: test-unit test-fuzz-corpus test-integration test-secure test-docker test-faults-quick test-bench-pipeline

# libFuzzer builds (clang): make fuzz FUZZ_SECONDS=60
FUZZ_SECONDS ?= 30
fuzz: $(GEN_SRC)
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
lint: $(GEN_SRC)
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
	  --inline-suppr --suppress=missingIncludeSystem $(INCS) processor schemas state tools
	clang-tidy-14 --quiet $(filter %.c,$(ALL_C)) -- $(CFLAGS_BASE) $(PKG_CFLAGS) -Itests/lib -Wno-error

demo:
	bash tools/demo.sh

clean:
	rm -rf $(BUILD)

-include tools/kafka/kafka.mk
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
