# tiled - build, test, run.  `make help` lists the targets.
#
# Variants use variables, not copies of rules:
#   make CC=clang            build with clang
#   make SAN=address         ASan+UBSan build (into build-address/)
#   make SAN=thread          TSan build (into build-thread/)
#   make OPT=-O0             unoptimised build

CC      ?= cc
OPT     ?= -O2
SAN     ?=
PREFIX  ?= /usr/local
DESTDIR ?=

ifeq ($(SAN),)
  BUILD ?= build
else
  BUILD ?= build-$(SAN)
endif

# Link-time optimisation of the daemon and the CLI with gcc (not with
# sanitizers, not with clang, whose LTO needs a linker plugin Debian ships
# apart): a request calls across files dozens of times (a dtype's traits,
# the text and number formatters, the reply's pieces), and inlining them
# took 5% of a small request's instructions (docs/performance.md, "A sixth
# round"). Fat objects keep the ordinary code too, so nm (tests/layering)
# reads every object as before and the test binaries link without LTO.
LTO ?= $(if $(SAN),,$(if $(shell $(CC) --version 2>/dev/null | grep -i 'free software foundation'),-flto=auto -ffat-lto-objects))

# Profile-guided optimisation of the daemon, with LTO (gcc, no sanitizers;
# PGO=0 for a quicker build while editing): api/, server/ and cli/ are
# compiled twice, first instrumented ($(BUILD)/pgo-gen/), then, once
# scripts/pgo-train.sh has run that daemon under scripts/pgo_train.c's
# requests, with the profile it wrote ($(BUILD)/pgo-use/, linked into
# $(BUILD)/tiled). A small request runs through some fifty files; compiled
# by the profile (the usual branch falling through, error paths out of
# line, inlining by measured calls) it takes 9-13% fewer instructions and
# about 15% less user time (docs/performance.md, "A seventh round"). core/
# is left as written: its kernels are laid out and measured by hand
# (bench/), and a profile of small tiles would teach them small trip
# counts. The test binaries link the ordinary objects.
PGO ?= $(if $(LTO),1,0)
PGO_USE := -fprofile-use -fprofile-partial-training -Wno-missing-profile

WARN     := -Wall -Wextra -Werror -Wstrict-prototypes -Wshadow -Wno-missing-field-initializers
CPPFLAGS += -D_GNU_SOURCE
CFLAGS   += -std=c11 $(OPT) -g -pthread $(WARN) -fno-strict-aliasing
LDLIBS   += -pthread -lm

ifeq ($(SAN),address)
  CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
  LDFLAGS += -fsanitize=address,undefined
endif
ifeq ($(SAN),thread)
  CFLAGS  += -fsanitize=thread -fno-omit-frame-pointer
  LDFLAGS += -fsanitize=thread
endif

PKGS        := jansson zlib libnghttp2 gnutls
PKG_CFLAGS   = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS     = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# libmicrohttpd, for the measurements that compare against it (bench/) only:
# the daemon's HTTP/1.1 is its own (server/http/).
MHD_CFLAGS   = $(shell pkg-config --cflags libmicrohttpd 2>/dev/null)
MHD_LIBS     = $(shell pkg-config --libs libmicrohttpd 2>/dev/null || echo -lmicrohttpd)
CMOCKA_LIBS  = $(shell pkg-config --libs cmocka 2>/dev/null || echo -lcmocka)
# What core/ and api/ link against (api/ builds its small documents with jansson).
API_LIBS     = $(shell pkg-config --libs jansson 2>/dev/null || echo -ljansson)

# Layering, enforced by the include path: each directory sees only the
# headers of its own layer and the layers below it, so a wrong-way #include
# does not compile. tests/layering/ checks this, that neither the include
# graph nor the objects' symbol graph has a cycle, and, from the objects'
# symbols (nm), that no code calls a layer above its own or from one
# transport into the other.
# Bottom up:
#   core/             dtypes, plans, kernels, pool       -Icore
#   api/              codecs (no sockets)                + -Iapi
#   server/infra/     config, clock, text, listener, log and metrics sinks  + -Iserver/infra
#   server/tls/       TLS policy, certificate, sessions  + -Iserver/tls
#   server/service/   a request's life, replies          + -Iserver/service
#   server/handlers/  protocol handlers, route table     + -Iserver/handlers
#   server/http/, server/grpc/   the transports: each   + its own folder only
#                     (neither sees the other)
#   server/*.c        the daemon (serve.c), which wires the layers below:
#                     every server/ folder, and server/ itself
#   cli/              tiled tile, tiled probe, main()    -Icore -Iapi -Icli
#                     (the daemon only through weak symbols)
# The tests of server/ (tests/server/) test across its folders, so they
# compile with the daemon's path, as does whatever else sees all of it.
# Within server/, one directory per library holds the only code that
# includes it: server/grpc/ (nghttp2.h) and server/tls/ (gnutls.h: the TLS
# policy, certificate and sessions both ports share); HTTP/1.1
# (server/http/) is the project's own. The test checks that too.
LAYER_core     := -Icore
LAYER_api      := $(LAYER_core) -Iapi
LAYER_cli      := $(LAYER_api) -Icli
LAYER_infra    := $(LAYER_api) -Iserver/infra
LAYER_tls      := $(LAYER_infra) -Iserver/tls
LAYER_service  := $(LAYER_tls) -Iserver/service
LAYER_handlers := $(LAYER_service) -Iserver/handlers
LAYER_http     := $(LAYER_handlers) -Iserver/http
LAYER_grpc     := $(LAYER_handlers) -Iserver/grpc
LAYER_server   := $(LAYER_handlers) -Iserver/http -Iserver/grpc -Iserver
LAYER_ALL      := $(LAYER_server)
SERVER_LAYERS  := infra tls service handlers http grpc
# The layer of a path: core/x.c, tests/core/test_x.c -> core;
# server/infra/x.c -> infra; server/serve.c, tests/server/test_x.c -> server.
layer_name = $(if $(filter server,$(firstword $(subst /, ,$(1)))),$(or $(filter $(SERVER_LAYERS),$(word 2,$(subst /, ,$(1)))),server),$(firstword $(filter core api cli server,$(subst /, ,$(1)))))
layer_of = $(LAYER_$(call layer_name,$(1)))

CORE_SRC   := $(wildcard core/*.c)
API_SRC    := $(wildcard api/*.c)
CLI_SRC    := $(wildcard cli/*.c)
SERVER_SRC := $(wildcard server/*.c server/*/*.c)
GEN_OBJ    := $(BUILD)/obj/gen/openapi.o
LIB_OBJ    := $(patsubst %.c,$(BUILD)/obj/%.o,$(CORE_SRC) $(API_SRC) $(SERVER_SRC)) $(GEN_OBJ)
CORE_OBJ   := $(patsubst %.c,$(BUILD)/obj/%.o,$(CORE_SRC))
CLI_OBJ    := $(patsubst %.c,$(BUILD)/obj/%.o,$(CLI_SRC) $(CORE_SRC) $(API_SRC))
TEST_SRC   := $(wildcard tests/core/test_*.c tests/api/test_*.c tests/server/test_*.c)
TEST_BIN   := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
TEST_HELP  := $(patsubst %.c,$(BUILD)/obj/%.o,$(filter-out $(TEST_SRC),$(wildcard tests/*/*.c)))
BENCH_BIN  := $(BUILD)/bench/bench_kernel

.PHONY: all install deps deps-build deps-test deps-bench deps-fuzz check fresh-test test test-repeat test-tsan test-valgrind test-unit \
        test-asan check-clang run bench bench-perf-analyzer bench-jsondecode clean help lib cli-only layer-flags grpc-stubs grpc-descriptors

all: $(BUILD)/tiled $(BUILD)/tests/h1wire_dump $(BUILD)/tests/decode_dump

help:
	@echo "Build"
	@echo "  make                 build/tiled and the test filters (needs the libraries: make deps)"
	@echo "                       (the daemon profile-guided: a training run; PGO=0 builds it once, quicker)"
	@echo "  make deps            install the Debian packages for the build, tests, bench and fuzzing"
	@echo "  make lib             build/libtile.a and libtile.so.0 (the core as a library)"
	@echo "  make cli-only        build/tiled-cli: tile and probe, without the daemon"
	@echo "  make install         install under PREFIX (/usr/local), DESTDIR honoured"
	@echo "  make clean           remove build outputs"
	@echo "Run"
	@echo "  make run             serve HTTP on 127.0.0.1:8080 and gRPC on 8081 (TILED_PORT=, TILED_GRPC_PORT=)"
	@echo "Test"
	@echo "  make check           build and run the C unit tests (seconds; the inner loop)"
	@echo "  make test            every suite of tests/suites, side by side (ONLY='asan-http k8s' for some)"
	@echo "  make test-repeat     make test N times (N=10) beside LOAD busy loops (LOAD=2)"
	@echo "  make test-unit       the C unit tests and the layering check (SAN=address for ASan+UBSan)"
	@echo "  make test-asan       the C unit tests under ASan+UBSan"
	@echo "  make test-tsan       unit tests and the HTTP and gRPC suites under ThreadSanitizer"
	@echo "  make test-valgrind   the HTTP and gRPC suites with the daemon under valgrind"
	@echo "  make check-clang     build everything with clang (warnings are errors)"
	@echo "  make fresh-test      make test and make run on a new Debian 12 root (root, network)"
	@echo "  make layer-flags     print a layer's include path (LAYER=api)"
	@echo "Fuzz"
	@echo "  make fuzz            every libFuzzer target for FUZZ_TIME s (FUZZ_TARGETS= for some)"
	@echo "  make fuzz-smoke      every target over its seeds once"
	@echo "  make fuzz-campaign   a long campaign: corpora grown and minimised into fuzz/corpus, coverage"
	@echo "  make fuzz-build      build the targets only;  make fuzz-clean  remove build-fuzz/"
	@echo "Benchmark (bench/, docs/performance.md)"
	@echo "  make bench           kernel benchmark (and daemon benchmark when available)"
	@echo "  make bench-peers     tiled against numpy, torch, ONNX Runtime, nginx, libmicrohttpd"
	@echo "  make bench-perf-analyzer  Triton's perf_analyzer against the daemon"
	@echo "  make bench-jsondecode     callgrind instructions per decode of the small JSON bodies"
	@echo "  make bench-pbcodec   protobuf codec against protobuf-c"
	@echo "  make bench-mhd-framing    the framing table against libmicrohttpd alone and tiled"
	@echo "  make bench-transport-options  relay to libmicrohttpd vs own reader vs its floor and nginx"
	@echo "  make bench-transport-syscalls  system calls per request of those floors"
	@echo "  make soak            1,000,000 mixed requests (SOAK_REQUESTS=);  make overload  a flooded queue"
	@echo "  make slowloris       a client's latency beside 1000 header-trickling connections"
	@echo "  make grpc-drain-stress    40,000 gRPC calls across SIGTERM through nginx"
	@echo "Deploy (deploy/)"
	@echo "  make image           the container image;  make image-test  run and check it"
	@echo "  make deploy-test     the deployment suites;  make clean-image  remove the base image"
	@echo "Generated sources"
	@echo "  make grpc-stubs      Python stubs of api/proto/ into build/grpc (needs the test venv)"
	@echo "  make grpc-descriptors  regenerate api/grpc_descriptors.c (reflection) from api/proto/"

# Installs the Debian packages that are missing (as root on Debian; elsewhere
# it only reports them). An explicit step of run, test, bench and fuzz, never
# a prerequisite of a file: plain `make` only compiles.
deps:
	@sh scripts/deps.sh build test bench fuzz

deps-%:
	@sh scripts/deps.sh $*

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(call layer_of,$<) $(CPPFLAGS) $(CFLAGS) $(LTO) $(PKG_CFLAGS) -MMD -MP -c $< -o $@

# `make -s layer-flags LAYER=api` prints a layer's include path (for the test;
# LAYER=infra, tls, service, handlers, http, grpc for a folder of server/).
layer-flags:
	@echo $(LAYER_$(LAYER)) $(CPPFLAGS)

# The OpenAPI document is served from the binary itself.
$(BUILD)/gen/openapi.c: api/openapi.json scripts/embed.sh
	@mkdir -p $(@D)
	sh scripts/embed.sh tiled_openapi_json $< > $@

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@

GIT_COMMIT := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
$(BUILD)/obj/server/infra/metrics.o $(BUILD)/pgo-gen/server/infra/metrics.o $(BUILD)/pgo-use/server/infra/metrics.o: \
  CPPFLAGS += -DTILED_GIT_COMMIT=\"$(GIT_COMMIT)\"

# The profile-guided daemon (PGO above): instrumented objects, the daemon
# they make, its training run, then the objects compiled with its profile.
# An instrumented object's counters are written under the name of the
# optimised object it trains (-dumpdir, -dumpbase): gcc finds a static
# function's counts by that name, so a profile copied from elsewhere
# would lose them.
PGO_SRC     := $(CLI_SRC) $(API_SRC) $(SERVER_SRC)
PGO_GEN_OBJ := $(patsubst %.c,$(BUILD)/pgo-gen/%.o,$(PGO_SRC))
PGO_USE_OBJ := $(patsubst %.c,$(BUILD)/pgo-use/%.o,$(PGO_SRC))
DAEMON_OBJ  := $(if $(filter 1,$(PGO)),$(PGO_USE_OBJ) $(CORE_OBJ) $(GEN_OBJ),\
                 $(BUILD)/obj/cli/main.o $(CLI_OBJ) $(LIB_OBJ))

$(BUILD)/pgo-gen/%.o: %.c
	@mkdir -p $(@D) $(BUILD)/pgo-use/$(dir $*)
	$(CC) $(call layer_of,$<) $(CPPFLAGS) $(CFLAGS) $(LTO) $(PKG_CFLAGS) -fprofile-generate -fprofile-update=atomic \
	  -dumpdir $(BUILD)/pgo-use/$(dir $*) -dumpbase $(notdir $<) -dumpbase-ext .c -MMD -MP -c $< -o $@

$(BUILD)/pgo-gen/tiled: $(PGO_GEN_OBJ) $(CORE_OBJ) $(GEN_OBJ)
	$(CC) $(LDFLAGS) $(OPT) -g $(LTO) -fprofile-generate -o $@ $^ $(PKG_LIBS) $(LDLIBS)

$(BUILD)/pgo-gen/pgo_train: scripts/pgo_train.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $<

$(BUILD)/pgo-gen/trained: $(BUILD)/pgo-gen/tiled $(BUILD)/pgo-gen/pgo_train scripts/pgo-train.sh
	sh scripts/pgo-train.sh $(BUILD)/pgo-gen/tiled $(BUILD)/pgo-gen/pgo_train $(BUILD)/pgo-use
	@touch $@

$(BUILD)/pgo-use/%.o: %.c $(BUILD)/pgo-gen/trained
	@mkdir -p $(@D)
	$(CC) $(call layer_of,$<) $(CPPFLAGS) $(CFLAGS) $(LTO) $(PKG_CFLAGS) $(PGO_USE) -MMD -MP -c $< -o $@

$(BUILD)/libtile.a: $(CORE_OBJ)
	ar rcs $@ $^

# PGO's value, rewritten only when it changes: the daemon is linked again then.
$(BUILD)/pgo-mode: FORCE
	@mkdir -p $(@D)
	@echo $(PGO) | cmp -s - $@ || echo $(PGO) > $@

FORCE:

$(BUILD)/tiled: $(DAEMON_OBJ) $(BUILD)/pgo-mode
	$(CC) $(LDFLAGS) $(if $(LTO),$(OPT) -g $(LTO)) $(if $(filter 1,$(PGO)),$(PGO_USE)) -o $@ \
	  $(filter-out $(BUILD)/pgo-mode,$^) $(PKG_LIBS) $(LDLIBS)

# The CLI alone, linked without server/: `tiled serve` says it is not built in.
$(BUILD)/tiled-cli: $(CLI_OBJ)
	$(CC) $(LDFLAGS) $(if $(LTO),$(OPT) -g $(LTO)) -o $@ $^ $(API_LIBS) $(LDLIBS)

cli-only: $(BUILD)/tiled-cli

$(BUILD)/tests/%: tests/%.c $(LIB_OBJ) $(TEST_HELP)
	@mkdir -p $(@D)
	$(CC) $(call layer_of,$<) $(CPPFLAGS) $(CFLAGS) $(PKG_CFLAGS) -Itests $(LDFLAGS) -o $@ $< $(LIB_OBJ) \
	    $(TEST_HELP) $(PKG_LIBS) $(CMOCKA_LIBS) $(LDLIBS)

# The framer's driver is a header (test binaries are built without -MMD).
$(BUILD)/tests/server/test_h1wire: tests/server/harness/h1drive.h

# The HTTP/1.1 framer as a filter, for the differential test against other
# parsers (tests/server/test_h1_differential.py).
$(BUILD)/tests/h1wire_dump: tests/server/harness/h1wire_dump.c tests/server/harness/h1drive.h $(BUILD)/obj/server/http/h1wire.o
	@mkdir -p $(@D)
	$(CC) $(LAYER_server) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/obj/server/http/h1wire.o $(LDLIBS)

# The request decoders (/v1 and v2 JSON, .npy) as a filter, for the differential
# tests against Python's json module and numpy (tests/api/test_*_differential.py).
API_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(API_SRC))
$(BUILD)/tests/decode_dump: tests/api/harness/decode_dump.c $(API_OBJ) $(CORE_OBJ)
	@mkdir -p $(@D)
	$(CC) $(LAYER_api) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(API_OBJ) $(CORE_OBJ) $(API_LIBS) $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(LIB_OBJ)
	@mkdir -p $(@D)
	$(CC) $(LAYER_ALL) $(CPPFLAGS) $(CFLAGS) $(PKG_CFLAGS) $(LDFLAGS) -o $@ $< $(LIB_OBJ) $(PKG_LIBS) $(LDLIBS)

# The core as a shared library needs position-independent objects.
PIC_OBJ := $(patsubst %.c,$(BUILD)/pic/%.o,$(CORE_SRC))
$(BUILD)/pic/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(LAYER_core) $(CPPFLAGS) $(CFLAGS) -fPIC -c $< -o $@

$(BUILD)/libtile.so.0: $(PIC_OBJ)
	$(CC) -shared -Wl,-soname,libtile.so.0 $(LDFLAGS) -o $@ $^ -pthread

lib: $(BUILD)/libtile.a $(BUILD)/libtile.so.0

# make install PREFIX=/usr/local DESTDIR=/tmp/stage
install: $(BUILD)/tiled lib
	install -D -m 755 $(BUILD)/tiled $(DESTDIR)$(PREFIX)/bin/tiled
	install -D -m 644 deploy/man/tiled.1 $(DESTDIR)$(PREFIX)/share/man/man1/tiled.1
	install -D -m 644 $(BUILD)/libtile.a $(DESTDIR)$(PREFIX)/lib/libtile.a
	install -D -m 755 $(BUILD)/libtile.so.0 $(DESTDIR)$(PREFIX)/lib/libtile.so.0
	ln -sf libtile.so.0 $(DESTDIR)$(PREFIX)/lib/libtile.so
	install -d $(DESTDIR)$(PREFIX)/include/tiled
	install -m 644 core/*.h $(DESTDIR)$(PREFIX)/include/tiled/
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig
	sed 's|@PREFIX@|$(PREFIX)|' deploy/tiled.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/tile.pc

# Python stubs of the vendored .proto files (api/proto/), for the gRPC tests
# and for clients written from them: the _pb2/_pb2_grpc modules and a
# descriptor set, made by grpc_tools.protoc from the test venv
# (scripts/venv.sh). tiled itself builds nothing from them: its protobuf
# codec is hand-written (api/pbwire.c, api/grpc_*.c), and what server
# reflection sends of them is api/grpc_descriptors.c, committed and
# regenerated by `make grpc-descriptors` when they change (the reflection
# tests fail until it is).
VENV       ?= build/venv
PROTO      := $(wildcard api/proto/*.proto)
GRPC_STUBS := build/grpc/tiled.desc

grpc-stubs: $(GRPC_STUBS)

grpc-descriptors:
	$(VENV)/bin/python scripts/grpc_descriptors.py api/grpc_descriptors.c

$(GRPC_STUBS): $(PROTO)
	@mkdir -p $(@D)
	$(VENV)/bin/python -m grpc_tools.protoc -Iapi/proto --python_out=$(@D) --grpc_python_out=$(@D) \
	    --descriptor_set_out=$@ --include_imports $(PROTO)

# Unit tests of this build variant and the layering check: every one runs,
# the failed ones are named.
test-unit: $(TEST_BIN) $(BUILD)/tiled $(BUILD)/tiled-cli
	@failed=""; for t in $(TEST_BIN); do echo "== $$t"; $$t || failed="$$failed $$t"; done; \
	 MAKE="$(MAKE)" sh tests/layering/test_layering.sh $(BUILD) || failed="$$failed layering"; \
	 [ -z "$$failed" ] || { echo "failed unit tests:$$failed"; exit 1; }

# make would delete the helpers' objects as intermediates and relink every test.
.SECONDARY: $(TEST_HELP)

# The developer's inner loop: build, then the C unit tests (no sanitizers).
check: test-unit

test-asan:
	$(MAKE) SAN=address test-unit

# The same sources must also build warning-free with clang.
check-clang:
	$(MAKE) CC=clang BUILD=build-clang all

# The pool and daemon under ThreadSanitizer: the unit tests plus the HTTP
# suite against a TSan daemon (the multi-GiB stream is left to the plain runs),
# and the gRPC transport's suite (its loops and workers hand calls back and
# forth; grpcio and hpack come from the test venv).
test-tsan:
	$(MAKE) SAN=thread test-unit build-thread/tiled
	cd tests/server && TILED_BIN=../../build-thread/tiled TILED_QUICK=1 \
	    TSAN_OPTIONS="halt_on_error=1 exitcode=66" /usr/bin/python3 -W ignore -m unittest test_http
	sh scripts/venv.sh build/venv
	cd tests/server && TILED_BIN=../../build-thread/tiled TILED_QUICK=1 \
	    TSAN_OPTIONS="halt_on_error=1 exitcode=66" ../../build/venv/bin/python -W ignore -m unittest test_grpc_transport

# The HTTP and gRPC transport suites with the daemon under valgrind: any
# error or leak makes the daemon's exit status non-zero, which fails the
# test that stops it.
# --fair-sched: valgrind runs one thread at a time, and its default lock lets
# a busy worker take it back again and again, starving the transport threads
# that the tests check keep answering (DecodeOffTheLoop).
VALGRIND_WRAP := valgrind --fair-sched=yes --leak-check=full --error-exitcode=1 --errors-for-leak-kinds=definite
test-valgrind: $(BUILD)/tiled
	cd tests/server && TILED_BIN=../../$(BUILD)/tiled TILED_QUICK=1 TILED_WRAP="$(VALGRIND_WRAP)" \
	    /usr/bin/python3 -W ignore -m unittest test_http test_bad_input
	sh scripts/venv.sh build/venv
	cd tests/server && TILED_BIN=../../$(BUILD)/tiled TILED_QUICK=1 TILED_WRAP="$(VALGRIND_WRAP)" \
	    ../../build/venv/bin/python -W ignore -m unittest test_grpc_transport

# Every suite of tests/suites (the first one is `deps`), up to TEST_JOBS (4) at
# once, each run whatever the others did; the closing line counts the suites
# ("suites: N passed, M failed") and the exit status follows it, after the ten
# slowest tests. TEST_SUITES names another list.
test:
	@MAKE="$(MAKE)" ONLY="$(ONLY)" sh scripts/run-tests.sh $(TEST_SUITES)

# `make test` N times in a row with LOAD busy loops running (flakes show).
N    ?= 10
LOAD ?= 2
test-repeat:
	@MAKE="$(MAKE)" sh scripts/test-repeat.sh $(N) $(LOAD)

# The README's two commands on a new Debian 12 root (debootstrap); needs root
# and the network, takes about 6 minutes. Not part of `make test`.
fresh-test:
	sh tests/fresh/run.sh

# The daemon in the foreground, HTTP and gRPC (it prints both addresses);
# `make run TILED_PORT=9000 TILED_GRPC_PORT=9001` moves them.
TILED_PORT      ?= 8080
TILED_GRPC_PORT ?= 8081
run: deps-build
	@$(MAKE) --no-print-directory $(BUILD)/tiled
	./$(BUILD)/tiled serve --port $(TILED_PORT) --grpc-port $(TILED_GRPC_PORT)

# libmicrohttpd alone (bench/mhd_floor.c): the floor of a small request,
# and what the library refuses by itself of the framing table.
$(BUILD)/bench/mhd_floor: bench/mhd_floor.c bench/floor.h
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(MHD_CFLAGS) -o $@ $< $(MHD_LIBS) $(LDLIBS)

# Appending to a log file as it grows, with and without log.c's page-cache
# trim (docs/performance.md, "The access log's page cache").
$(BUILD)/bench/log_append: bench/log_append.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $<

bench-mhd-framing: $(BUILD)/bench/mhd_floor $(BUILD)/tiled
	@MHD_FLOOR=$(BUILD)/bench/mhd_floor TILED_BIN=$(BUILD)/tiled sh bench/mhd_framing.sh

bench:
	@sh scripts/deps.sh build bench
	@$(MAKE) --no-print-directory $(BENCH_BIN) $(BUILD)/tiled
	$(BENCH_BIN)
	TILED_BIN=$(BUILD)/tiled sh bench/bench_http.sh
	TILED_BIN=$(BUILD)/tiled sh bench/perf_analyzer.sh
	TILED_BIN=$(BUILD)/tiled sh bench/perf_analyzer.sh 1000 grpc
	python3 bench/bench_grpc.py $(BUILD)/tiled
	@$(MAKE) --no-print-directory $(BUILD)/bench/bench_shm_kernel
	python3 bench/bench_shm.py $(BUILD)/tiled $(BUILD)/bench/bench_shm_kernel 9 --report

# Triton's perf_analyzer, binary in/out, concurrency 1-8, over HTTP and gRPC
# (downloads it once).
bench-perf-analyzer: $(BUILD)/tiled
	TILED_BIN=$(BUILD)/tiled sh bench/perf_analyzer.sh
	TILED_BIN=$(BUILD)/tiled sh bench/perf_analyzer.sh 1000 grpc
	TILED_BIN=$(BUILD)/tiled sh bench/perf_analyzer.sh 1000 grpc-streaming

# Instructions per decode of the small /v1 and Open Inference Protocol JSON
# bodies, under callgrind (bench/bench_jsondecode.c).
JSONDECODE_N ?= 2000
bench-jsondecode: $(BUILD)/bench/bench_jsondecode
	sh bench/jsondecode.sh $< $(JSONDECODE_N)

clean:
	rm -rf build build-address build-thread build-clang

-include $(shell find $(BUILD)/obj $(BUILD)/pgo-gen $(BUILD)/pgo-use -name '*.d' 2>/dev/null)

include fuzz/fuzz.mk
include bench/hardening.mk
include bench/pbcodec.mk
include deploy/deploy.mk
include bench/peers/peers.mk
include bench/transport.mk
