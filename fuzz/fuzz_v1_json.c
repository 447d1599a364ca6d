/* fuzz_v1_json.c - the /v1/tile JSON body decoder (tile_v1_json_decode),
 * then planning and encoding of what it accepts (fuzz_common.h).
 * The input is the request body as is. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_common.h"
#include "jsonquick.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tile_request r;
    struct tile_error e = {0};
    tile_request_init(&r);
    uint64_t quick = tile_jq_taken();
    int rc = tile_v1_json_decode((const char *)data, size, &fuzz_limits, &r, &e);
    fuzz_check_result(rc, &e, "tile_v1_json_decode");
    if (tile_jq_taken() != quick) { /* read in one pass: the general reader must agree */
        struct tile_request g;
        struct tile_error ge = {0};
        tile_request_init(&g);
        tile_jq_set_enabled(false);
        int grc = tile_v1_json_decode((const char *)data, size, &fuzz_limits, &g, &ge);
        tile_jq_set_enabled(true);
        FUZZ_CHECK(rc == 0 && grc == 0, "the general reader refused what the one-pass reader took: %s", ge.text);
        fuzz_check_same_request(&r, &g);
        tile_request_free(&g);
    }
    if (rc == 0) {
        fuzz_check_tensor(&r.input, fuzz_limits.max_rank);
        fuzz_encode_request(&r);
    }
    tile_request_free(&r);
    return 0;
}
