/* bench_pbcodec.c - the codec decision in numbers: protobuf-c's generated
 * reader of ModelInferRequest (protoc-c over api/proto/, generated at build
 * time; bench/pbcodec.mk) against tiled's hand-written one
 * (tile_grpc_infer_decode).
 *
 *   bench_pbcodec small N   N decodes of a small request (tritonclient's
 *                           shape: two raw inputs), each way; run under
 *                           callgrind (make bench-pbcodec) for instructions
 *   bench_pbcodec big       one 64 MiB raw_input_contents request: bytes
 *                           allocated, bytes copied and peak heap of each way
 *
 * Three ways are measured, each ending where the daemon needs to be (input
 * tensors, or protobuf-c's structure for the comparison of the reader alone):
 *   pbc_unpack   protobuf_c_message_unpack + free (the reader alone)
 *   pbc_tensors  the same, then each raw input made a tensor by the same
 *                raw decoder tiled uses (what the daemon would run with it)
 *   tiled        tile_grpc_infer_decode + free
 * Heap figures come from malloc, calloc, realloc, free, posix_memalign,
 * mmap and munmap wrapped at link time (-Wl,--wrap) for tiled's objects and from a counting
 * ProtobufCAllocator for protobuf-c. */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>

#include <protobuf-c/protobuf-c.h>

#include "grpc_infer.h"
#include "grpc_service.pb-c.h"
#include "pbwire.h"
#include "v2.h"

/* ---- heap accounting ----------------------------------------------------------- */

static size_t live, peak, allocated, copies;

/* An allocation of the raw data's size can only be filled with a copy of
 * it: nothing else in the request is that large. */
#define BIG ((size_t)64 << 20)

static void count_bytes(size_t n);

static void count_alloc(void *p)
{
    if (p)
        count_bytes(malloc_usable_size(p));
}

/* Anonymous mappings (tiled's buffers above 2 MiB, core/tensor.c) count
 * by their length. */
static void count_bytes(size_t n)
{
    live += n;
    allocated += n;
    copies += n >= BIG;
    if (live > peak)
        peak = live;
}

void *__real_malloc(size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);
void *__real_mmap(void *a, size_t n, int prot, int flags, int fd, off_t off);
int __real_munmap(void *a, size_t n);
int __wrap_posix_memalign(void **p, size_t align, size_t n);
void *__wrap_mmap(void *a, size_t n, int prot, int flags, int fd, off_t off);
int __wrap_munmap(void *a, size_t n);

int __wrap_posix_memalign(void **p, size_t align, size_t n)
{
    int rc = __real_posix_memalign(p, align, n);
    if (rc == 0)
        count_alloc(*p);
    return rc;
}

void *__wrap_mmap(void *a, size_t n, int prot, int flags, int fd, off_t off)
{
    void *p = __real_mmap(a, n, prot, flags, fd, off);
    if (p != MAP_FAILED && (flags & MAP_ANONYMOUS))
        count_bytes(n);
    return p;
}

int __wrap_munmap(void *a, size_t n)
{
    live -= n;
    return __real_munmap(a, n);
}

void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t k, size_t n);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);

void *__wrap_malloc(size_t n)
{
    void *p = __real_malloc(n);
    count_alloc(p);
    return p;
}

void *__wrap_calloc(size_t k, size_t n)
{
    void *p = __real_calloc(k, n);
    count_alloc(p);
    return p;
}

void *__wrap_realloc(void *p, size_t n)
{
    if (p)
        live -= malloc_usable_size(p);
    void *q = __real_realloc(p, n);
    count_alloc(q);
    return q;
}

void __wrap_free(void *p)
{
    if (p)
        live -= malloc_usable_size(p);
    __real_free(p);
}

static void *pbc_alloc(void *data, size_t n)
{
    (void)data;
    return __wrap_malloc(n);
}

static void pbc_free(void *data, void *p)
{
    (void)data;
    __wrap_free(p);
}

static ProtobufCAllocator counting = {pbc_alloc, pbc_free, NULL};

/* ---- the requests ------------------------------------------------------------- */

/* ModelInferRequest{model_name "tile", inputs [input FP32 shape, repeats
 * INT64 [rank]], raw_input_contents [data, repeats]} written by the
 * protobuf-c packer (the bytes any protobuf library writes for it). */
static uint8_t *make_request(size_t nfloats, size_t *len)
{
    int64_t shape_in[2] = {(int64_t)(nfloats / 2), 2}, shape_rep[1] = {2}, reps[2] = {1, 2};
    Inference__ModelInferRequest__InferInputTensor in = INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__INIT,
                                                   rep = INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__INIT;
    in.name = "input";
    in.datatype = "FP32";
    in.n_shape = 2;
    in.shape = shape_in;
    rep.name = "repeats";
    rep.datatype = "INT64";
    rep.n_shape = 1;
    rep.shape = shape_rep;
    Inference__ModelInferRequest__InferInputTensor *inputs[2] = {&in, &rep};
    float *data = __real_malloc(nfloats * sizeof(float));
    for (size_t i = 0; i < nfloats; i++)
        data[i] = (float)i;
    ProtobufCBinaryData raw[2] = {{nfloats * sizeof(float), (uint8_t *)data}, {sizeof(reps), (uint8_t *)reps}};
    Inference__ModelInferRequest r = INFERENCE__MODEL_INFER_REQUEST__INIT;
    r.model_name = "tile";
    r.model_version = "";
    r.id = "";
    r.n_inputs = 2;
    r.inputs = inputs;
    r.n_raw_input_contents = 2;
    r.raw_input_contents = raw;
    *len = inference__model_infer_request__get_packed_size(&r);
    uint8_t *msg = __real_malloc(*len);
    inference__model_infer_request__pack(&r, msg);
    __real_free(data);
    return msg;
}

static const struct tile_limits limits = {
    .max_body = 1ull << 31, .max_output = 1ull << 31, .max_stream = 1ull << 31, .max_rank = 64, .max_depth = 64};

/* ---- the three ways ------------------------------------------------------------ */

__attribute__((noinline)) int run_pbc_unpack(const uint8_t *msg, size_t len);
__attribute__((noinline)) int run_pbc_tensors(const uint8_t *msg, size_t len);
__attribute__((noinline)) int run_tiled(const uint8_t *msg, size_t len);

int run_pbc_unpack(const uint8_t *msg, size_t len)
{
    Inference__ModelInferRequest *r = inference__model_infer_request__unpack(&counting, len, msg);
    if (!r)
        return -1;
    int n = (int)r->n_inputs;
    inference__model_infer_request__free_unpacked(r, &counting);
    return n;
}

int run_pbc_tensors(const uint8_t *msg, size_t len)
{
    Inference__ModelInferRequest *r = inference__model_infer_request__unpack(&counting, len, msg);
    if (!r)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < r->n_inputs && i < r->n_raw_input_contents && rc == 0; i++) {
        const Inference__ModelInferRequest__InferInputTensor *in = r->inputs[i];
        struct tile_tensor t;
        struct tile_error e = {0};
        enum tile_dtype dt = tile_dtype_parse_kserve(in->datatype, strlen(in->datatype));
        rc = tile_v2_raw_tensor(r->raw_input_contents[i].data, r->raw_input_contents[i].len, dt, (int)in->n_shape,
                                in->shape, &limits, &t, &e);
        if (rc == 0)
            tile_tensor_free(&t);
        tile_error_clear(&e);
    }
    inference__model_infer_request__free_unpacked(r, &counting);
    return rc;
}

int run_tiled(const uint8_t *msg, size_t len)
{
    struct tile_grpc_infer_request r;
    struct tile_error e = {0};
    int rc = tile_grpc_infer_decode(msg, len, &limits, &r, &e);
    if (rc < 0)
        fprintf(stderr, "tiled: %s\n", e.text);
    tile_grpc_infer_request_free(&r);
    tile_error_clear(&e);
    return rc;
}

static const struct way {
    const char *name;
    int (*run)(const uint8_t *, size_t);
} ways[] = {{"pbc_unpack", run_pbc_unpack}, {"pbc_tensors", run_pbc_tensors}, {"tiled", run_tiled}};

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "small")) {
        long n = argc >= 3 ? atol(argv[2]) : 100000;
        size_t len;
        uint8_t *msg = make_request(4, &len);
        printf("small request: %zu bytes, %ld calls each\n", len, n);
        for (size_t w = 0; w < sizeof(ways) / sizeof(ways[0]); w++) {
            for (long i = 0; i < n; i++) {
                if (ways[w].run(msg, len) < 0)
                    return 1;
            }
        }
        __real_free(msg);
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "big")) {
        size_t len;
        uint8_t *msg = make_request(BIG / sizeof(float), &len);
        printf("big request: %zu bytes (64 MiB raw_input_contents)\n", len);
        printf("%-12s %16s %16s %16s\n", "way", "allocated_B", "peak_heap_B", "copied_B");
        for (size_t w = 0; w < sizeof(ways) / sizeof(ways[0]); w++) {
            live = peak = allocated = copies = 0;
            if (ways[w].run(msg, len) < 0)
                return 1;
            printf("%-12s %16zu %16zu %16zu\n", ways[w].name, allocated, peak, copies * BIG);
        }
        __real_free(msg);
        return 0;
    }
    fprintf(stderr, "usage: %s small [N] | big\n", argv[0]);
    return 2;
}
