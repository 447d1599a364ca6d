/* fuzz_raw.c - a raw /v1/tile request: query parameters
 * (tile_request_query_param) and the body (tile_raw_decode), then
 * planning and encoding of what is accepted (fuzz_common.h).
 *
 * Input layout: the query string ("dtype=int32&shape=2,3&repeats=1,2", not
 * percent-encoded), a NUL byte, then the body bytes. Without a NUL the
 * whole input is the query and the body is empty. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Applies "k=v&k=v"; returns -1 at the first refused pair. */
static int apply_query(char *q, struct tile_request *r, struct tile_query_tensor *qt, struct tile_error *e)
{
    char *save = NULL;
    for (char *pair = strtok_r(q, "&", &save); pair; pair = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(pair, '=');
        const char *value = "";
        if (eq) {
            *eq = '\0';
            value = eq + 1;
        }
        int rc = tile_request_query_param(r, qt, true, pair, value, &fuzz_limits, e);
        fuzz_check_result(rc, e, "tile_request_query_param");
        if (rc < 0)
            return -1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t qlen = nul ? (size_t)(nul - data) : size;
    const uint8_t *body = nul ? nul + 1 : data + size;
    size_t body_len = size - qlen - (nul != NULL);
    char *q = malloc(qlen + 1);
    if (!q)
        return 0;
    memcpy(q, data, qlen);
    q[qlen] = '\0';

    struct tile_request r;
    struct tile_query_tensor qt;
    struct tile_error e = {0};
    tile_request_init(&r);
    memset(&qt, 0, sizeof(qt));
    if (apply_query(q, &r, &qt, &e) == 0) {
        /* An exact-size copy, so reads past the body are caught. */
        uint8_t *copy = malloc(body_len ? body_len : 1);
        if (copy) {
            if (body_len)
                memcpy(copy, body, body_len);
            int rc = tile_raw_decode(copy, body_len, &qt, &fuzz_limits, &r, &e);
            fuzz_check_result(rc, &e, "tile_raw_decode");
            if (rc == 0) {
                fuzz_check_tensor(&r.input, fuzz_limits.max_rank);
                fuzz_encode_request(&r);
            }
            free(copy);
        }
    }
    tile_request_free(&r);
    free(q);
    return 0;
}
