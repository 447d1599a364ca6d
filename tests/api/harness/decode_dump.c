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
 * JSON documents go through both of the decoders' readers: the one-pass
 * reader of the usual layout (jsonquick.h), where it takes the document,
 * and the general one alone. Their lines must be the same; the line then
 * says which read it ("quick":true when the one-pass reader did). Where
 * they differ the line is {"ok":false,"code":"readers-disagree",...}.
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

#include "jsonquick.h"
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

static void put_hex(FILE *f, const void *p, uint64_t n)
{
    const unsigned char *b = p;
    fputc('"', f);
    for (uint64_t i = 0; i < n; i++)
        fprintf(f, "%02x", b[i]);
    fputc('"', f);
}

static void put_text(FILE *f, const char *s, size_t n)
{
    long need = tile_json_escape_text(s, n, NULL, 0);
    char *buf = malloc((size_t)need + 1);
    if (!buf) {
        fputs("\"?\"", f);
        return;
    }
    tile_json_escape_text(s, n, buf, (size_t)need);
    fwrite(buf, 1, (size_t)need, f);
    free(buf);
}

static void put_tensor(FILE *f, const struct tile_tensor *t)
{
    fprintf(f, "{\"ok\":true,\"dtype\":\"%s\",\"shape\":[", tile_dtype_name(t->dtype));
    for (int i = 0; i < t->rank; i++)
        fprintf(f, "%s%" PRId64, i ? "," : "", t->shape[i]);
    fprintf(f, "],\"data\":");
    if (tile_dtype_is_string(t->dtype)) {
        fprintf(f, "\"\",\"strings\":[");
        const struct tile_str *s = t->data;
        for (uint64_t i = 0; i < t->nelem; i++) {
            if (i)
                fputc(',', f);
            put_hex(f, s[i].ptr, s[i].len);
        }
        fputc(']', f);
    } else {
        put_hex(f, t->data, t->nelem * tile_dtype_size(t->dtype));
        fprintf(f, ",\"strings\":null");
    }
}

static void put_request(FILE *f, const struct tile_request *r)
{
    put_tensor(f, &r->input);
    fprintf(f, ",\"repeats\":");
    if (r->has_repeats) {
        fputc('[', f);
        for (int i = 0; i < r->nrepeats; i++)
            fprintf(f, "%s%" PRId64, i ? "," : "", r->repeats[i]);
        fputc(']', f);
    } else {
        fprintf(f, "null");
    }
    fprintf(f, ",\"semantics\":\"%s\",\"has_semantics\":%s", tile_semantics_name(r->semantics),
           r->has_semantics ? "true" : "false");
    if (r->has_tiles)
        fprintf(f, ",\"tiles\":%" PRId64, r->tiles);
    else
        fprintf(f, ",\"tiles\":null");
    if (r->has_axis)
        fprintf(f, ",\"axis\":%" PRId64, r->axis);
    else
        fprintf(f, ",\"axis\":null");
}

static void put_error(FILE *f, const struct tile_error *e)
{
    fprintf(f, "{\"ok\":false,\"code\":\"%s\",\"message\":", tile_errcode_name(e->code));
    put_text(f, e->text, strlen(e->text));
    fprintf(f, "}\n");
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

/* One document through its decoder, as one line written to f. */
static void decode_one(FILE *f, const char *kind, int version, const char *s, size_t len)
{
    struct tile_error e;
    tile_error_clear(&e);
    if (strcmp(kind, "npy") == 0) {
        struct tile_tensor t;
        struct tile_npy_header h;
        if (tile_npy_decode(s, len, default_limits.max_rank, default_limits.max_body, &t, &h, &e) < 0) {
            put_error(f, &e);
        } else {
            put_tensor(f, &t);
            fprintf(f, ",\"fortran_order\":%s}\n", h.fortran_order ? "true" : "false");
            tile_tensor_free(&t);
        }
    } else if (strcmp(kind, "v2") == 0) {
        struct tile_v2_request r;
        if (tile_v2_decode(s, len, -1, version, &default_limits, &r, &e) < 0) {
            put_error(f, &e);
        } else {
            put_request(f, &r.treq);
            fprintf(f, ",\"id\":");
            if (r.has_id)
                put_hex(f, r.id, r.id_len);
            else
                fprintf(f, "null");
            fprintf(f, ",\"binary_output\":%s}\n", r.binary_output ? "true" : "false");
        }
        tile_v2_request_free(&r);
    } else {
        struct tile_request r;
        tile_request_init(&r);
        if (tile_v1_json_decode(s, len, &default_limits, &r, &e) < 0) {
            put_error(f, &e);
        } else {
            put_request(f, &r);
            fprintf(f, "}\n");
        }
        tile_request_free(&r);
    }
}

/* The line for one JSON document: decoded by the one-pass reader where it
 * can (jsonquick.h) and by the general reader alone, which must agree; a
 * "quick" member says which read it. A disagreement is a line of its own
 * that no expectation matches. */
static void decode_both(const char *kind, int version, const char *s, size_t len)
{
    char *line[2] = {NULL, NULL};
    size_t n[2];
    bool quick = false;
    for (int general = 0; general < 2; general++) {
        FILE *f = open_memstream(&line[general], &n[general]);
        if (!f) {
            fprintf(stderr, "decode_dump: out of memory\n");
            exit(2);
        }
        tile_jq_set_enabled(!general);
        uint64_t before = tile_jq_taken();
        decode_one(f, kind, version, s, len);
        if (!general)
            quick = tile_jq_taken() > before;
        fclose(f);
    }
    tile_jq_set_enabled(true);
    if (n[0] != n[1] || memcmp(line[0], line[1], n[0]) != 0) {
        printf("{\"ok\":false,\"code\":\"readers-disagree\",\"message\":");
        line[0][n[0] - 1] = line[1][n[1] - 1] = '\0'; /* the newlines */
        put_text(stdout, line[0], n[0] - 1);
        printf(",\"general\":");
        put_text(stdout, line[1], n[1] - 1);
        printf("}\n");
    } else {
        /* the line ends in "}\n": the member goes before them */
        printf("%.*s,\"quick\":%s}\n", (int)(n[0] - 2), line[0], quick ? "true" : "false");
    }
    free(line[0]);
    free(line[1]);
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
        if (npy)
            decode_one(stdout, "npy", 0, s, len);
        else
            decode_both(argv[1], version, s, len);
        fflush(stdout);
        free(s);
    }
    return 0;
}
