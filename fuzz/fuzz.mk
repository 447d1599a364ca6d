# fuzz.mk - libFuzzer targets for the request decoders (included by the Makefile).
#
#   make fuzz                 build every target and run each for FUZZ_TIME s
#   make fuzz FUZZ_TIME=600   longer runs
#   make fuzz FUZZ_TARGETS=npy
#   make fuzz-smoke           run each target over its seed corpus only
#   make fuzz-build           only build (build-fuzz/fuzz_<name>)
#   make fuzz-clean           remove build-fuzz/
#   make fuzz-campaign        a long run of every target, corpora minimised into
#                             fuzz/corpus/ and a coverage report (fuzz/campaign.sh;
#                             CAMPAIGN_HOURS=1 or CAMPAIGN_SECONDS= per target,
#                             CAMPAIGN_JOBS= jobs side by side, default one per core;
#                             CAMPAIGN_RUNS=10000000 executions per target instead)
#
# The library sources (core/ and api/; only grpc_transport and
# h1_transport need the server, and they get server/ too) are built again
# into $(FUZZ_BUILD) with clang's fuzzer instrumentation plus ASan and
# UBSan. Seeds live in fuzz/corpus/<name>/ and are only read; what a run
# discovers goes to $(FUZZ_BUILD)/corpus/<name>/ and crash inputs to
# $(FUZZ_BUILD)/artifacts/<name>/. fuzz/run.sh runs the targets and prints
# one summary line per target; it fails when any target found a crash.

FUZZ_CC      ?= clang
FUZZ_BUILD   ?= build-fuzz
FUZZ_TIME    ?= 60
FUZZ_TARGETS ?= v1_json raw npy v2 lists grpc grpc_transport pbdiff h1wire h1_transport
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS  := -std=c11 -O1 -g -pthread $(WARN) -fno-strict-aliasing $(FUZZ_SAN)

FUZZ_LIB_SRC := $(CORE_SRC) $(API_SRC)
FUZZ_LIB_OBJ := $(patsubst %.c,$(FUZZ_BUILD)/obj/%.o,$(FUZZ_LIB_SRC)) $(FUZZ_BUILD)/obj/fuzz/fuzz_common.o
FUZZ_BIN     := $(patsubst %,$(FUZZ_BUILD)/fuzz_%,$(FUZZ_TARGETS))

CAMPAIGN_HOURS   ?= 1
CAMPAIGN_SECONDS ?= $$(($(CAMPAIGN_HOURS) * 3600))
CAMPAIGN_JOBS    ?= $$(nproc)
CAMPAIGN_RUNS    ?=

.PHONY: fuzz fuzz-build fuzz-smoke fuzz-clean fuzz-campaign
# Keep the objects (make would delete them as intermediates of the pattern rule).
.SECONDARY: $(FUZZ_LIB_OBJ)

# Library objects: instrumented for coverage (no fuzzer main).
$(FUZZ_BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(or $(call layer_of,$<),$(LAYER_api)) $(CPPFLAGS) -Ifuzz $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(PKG_CFLAGS) -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/fuzz_%: fuzz/fuzz_%.c $(FUZZ_LIB_OBJ)
	$(FUZZ_CC) $(LAYER_api) $(CPPFLAGS) -Ifuzz $(FUZZ_CFLAGS) -fsanitize=fuzzer $(PKG_CFLAGS) -o $@ $< $(FUZZ_LIB_OBJ) $(API_LIBS) -pthread -lm

# The same objects with edge coverage alone, without trace-cmp (the
# comparisons libFuzzer learns from), for the targets that take comparisons
# only from the code they are written against: their checks, or the code
# they drive beyond it, would spend most of their time in the callbacks.
FUZZ_NOCMP := $(FUZZ_BUILD)/obj-nocmp

$(FUZZ_NOCMP)/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(or $(call layer_of,$<),$(LAYER_api)) $(CPPFLAGS) -Ifuzz $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link \
	    -fno-sanitize-coverage=trace-cmp $(PKG_CFLAGS) -MMD -MP -c $< -o $@

# raw: the query parameters and the body (api/request.c), the dtype and
# semantics names (core/dtype.c, core/plan.c). Its checks read every
# output back, JSON included: with their comparisons it made 3,300
# executions a second once it reached large outputs, 5,600 to 11,000
# without (20-second runs).
FUZZ_RAW_CMP := api/request.c core/dtype.c core/plan.c
FUZZ_RAW_OBJ := $(patsubst %.c,$(FUZZ_BUILD)/obj/%.o,$(FUZZ_RAW_CMP)) \
    $(patsubst %.c,$(FUZZ_NOCMP)/%.o,$(filter-out $(FUZZ_RAW_CMP),$(FUZZ_LIB_SRC)) fuzz/fuzz_common.c)
.SECONDARY: $(FUZZ_RAW_OBJ)

$(FUZZ_BUILD)/fuzz_raw: fuzz/fuzz_raw.c $(FUZZ_RAW_OBJ)
	$(FUZZ_CC) $(LAYER_api) $(CPPFLAGS) -Ifuzz $(FUZZ_CFLAGS) -fsanitize=fuzzer $(PKG_CFLAGS) -o $@ $< $(FUZZ_RAW_OBJ) $(API_LIBS) -pthread -lm

# The gRPC transport's target drives the daemon's own code (fuzz_grpc_transport.c):
# server/ (with the OpenAPI document it embeds) and its libraries as well,
# with a worker pool without threads and a clock the harness moves
# (fuzz/step_pool.c, fuzz/step_clock.c) in place of core/pool.c and
# server/infra/clock.c. Only the transport (server/grpc/) and the harness
# feed libFuzzer their comparisons; the rest comes from $(FUZZ_NOCMP): the
# decoders and the kernel have targets of their own, and their comparisons'
# callbacks took a fifth of this target's time.
FUZZ_GRPC_SRC := $(wildcard server/grpc/*.c)
FUZZ_TRANSPORT_OBJ := $(patsubst %.c,$(FUZZ_BUILD)/obj/%.o,$(FUZZ_GRPC_SRC)) $(FUZZ_BUILD)/obj/gen/openapi.o \
    $(patsubst %.c,$(FUZZ_NOCMP)/%.o,$(filter-out core/pool.c server/infra/clock.c $(FUZZ_GRPC_SRC),$(CORE_SRC) \
        $(API_SRC) $(SERVER_SRC)) fuzz/fuzz_common.c fuzz/h2_replies.c fuzz/step_pool.c fuzz/step_clock.c)
.SECONDARY: $(FUZZ_TRANSPORT_OBJ)

$(FUZZ_NOCMP)/fuzz/step_clock.o: CPPFLAGS += -Iserver/infra

$(FUZZ_BUILD)/obj/gen/openapi.o: $(BUILD)/gen/openapi.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_BUILD)/fuzz_grpc_transport: fuzz/fuzz_grpc_transport.c $(FUZZ_TRANSPORT_OBJ)
	$(FUZZ_CC) $(LAYER_server) $(CPPFLAGS) -Ifuzz $(FUZZ_CFLAGS) -fsanitize=fuzzer $(PKG_CFLAGS) \
	    -o $@ $< $(FUZZ_TRANSPORT_OBJ) $(PKG_LIBS) -pthread -lm

# The HTTP/1.1 transport's target (fuzz_h1_transport.c) is built as the
# gRPC transport's is: the daemon's code with the threadless pool and the
# harness's clock, comparisons from the transport (server/http/, whose
# framer also reads the client's stream for the harness) and the harness.
FUZZ_HTTP_SRC := $(wildcard server/http/*.c)
FUZZ_H1T_OBJ := $(patsubst %.c,$(FUZZ_BUILD)/obj/%.o,$(FUZZ_HTTP_SRC)) $(FUZZ_BUILD)/obj/gen/openapi.o \
    $(patsubst %.c,$(FUZZ_NOCMP)/%.o,$(filter-out core/pool.c server/infra/clock.c $(FUZZ_HTTP_SRC),$(CORE_SRC) \
        $(API_SRC) $(SERVER_SRC)) fuzz/fuzz_common.c fuzz/h1_replies.c fuzz/step_pool.c fuzz/step_clock.c)
.SECONDARY: $(FUZZ_H1T_OBJ)

$(FUZZ_NOCMP)/fuzz/h1_replies.o: CPPFLAGS += -Iserver/http

$(FUZZ_BUILD)/fuzz_h1_transport: fuzz/fuzz_h1_transport.c $(FUZZ_H1T_OBJ)
	$(FUZZ_CC) $(LAYER_server) $(CPPFLAGS) -Ifuzz $(FUZZ_CFLAGS) -fsanitize=fuzzer $(PKG_CFLAGS) \
	    -o $@ $< $(FUZZ_H1T_OBJ) $(PKG_LIBS) -pthread -lm

# The HTTP/1.1 framer (fuzz_h1wire.c) is server/http/h1wire.c alone, driven
# as the unit test drives it (tests/server/harness/h1drive.h).
.SECONDARY: $(FUZZ_BUILD)/obj/server/http/h1wire.o
$(FUZZ_BUILD)/fuzz_h1wire: fuzz/fuzz_h1wire.c $(FUZZ_BUILD)/obj/server/http/h1wire.o tests/server/harness/h1drive.h
	$(FUZZ_CC) $(LAYER_server) -Itests/server $(CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer \
	    -o $@ $< $(FUZZ_BUILD)/obj/server/http/h1wire.o

# The differential target (fuzz_pbdiff.c) reads each message with protobuf-c
# too: C generated at build time by protoc-c (Debian's protobuf-c-compiler)
# from the .proto files as fuzz/pbdiff/bytes_view.py rewrites them, into
# $(FUZZ_BUILD)/pbc/ (never committed), linked with libprotobuf-c.
FUZZ_PBC_DIR   := $(FUZZ_BUILD)/pbc
FUZZ_PBC_PROTO := $(notdir $(wildcard api/proto/*.proto)) reflection.proto
FUZZ_PBC_SRC   := $(patsubst %.proto,$(FUZZ_PBC_DIR)/%.pb-c.c,$(FUZZ_PBC_PROTO))
FUZZ_PBC_OBJ   := $(FUZZ_PBC_SRC:.c=.o)
.SECONDARY: $(FUZZ_PBC_SRC) $(FUZZ_PBC_OBJ) $(FUZZ_PBC_DIR)/.stamp

$(FUZZ_PBC_DIR)/.stamp: $(wildcard api/proto/*.proto) fuzz/pbdiff/reflection.proto fuzz/pbdiff/bytes_view.py
	@mkdir -p $(@D)/proto
	for f in $(wildcard api/proto/*.proto) fuzz/pbdiff/reflection.proto; do \
	    python3 fuzz/pbdiff/bytes_view.py $$f $(@D)/proto/$$(basename $$f) || exit 1; done
	protoc-c -I$(@D)/proto --c_out=$(@D) $(addprefix $(@D)/proto/,$(FUZZ_PBC_PROTO))
	@touch $@

$(FUZZ_PBC_SRC): $(FUZZ_PBC_DIR)/.stamp ;

# Generated code: no -Werror (protoc-c's output is not ours to keep warning-free).
$(FUZZ_PBC_DIR)/%.pb-c.o: $(FUZZ_PBC_DIR)/%.pb-c.c
	$(FUZZ_CC) -std=c11 -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link -I$(FUZZ_PBC_DIR) -c $< -o $@

$(FUZZ_BUILD)/fuzz_pbdiff: fuzz/fuzz_pbdiff.c $(FUZZ_PBC_OBJ) $(FUZZ_LIB_OBJ)
	$(FUZZ_CC) $(LAYER_api) $(CPPFLAGS) -Ifuzz -I$(FUZZ_PBC_DIR) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(PKG_CFLAGS) \
	    -o $@ $< $(FUZZ_PBC_OBJ) $(FUZZ_LIB_OBJ) $(API_LIBS) -lprotobuf-c -pthread -lm

# clang and its runtimes first (an explicit step, not a prerequisite of the objects).
fuzz-build:
	@sh scripts/deps.sh fuzz
	@$(MAKE) --no-print-directory $(FUZZ_BIN)

fuzz: fuzz-build
	@FUZZ_BUILD=$(FUZZ_BUILD) sh fuzz/run.sh $(FUZZ_TIME) $(FUZZ_TARGETS)

fuzz-smoke: fuzz-build
	@FUZZ_BUILD=$(FUZZ_BUILD) sh fuzz/run.sh 0 $(FUZZ_TARGETS)

# The JSON documents' generator asks decode_dump for the dtype names (without
# it the campaign goes on without those seeds).
fuzz-campaign: fuzz-build
	-@$(MAKE) --no-print-directory $(BUILD)/tests/decode_dump
	@FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_CC="$(FUZZ_CC)" CAMPAIGN_SECONDS=$(CAMPAIGN_SECONDS) \
	    CAMPAIGN_JOBS=$(CAMPAIGN_JOBS) CAMPAIGN_RUNS=$(CAMPAIGN_RUNS) sh fuzz/campaign.sh $(FUZZ_TARGETS)

fuzz-clean:
	rm -rf $(FUZZ_BUILD)

-include $(shell find $(FUZZ_BUILD)/obj $(FUZZ_NOCMP) -name '*.d' 2>/dev/null)
