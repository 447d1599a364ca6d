/* fuzz_npy.c - the .npy body decoder (tile_v1_npy_decode).
 *
 * What it accepts is checked three ways: against a naive element-by-element
 * reading of the file (byte order and Fortran order), by a round trip
 * through the .npy encoder (tile_encoder with repeats of 1, decoded again:
 * identical dtype, shape and element bytes), and through the shared
 * planning and encoding checks (fuzz_common.h). The input is the file. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Element i (C order) of a fixed-width array read straight from the file. */
static void naive_element(const uint8_t *file, const struct tile_npy_header *h, uint64_t i, uint8_t *out)
{
    uint64_t off = 0, stride[TILE_MAX_RANK], s = h->item_size;
    for (int k = 0; k < h->rank; k++) {
        int axis = h->fortran_order ? k : h->rank - 1 - k;
        stride[axis] = s;
        s *= (uint64_t)h->shape[axis];
    }
    for (int k = h->rank - 1; k >= 0; k--) {
        off += (i % (uint64_t)h->shape[k]) * stride[k];
        i /= (uint64_t)h->shape[k];
    }
    const struct tile_dtype_traits *tr = tile_dtype_traits(h->dtype);
    size_t unit = tr->cls == TILE_CLASS_COMPLEX ? tr->size / 2 : tr->size;
    const uint8_t *src = file + h->header_len + off;
    for (size_t b = 0; b < tr->size; b++)
        out[b] = h->big_endian ? src[(b / unit) * unit + unit - 1 - b % unit] : src[b];
}

static void check_naive(const uint8_t *file, const struct tile_npy_header *h, const struct tile_tensor *t)
{
    size_t size = tile_dtype_size(t->dtype);
    uint8_t elem[16];
    FUZZ_CHECK(h->dtype == t->dtype && h->rank == t->rank && h->nelem == t->nelem, "header and tensor disagree");
    for (uint64_t i = 0; i < t->nelem; i++) {
        naive_element(file, h, i, elem);
        FUZZ_CHECK(memcmp(elem, (const uint8_t *)t->data + i * size, size) == 0,
                   "element %llu differs from the file's", (unsigned long long)i);
    }
}

/* .npy out (repeats of 1) and back in: the same tensor. */
static void round_trip(struct tile_request *r)
{
    struct tile_spec spec;
    struct tile_plan plan;
    struct tile_error e = {0};
    r->has_repeats = true;
    r->nrepeats = r->input.rank;
    for (int i = 0; i < r->input.rank; i++)
        r->repeats[i] = 1;
    if (tile_request_spec(r, &fuzz_limits, &spec, &e) < 0 ||
        tile_plan_init(&plan, r->input.dtype, r->input.rank, r->input.shape, &spec, &e) < 0)
        return; /* strings whose views pass the output limit */
    struct tile_request view = fuzz_borrowed_request(r), view2 = fuzz_borrowed_request(r);
    struct tile_encoder *enc = tile_encoder_new(TILE_FMT_NPY, &plan, &view, NULL, FUZZ_MAX_BYTES, &e), *again;
    if (!enc) {
        FUZZ_CHECK(e.code == TILE_ETOOBIG, "a decoded .npy array cannot be written back: %s", e.text);
    } else {
        again = tile_encoder_new(TILE_FMT_NPY, &plan, &view2, NULL, FUZZ_MAX_BYTES, &e);
        FUZZ_CHECK(again != NULL, "a second encoder failed: %s", e.text);
        char *body;
        fuzz_read_body(enc, again, &body);
        struct tile_request back;
        tile_request_init(&back);
        if (tile_v1_npy_decode(body, (size_t)tile_encoder_size(enc), &fuzz_limits, &back, &e) < 0)
            fuzz_fail("the re-encoded .npy does not decode: %s", e.text);
        FUZZ_CHECK(fuzz_tensor_equal(&back.input, &r->input, false, false), "the .npy round trip changed the tensor");
        if (r->input.dtype != TILE_STRING)
            FUZZ_CHECK(memcmp(back.input.data, r->input.data, (size_t)tile_tensor_nbytes(&r->input)) == 0,
                       "the .npy round trip changed the element bytes");
        else
            FUZZ_CHECK(back.npy_strkind == r->npy_strkind, "the .npy round trip changed the string kind");
        tile_request_free(&back);
        free(body);
        tile_encoder_free(enc);
        tile_encoder_free(again);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tile_request r;
    struct tile_error e = {0};
    tile_request_init(&r);
    int rc = tile_v1_npy_decode(data, size, &fuzz_limits, &r, &e);
    fuzz_check_result(rc, &e, "tile_v1_npy_decode");
    if (rc == 0) {
        struct tile_npy_header h;
        struct tile_error he = {0};
        fuzz_check_tensor(&r.input, fuzz_limits.max_rank);
        FUZZ_CHECK(tile_npy_parse_header(data, size, fuzz_limits.max_rank, &h, &he) == 0,
                   "decoded but the header does not parse: %s", he.text);
        if (h.dtype != TILE_STRING)
            check_naive(data, &h, &r.input);
        round_trip(&r);
        fuzz_encode_request(&r);
    }
    tile_request_free(&r);
    return 0;
}
