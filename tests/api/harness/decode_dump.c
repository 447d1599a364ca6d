/* decode_dump.c - the request decoders as a filter, for the differential
 * tests against well-kept readers of the same formats: Python's json module
 * (tests/api/test_json_differential.py) and numpy's .npy reader
 * (tests/api/test_npy_differential.py).
 *
 *   decode_dump v1          each document through tile_v1_json_decode
 *   decode_dump v2 VERSION  each through tile_v2_decode (the whole body JSON)
 *   decode_dump npy         each through tile_npy_decode (a whole .npy file)
 *   decode_dump dtypes      the dtype table: "canonical onnx kserve aliases..."
 *
 * Reads documents from standard input, each as "<length>\n" and that many
 * bytes (any bytes pass), and writes one JSON line per document:
 *
 *   {"ok":true,"dtype":"float32","shape":[2,2],"data":"<hex>",
 *    "strings":["<hex>",...],"repeats":[1,2]|null,"semantics":"onnx","has_semantics":B,
 *    "tiles":N|null,"axis":N|null[,"id":"<hex>"|null,"binary_output":B]}
 *   {"ok":false,"code":"invalid","message":"..."}
 *
 * (npy: only "dtype", "shape", "data" and "strings", plus "fortran_order".)
 *
 * "data" is the tensor's element bytes in host order as hex (strings: ""),
 * so float bits are compared exactly; "strings" the string elements' bytes.
 * The limits are the daemon's defaults (server/infra/config.c): --max-body
 * 256M, --max-rank 64, --max-json-depth 80.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npy.h"
#include "numfmt.h"
#include "request.h"
#include "v2.h"

static const struct tile_limits default_limits = {
    .max_body = 256u << 20,
    .max_output = 1u << 30,
    .max_stream = UINT64_C(64) << 30,
    .max_rank = 64,
    .max_depth = 80,
};

static void put_hex(const void *p, uint64_t n)
{
    const unsigned char *b = p;
    putchar('"');
    for (uint64_t i = 0; i < n; i++)
        printf("%02x", b[i]);
    putchar('"');
}

static void put_text(const char *s, size_t n)
{
    long need = tile_json_escape_text(s, n, NULL, 0);
    char *buf = malloc((size_t)need + 1);
    if (!buf) {
        fputs("\"?\"", stdout);
        return;
    }
    tile_json_escape_text(s, n, buf, (size_t)need);
    fwrite(buf, 1, (size_t)need, stdout);
    free(buf);
}

static void put_tensor(const struct tile_tensor *t)
{
    printf("{\"ok\":true,\"dtype\":\"%s\",\"shape\":[", tile_dtype_name(t->dtype));
    for (int i = 0; i < t->rank; i++)
        printf("%s%" PRId64, i ? "," : "", t->shape[i]);
    printf("],\"data\":");
    if (tile_dtype_is_string(t->dtype)) {
        printf("\"\",\"strings\":[");
        const struct tile_str *s = t->data;
        for (uint64_t i = 0; i < t->nelem; i++) {
            if (i)
                putchar(',');
            put_hex(s[i].ptr, s[i].len);
        }
        putchar(']');
    } else {
        put_hex(t->data, t->nelem * tile_dtype_size(t->dtype));
        printf(",\"strings\":null");
    }
}

static void put_request(const struct tile_request *r)
{
    put_tensor(&r->input);
    printf(",\"repeats\":");
    if (r->has_repeats) {
        putchar('[');
        for (int i = 0; i < r->nrepeats; i++)
            printf("%s%" PRId64, i ? "," : "", r->repeats[i]);
        putchar(']');
    } else {
        printf("null");
    }
    printf(",\"semantics\":\"%s\",\"has_semantics\":%s", tile_semantics_name(r->semantics),
           r->has_semantics ? "true" : "false");
    if (r->has_tiles)
        printf(",\"tiles\":%" PRId64, r->tiles);
    else
        printf(",\"tiles\":null");
    if (r->has_axis)
        printf(",\"axis\":%" PRId64, r->axis);
    else
        printf(",\"axis\":null");
}

static void put_error(const struct tile_error *e)
{
    printf("{\"ok\":false,\"code\":\"%s\",\"message\":", tile_errcode_name(e->code));
    put_text(e->text, strlen(e->text));
    printf("}\n");
}

static int dump_dtypes(void)
{
    for (int d = 0; d < TILE_DTYPE_COUNT; d++) {
        const struct tile_dtype_traits *tr = tile_dtype_traits((enum tile_dtype)d);
        printf("%s %s %s %s\n", tr->name, tr->onnx ? tr->onnx : "-", tr->kserve ? tr->kserve : "-",
               tr->aliases ? tr->aliases : "");
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "dtypes") == 0)
        return dump_dtypes();
    bool v2 = argc >= 3 && strcmp(argv[1], "v2") == 0;
    bool npy = argc == 2 && strcmp(argv[1], "npy") == 0;
    if (!v2 && !npy && !(argc == 2 && strcmp(argv[1], "v1") == 0)) {
        fprintf(stderr, "usage: decode_dump v1 | v2 VERSION | npy | dtypes\n");
        return 2;
    }
    int version = v2 ? atoi(argv[2]) : 0;
    size_t len;
    while (scanf("%zu", &len) == 1 && getchar() == '\n') {
        char *s = malloc(len ? len : 1);
        if (!s || fread(s, 1, len, stdin) != len) {
            fprintf(stderr, "decode_dump: a short document\n");
            free(s);
            return 2;
        }
        struct tile_error e;
        tile_error_clear(&e);
        if (npy) {
            struct tile_tensor t;
            struct tile_npy_header h;
            if (tile_npy_decode(s, len, default_limits.max_rank, default_limits.max_body, &t, &h, &e) < 0) {
                put_error(&e);
            } else {
                put_tensor(&t);
                printf(",\"fortran_order\":%s}\n", h.fortran_order ? "true" : "false");
                tile_tensor_free(&t);
            }
        } else if (v2) {
            struct tile_v2_request r;
            if (tile_v2_decode(s, len, -1, version, &default_limits, &r, &e) < 0) {
                put_error(&e);
            } else {
                put_request(&r.treq);
                printf(",\"id\":");
                if (r.has_id)
                    put_hex(r.id, r.id_len);
                else
                    printf("null");
                printf(",\"binary_output\":%s}\n", r.binary_output ? "true" : "false");
            }
            tile_v2_request_free(&r);
        } else {
            struct tile_request r;
            tile_request_init(&r);
            if (tile_v1_json_decode(s, len, &default_limits, &r, &e) < 0) {
                put_error(&e);
            } else {
                put_request(&r);
                printf("}\n");
            }
            tile_request_free(&r);
        }
        fflush(stdout);
        free(s);
    }
    return 0;
}
