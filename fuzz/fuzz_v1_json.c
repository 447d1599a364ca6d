/* fuzz_v1_json.c - the /v1/tile JSON body decoder (tile_v1_json_decode),
 * then planning and encoding of what it accepts (fuzz_common.h).
 * The input is the request body as is. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tile_request r;
    struct tile_error e = {0};
    tile_request_init(&r);
    int rc = tile_v1_json_decode((const char *)data, size, &fuzz_limits, &r, &e);
    fuzz_check_result(rc, &e, "tile_v1_json_decode");
    if (rc == 0) {
        fuzz_check_tensor(&r.input, fuzz_limits.max_rank);
        fuzz_encode_request(&r);
    }
    tile_request_free(&r);
    return 0;
}
