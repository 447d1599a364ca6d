/* fuzz_v2.c - the Open Inference Protocol infer request decoder
 * (tile_v2_decode), then what the server does with an accepted request:
 * spec, plan, response frame and framed encoder, with the body checked
 * against tile_execute() (fuzz_common.h).
 *
 * Input layout: 2 bytes of Inference-Header-Content-Length (big-endian;
 * 0xFFFF = header absent, -1), 1 byte choosing the model version
 * (13, 6, 1 by value mod 3), then the request body. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "jsonquick.h"
#include "v2.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void encode(const struct tile_v2_request *v)
{
    struct tile_spec spec;
    struct tile_plan plan;
    struct tile_error e = {0};
    const struct tile_tensor *in = &v->treq.input;
    if (tile_request_spec(&v->treq, &fuzz_limits, &spec, &e) < 0 ||
        tile_plan_init(&plan, in->dtype, in->rank, in->shape, &spec, &e) < 0) {
        fuzz_check_result(-1, &e, "planning a v2 request");
        return;
    }
    uint64_t data_bytes = plan.out_bytes;
    if (plan.dtype == TILE_STRING &&
        tile_plan_string_wire_bytes(&plan, tile_tensor_string_bytes(in), FUZZ_MAX_BYTES, &data_bytes, &e) < 0)
        return;
    char head[TILE_ENCODE_HEAD_MAX];
    struct tile_encode_frame f = {.head = head, .complex_flat = true};
    if (tile_v2_response_frame(v, &plan, data_bytes, head, sizeof(head), &f.head_len, &f.tail, &f.tail_len, &e) < 0) {
        FUZZ_CHECK(v->has_id, "no response frame for a request without an id: %s", e.text);
        return;
    }
    enum tile_format fmt = v->binary_output ? TILE_FMT_RAW : TILE_FMT_JSON;
    struct tile_tensor want;
    if (fuzz_expected_output(&plan, in, &want) < 0)
        return;
    struct tile_request view = fuzz_borrowed_request(&v->treq), view2 = fuzz_borrowed_request(&v->treq);
    struct tile_encoder *enc = tile_encoder_new(fmt, &plan, &view, &f, FUZZ_MAX_BYTES, &e), *again;
    if (!enc) {
        FUZZ_CHECK(e.code == TILE_ETOOBIG || (e.code == TILE_ENOTACCEPT && plan.dtype == TILE_STRING && !v->binary_output),
                   "framed encoder refused a planned output: %s", e.text);
    } else {
        again = tile_encoder_new(fmt, &plan, &view2, &f, FUZZ_MAX_BYTES, &e);
        FUZZ_CHECK(again != NULL, "a second encoder failed: %s", e.text);
        char *body;
        uint64_t size = tile_encoder_size(enc), head_len, data_len;
        tile_encoder_sections(enc, &head_len, &data_len);
        fuzz_read_body(enc, again, &body);
        FUZZ_CHECK(head_len == f.head_len && size == f.head_len + data_len + f.tail_len,
                   "framed body sections do not add up");
        if (v->binary_output) {
            FUZZ_CHECK(data_len == data_bytes, "binary_data_size %llu but %llu data bytes",
                       (unsigned long long)data_bytes, (unsigned long long)data_len);
            fuzz_check_json(body, f.head_len, "the binary response's JSON header");
            fuzz_check_raw_data(body + f.head_len, data_len, &plan, &want);
        } else {
            fuzz_check_json(body, (size_t)size, "the JSON response");
            fuzz_check_json_data(body + f.head_len, data_len, &plan, TILE_JSON_COMPLEX_INTERLEAVED, &want);
        }
        free(body);
        tile_encoder_free(enc);
        tile_encoder_free(again);
    }
    tile_tensor_free(&want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int versions[3] = {13, 6, 1};
    if (size < 3)
        return 0;
    unsigned hl = (unsigned)data[0] << 8 | data[1];
    int64_t header_len = hl == 0xFFFF ? -1 : (int64_t)hl;
    int version = versions[data[2] % 3];
    size_t len = size - 3;
    /* An exact-size copy, so reads past the body are caught. */
    char *body = malloc(len ? len : 1);
    if (!body)
        return 0;
    memcpy(body, data + 3, len);
    struct tile_v2_request v;
    struct tile_error e = {0};
    uint64_t quick = tile_jq_taken();
    int rc = tile_v2_decode(body, len, header_len, version, &fuzz_limits, &v, &e);
    fuzz_check_result(rc, &e, "tile_v2_decode");
    if (tile_jq_taken() != quick) { /* read in one pass: the general reader must agree */
        struct tile_v2_request g;
        struct tile_error ge = {0};
        tile_jq_set_enabled(false);
        int grc = tile_v2_decode(body, len, header_len, version, &fuzz_limits, &g, &ge);
        tile_jq_set_enabled(true);
        FUZZ_CHECK(rc == grc && (rc < 0 ? strcmp(e.text, ge.text) == 0 : 1),
                   "the readers disagree: '%s' against the general reader's '%s'", e.text, ge.text);
        if (rc == 0) {
            fuzz_check_same_request(&v.treq, &g.treq);
            FUZZ_CHECK(v.has_id == g.has_id && v.id_len == g.id_len && memcmp(v.id, g.id, v.id_len) == 0 &&
                           v.binary_output == g.binary_output,
                       "the one-pass reader's id or binary output differs from the general reader's");
        }
        tile_v2_request_free(&g);
    }
    if (rc == 0) {
        FUZZ_CHECK(v.version == version, "decoded request has version %d", v.version);
        FUZZ_CHECK(v.id_len <= sizeof(v.id), "id of %zu bytes", v.id_len);
        fuzz_check_tensor(&v.treq.input, fuzz_limits.max_rank);
        encode(&v);
    }
    tile_v2_request_free(&v);
    free(body);
    return 0;
}
