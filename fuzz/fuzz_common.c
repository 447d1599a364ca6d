/* fuzz_common.c - checks shared by the libFuzzer targets (fuzz_common.h). */
#include "fuzz_common.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonlex.h"
#include "npy.h"

const struct tile_limits fuzz_limits = {
    .max_body = FUZZ_MAX_BYTES,
    .max_output = FUZZ_MAX_BYTES,
    .max_stream = FUZZ_MAX_BYTES,
    .max_rank = 16,
    .max_depth = 64,
};

void fuzz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("fuzz check failed: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

void fuzz_check_result(int rc, const struct tile_error *e, const char *what)
{
    static int verbose = -1;
    if (verbose < 0)
        verbose = getenv("FUZZ_VERBOSE") != NULL;
    if (verbose)
        fprintf(stderr, "%s: %s\n", what, rc == 0 ? "ok" : e->text);
    FUZZ_CHECK(rc == 0 || rc == -1, "%s returned %d", what, rc);
    if (rc < 0) {
        FUZZ_CHECK(e->code != TILE_OK && e->code < TILE_ERRCODE_COUNT, "%s failed without an error code", what);
        FUZZ_CHECK(e->text[0] != '\0', "%s failed without a message", what);
        FUZZ_CHECK(memchr(e->text, '\0', sizeof(e->text)) != NULL, "%s: message not terminated", what);
    } else {
        FUZZ_CHECK(e->code == TILE_OK, "%s succeeded but recorded an error: %s", what, e->text);
    }
}

void fuzz_check_tensor(const struct tile_tensor *t, int max_rank)
{
    const struct tile_dtype_traits *tr = tile_dtype_traits(t->dtype);
    FUZZ_CHECK(tr != NULL, "decoded tensor has dtype %d", (int)t->dtype);
    FUZZ_CHECK(t->rank >= 0 && t->rank <= max_rank, "decoded tensor has rank %d (limit %d)", t->rank, max_rank);
    uint64_t n = 1;
    for (int i = 0; i < t->rank; i++) {
        FUZZ_CHECK(t->shape[i] >= 0, "decoded tensor has shape[%d] = %lld", i, (long long)t->shape[i]);
        FUZZ_CHECK(!__builtin_mul_overflow(n, (uint64_t)t->shape[i], &n), "decoded shape overflows");
    }
    FUZZ_CHECK(n == t->nelem, "decoded tensor has nelem %llu but its shape holds %llu", (unsigned long long)t->nelem,
               (unsigned long long)n);
    FUZZ_CHECK(t->nelem == 0 || t->data != NULL, "decoded tensor has no element buffer");
    FUZZ_CHECK(tile_tensor_nbytes(t) <= (uint64_t)FUZZ_MAX_BYTES * 16, "decoded tensor of %llu bytes",
               (unsigned long long)tile_tensor_nbytes(t));
    if (t->dtype != TILE_STRING) {
        FUZZ_CHECK(t->blob == NULL, "numeric tensor owns a string blob");
        return;
    }
    const struct tile_str *s = t->data;
    uint64_t total = 0;
    for (uint64_t i = 0; i < t->nelem; i++) {
        total += s[i].len;
        if (s[i].len == 0)
            continue;
        FUZZ_CHECK(t->blob && s[i].ptr >= t->blob && s[i].len <= t->blob_len &&
                       (uint64_t)(s[i].ptr - t->blob) <= t->blob_len - s[i].len,
                   "string element %llu lies outside the tensor's blob", (unsigned long long)i);
    }
    FUZZ_CHECK(total <= t->blob_len, "strings total %llu bytes but the blob has %llu", (unsigned long long)total,
               (unsigned long long)t->blob_len);
}

/* ---- equality ------------------------------------------------------------- */

static bool float_is_nan(const unsigned char *p, size_t size, bool bfloat)
{
    if (size == 2) {
        uint16_t v;
        memcpy(&v, p, 2);
        return bfloat ? (v & 0x7F80) == 0x7F80 && (v & 0x007F) : (v & 0x7C00) == 0x7C00 && (v & 0x03FF);
    }
    if (size == 4) {
        float f;
        memcpy(&f, p, 4);
        return isnan(f);
    }
    double d;
    memcpy(&d, p, 8);
    return isnan(d);
}

/* Floats of `size` bytes (one scalar unit) as JSON carries them. */
static bool float_equal(const unsigned char *a, const unsigned char *b, size_t size, bool bfloat, bool json)
{
    if (json && float_is_nan(a, size, bfloat) && float_is_nan(b, size, bfloat))
        return true;
    return memcmp(a, b, size) == 0;
}

static bool element_equal(const struct tile_dtype_traits *tr, const unsigned char *a, const unsigned char *b,
                          bool json)
{
    switch (tr->cls) {
    case TILE_CLASS_BOOL:
        return json ? (a[0] != 0) == (b[0] != 0) : a[0] == b[0];
    case TILE_CLASS_FLOAT:
    case TILE_CLASS_BFLOAT:
        return float_equal(a, b, tr->size, tr->cls == TILE_CLASS_BFLOAT, json);
    case TILE_CLASS_COMPLEX:
        return float_equal(a, b, tr->size / 2, false, json) &&
               float_equal(a + tr->size / 2, b + tr->size / 2, tr->size / 2, false, json);
    default:
        return memcmp(a, b, tr->size) == 0;
    }
}

static bool string_equal(const struct tile_str *got, const struct tile_str *want, bool npy_strings)
{
    uint64_t wl = want->len;
    while (npy_strings && wl && want->ptr[wl - 1] == '\0')
        wl--;
    return got->len == wl && (wl == 0 || memcmp(got->ptr, want->ptr, (size_t)wl) == 0);
}

bool fuzz_tensor_equal(const struct tile_tensor *got, const struct tile_tensor *want, bool json, bool npy_strings)
{
    if (got->dtype != want->dtype || got->rank != want->rank || got->nelem != want->nelem)
        return false;
    for (int i = 0; i < got->rank; i++) {
        if (got->shape[i] != want->shape[i])
            return false;
    }
    const struct tile_dtype_traits *tr = tile_dtype_traits(got->dtype);
    for (uint64_t i = 0; i < got->nelem; i++) {
        if (tr->cls == TILE_CLASS_STRING) {
            if (!string_equal((const struct tile_str *)got->data + i, (const struct tile_str *)want->data + i,
                              npy_strings))
                return false;
        } else if (!element_equal(tr, (const unsigned char *)got->data + i * tr->size,
                                  (const unsigned char *)want->data + i * tr->size, json)) {
            return false;
        }
    }
    return true;
}

void fuzz_check_same_request(const struct tile_request *quick, const struct tile_request *general)
{
    const struct tile_request *a = quick, *b = general;
    FUZZ_CHECK(fuzz_tensor_equal(&a->input, &b->input, false, false),
               "the one-pass reader's input differs from the general reader's");
    FUZZ_CHECK(a->has_repeats == b->has_repeats && a->nrepeats == b->nrepeats &&
                   (a->nrepeats <= 0 || memcmp(a->repeats, b->repeats, sizeof(a->repeats[0]) * (size_t)a->nrepeats) == 0),
               "the one-pass reader's repeats differ from the general reader's");
    FUZZ_CHECK(a->semantics == b->semantics && a->has_semantics == b->has_semantics && a->has_tiles == b->has_tiles &&
                   a->has_axis == b->has_axis && (!a->has_tiles || a->tiles == b->tiles) &&
                   (!a->has_axis || a->axis == b->axis),
               "the one-pass reader's semantics, tiles or axis differ from the general reader's");
}

/* ---- bodies ---------------------------------------------------------------- */

void fuzz_check_json(const char *buf, size_t len, const char *what)
{
    struct tile_json_lexer lx;
    struct tile_json_token t;
    struct tile_error e = {0};
    tile_json_lexer_init(&lx, buf, len, 0);
    do {
        FUZZ_CHECK(tile_json_next(&lx, &t, &e) == 0, "%s is not valid JSON: %s", what, e.text);
    } while (t.type != TILE_JSON_END);
}

int fuzz_expected_output(const struct tile_plan *plan, const struct tile_tensor *in, struct tile_tensor *out)
{
    if (tile_tensor_init(out, plan->dtype, plan->out_rank, plan->out_shape, (uint64_t)FUZZ_MAX_BYTES * 2, NULL) < 0)
        return -1;
    FUZZ_CHECK(tile_tensor_nbytes(out) == plan->out_bytes, "plan says %llu output bytes, the tensor has %llu",
               (unsigned long long)plan->out_bytes, (unsigned long long)tile_tensor_nbytes(out));
    tile_execute(plan, in->data, out->data, NULL);
    return 0;
}

static uint64_t fuzz_rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

struct tile_request fuzz_borrowed_request(const struct tile_request *r)
{
    struct tile_request view = *r;
    view.input.owns_data = false;
    view.input.blob = NULL;
    return view;
}

void fuzz_read_body(struct tile_encoder *enc, struct tile_encoder *again, char **body)
{
    uint64_t size = tile_encoder_size(enc);
    FUZZ_CHECK(size <= FUZZ_MAX_BYTES, "body of %llu bytes passed the limit", (unsigned long long)size);
    FUZZ_CHECK(tile_encoder_size(again) == size, "two encoders of one request disagree on the size");
    char *whole = malloc((size_t)size + 1), *pieces = malloc((size_t)size + 1);
    if (!whole || !pieces)
        fuzz_fail("out of memory");
    size_t n = tile_encoder_read(enc, whole, (size_t)size + 1);
    FUZZ_CHECK(n == size, "one read gave %zu bytes of a %llu byte body", n, (unsigned long long)size);
    FUZZ_CHECK(tile_encoder_read(enc, whole + size, 1) == 0, "read past the end of the body gave bytes");
    uint64_t pos = 0, seed = 0x9E3779B97F4A7C15u ^ size;
    while (pos < size) {
        uint64_t r = fuzz_rng(&seed);
        size_t cap = 1 + (size_t)(r % ((r >> 32) & 1 ? 7 : 5000));
        size_t want = size - pos < cap ? (size_t)(size - pos) : cap;
        size_t got = tile_encoder_read(again, pieces + pos, cap);
        FUZZ_CHECK(got == want, "read of %zu at %llu gave %zu bytes (expected %zu)", cap, (unsigned long long)pos,
                   got, want);
        pos += got;
    }
    FUZZ_CHECK(tile_encoder_read(again, pieces + size, 1) == 0, "piecewise read went past the end");
    FUZZ_CHECK(memcmp(whole, pieces, (size_t)size) == 0, "body read in pieces differs from the body read at once");
    free(pieces);
    *body = whole;
}

void fuzz_check_json_data(const char *data, uint64_t len, const struct tile_plan *plan,
                          enum tile_json_complex form, const struct tile_tensor *want)
{
    char *doc = malloc((size_t)len + 2);
    if (!doc)
        fuzz_fail("out of memory");
    doc[0] = '[';
    memcpy(doc + 1, data, (size_t)len);
    doc[len + 1] = ']';
    struct tile_json_lexer lx;
    struct tile_json_token end;
    struct tile_error e = {0};
    struct tile_tensor t;
    struct tile_json_data_opts o = {plan->dtype, plan->out_rank, plan->out_shape, form, 0, 0, NULL};
    tile_json_lexer_init(&lx, doc, (size_t)len + 2, 0);
    if (tile_json_read_data(&lx, &o, &t, &e) < 0)
        fuzz_fail("the JSON output data does not read back: %s", e.text);
    FUZZ_CHECK(tile_json_next(&lx, &end, &e) == 0 && end.type == TILE_JSON_END, "JSON output data has a tail");
    FUZZ_CHECK(fuzz_tensor_equal(&t, want, true, false), "JSON output data reads back as other values");
    tile_tensor_free(&t);
    free(doc);
}

void fuzz_check_raw_data(const char *data, uint64_t len, const struct tile_plan *plan,
                         const struct tile_tensor *want)
{
    if (plan->dtype != TILE_STRING) {
        FUZZ_CHECK(len == plan->out_bytes, "raw data has %llu bytes, the plan %llu", (unsigned long long)len,
                   (unsigned long long)plan->out_bytes);
        FUZZ_CHECK(len == 0 || memcmp(data, want->data, (size_t)len) == 0, "raw data differs from tile_execute()");
        return;
    }
    struct tile_tensor t;
    struct tile_error e = {0};
    FUZZ_CHECK(tile_tensor_init(&t, TILE_STRING, plan->out_rank, plan->out_shape, 0, &e) == 0, "%s", e.text);
    if (tile_strings_from_wire(data, (size_t)len, &t, &e) < 0)
        fuzz_fail("raw string output does not read back: %s", e.text);
    FUZZ_CHECK(fuzz_tensor_equal(&t, want, false, false), "raw string output reads back as other strings");
    tile_tensor_free(&t);
}

/* ---- the /v1 path --------------------------------------------------------- */

static void check_body(enum tile_format fmt, const struct tile_encoder *enc, char *body, const struct tile_plan *plan,
                       const struct tile_tensor *want)
{
    uint64_t size = tile_encoder_size(enc), head_len, data_len;
    tile_encoder_sections(enc, &head_len, &data_len);
    FUZZ_CHECK(head_len + data_len <= size, "encoder sections exceed the body");
    if (fmt == TILE_FMT_JSON) {
        fuzz_check_json(body, (size_t)size, "the JSON body");
        fuzz_check_json_data(body + head_len, data_len, plan, TILE_JSON_COMPLEX_PAIRS, want);
        uint64_t n = tile_encoder_rewrite_metrics(enc, body);
        FUZZ_CHECK(n <= size, "rewritten metrics made the body longer");
        fuzz_check_json(body, (size_t)n, "the JSON body with rewritten metrics");
    } else if (fmt == TILE_FMT_RAW) {
        FUZZ_CHECK(head_len == 0 && data_len == size, "raw body has a head or a tail");
        fuzz_check_raw_data(body, size, plan, want);
    } else {
        struct tile_tensor t;
        struct tile_error e = {0};
        if (tile_npy_decode(body, (size_t)size, 0, 0, &t, NULL, &e) < 0)
            fuzz_fail(".npy body does not decode: %s", e.text);
        FUZZ_CHECK(fuzz_tensor_equal(&t, want, false, true), ".npy body decodes to other values");
        tile_tensor_free(&t);
    }
}

void fuzz_encode_request(const struct tile_request *r)
{
    struct tile_spec spec;
    struct tile_plan plan;
    struct tile_error e = {0};
    if (tile_request_spec(r, &fuzz_limits, &spec, &e) < 0) {
        fuzz_check_result(-1, &e, "tile_request_spec");
        return;
    }
    int rc = tile_plan_init(&plan, r->input.dtype, r->input.rank, r->input.shape, &spec, &e);
    fuzz_check_result(rc, &e, "tile_plan_init");
    if (rc < 0)
        return;
    FUZZ_CHECK(plan.out_bytes <= FUZZ_MAX_BYTES, "plan of %llu bytes passed the limit",
               (unsigned long long)plan.out_bytes);
    FUZZ_CHECK(plan.out_rank <= fuzz_limits.max_rank, "plan of rank %d passed the limit", plan.out_rank);
    FUZZ_CHECK(plan.in_elems == r->input.nelem, "plan counts %llu input elements, the tensor %llu",
               (unsigned long long)plan.in_elems, (unsigned long long)r->input.nelem);
    struct tile_tensor want;
    if (fuzz_expected_output(&plan, &r->input, &want) < 0)
        return;
    static const struct tile_timings tm = {1, 22, 333, 4444, 9999999999u};
    for (int f = 0; f < TILE_FMT_COUNT; f++) {
        enum tile_format fmt = (enum tile_format)f;
        tile_error_clear(&e);
        struct tile_request view = fuzz_borrowed_request(r), view2 = fuzz_borrowed_request(r);
        struct tile_encoder *enc = tile_encoder_new(fmt, &plan, &view, NULL, FUZZ_MAX_BYTES, &e), *again;
        if (!enc) {
            fuzz_check_result(-1, &e, "tile_encoder_new");
            bool refusal = e.code == TILE_ETOOBIG ||
                           (e.code == TILE_ENOTACCEPT && fmt == TILE_FMT_JSON && plan.dtype == TILE_STRING) ||
                           (e.code == TILE_ENOTACCEPT && fmt == TILE_FMT_NPY && plan.dtype == TILE_BFLOAT16);
            FUZZ_CHECK(refusal, "encoder refused a planned %s output as %s: %s", tile_dtype_name(plan.dtype),
                       tile_format_media_type(fmt), e.text);
            continue;
        }
        FUZZ_CHECK(e.code == TILE_OK, "encoder succeeded but recorded an error: %s", e.text);
        again = tile_encoder_new(fmt, &plan, &view2, NULL, FUZZ_MAX_BYTES, &e);
        FUZZ_CHECK(again != NULL, "a second encoder failed: %s", e.text);
        tile_encoder_set_timings(enc, &tm);
        tile_encoder_set_timings(again, &tm);
        char *body;
        fuzz_read_body(enc, again, &body);
        check_body(fmt, enc, body, &plan, &want);
        free(body);
        tile_encoder_free(enc);
        tile_encoder_free(again);
    }
    tile_tensor_free(&want);
}
