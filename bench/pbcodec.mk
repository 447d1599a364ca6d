# pbcodec.mk - the codec decision's numbers (included by the Makefile):
# protobuf-c's generated ModelInferRequest reader against tiled's own
# (bench/bench_pbcodec.c; the figures are in docs/performance.md).
#
#   make bench-pbcodec   callgrind instructions per small call, heap and
#                        copies for a 64 MiB request, lines of code
#
# protoc-c (Debian's protobuf-c-compiler) generates the C of the unmodified
# api/proto/ files into $(BUILD)/pbcodec/ at build time; nothing generated
# is committed and the daemon does not link it.
PBCODEC_DIR := $(BUILD)/pbcodec
PBCODEC_N   ?= 20000

$(PBCODEC_DIR)/.stamp: $(wildcard api/proto/*.proto)
	@mkdir -p $(@D)
	protoc-c -Iapi/proto --c_out=$(@D) $(wildcard api/proto/*.proto)
	@touch $@

$(PBCODEC_DIR)/bench_pbcodec: bench/bench_pbcodec.c $(PBCODEC_DIR)/.stamp $(LIB_OBJ)
	$(CC) $(LAYER_api) $(CPPFLAGS) -std=c11 $(OPT) -g -pthread -I$(PBCODEC_DIR) $(PKG_CFLAGS) $(LDFLAGS) \
	    -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free,--wrap=posix_memalign,--wrap=mmap,--wrap=munmap -o $@ bench/bench_pbcodec.c \
	    $(PBCODEC_DIR)/grpc_service.pb-c.c $(PBCODEC_DIR)/model_config.pb-c.c $(LIB_OBJ) $(PKG_LIBS) \
	    -lprotobuf-c $(LDLIBS)

.PHONY: bench-pbcodec
bench-pbcodec: $(PBCODEC_DIR)/bench_pbcodec
	@sh scripts/deps.sh build fuzz test
	sh bench/pbcodec.sh $(PBCODEC_DIR) $(PBCODEC_N)
