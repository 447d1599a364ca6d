/* bench_jsondecode.c - instructions per decode of a small JSON request body.
 *
 *   bench_jsondecode v1|v2 N
 *
 * decodes the small /v1 body or the small Open Inference Protocol body N
 * times (decode, then free), and checks the values each time so a broken
 * decoder cannot look fast. Run under callgrind with the count limited to
 * run_v1 / run_v2 (bench/jsondecode.sh, `make bench-jsondecode`): total / N
 * is the figure of docs/performance.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "request.h"
#include "v2.h"

static const char V1_BODY[] =
    "{\"input\":{\"dtype\":\"float32\",\"shape\":[2,2],\"data\":[1,2,3,4]},\"repeats\":[1,2]}";
static const char V2_BODY[] =
    "{\"inputs\":[{\"name\":\"input\",\"shape\":[2,2],\"datatype\":\"FP32\",\"data\":[1,2,3,4]},"
    "{\"name\":\"repeats\",\"shape\":[2],\"datatype\":\"INT64\",\"data\":[2,2]}]}";

static const float WANT[4] = {1, 2, 3, 4};

static int check(const struct tile_request *r, int64_t rep0, int64_t rep1)
{
    const struct tile_tensor *t = &r->input;
    return t->dtype == TILE_FLOAT32 && t->rank == 2 && t->shape[0] == 2 && t->shape[1] == 2 &&
           memcmp(t->data, WANT, sizeof(WANT)) == 0 && r->nrepeats == 2 && r->repeats[0] == rep0 &&
           r->repeats[1] == rep1;
}

/* The loops callgrind counts (--toggle-collect); noinline keeps them named. */
__attribute__((noinline, noclone)) static int run_v1(long n, const struct tile_limits *lim)
{
    for (long i = 0; i < n; i++) {
        struct tile_request r;
        struct tile_error e;
        tile_request_init(&r);
        int ok = tile_v1_json_decode(V1_BODY, sizeof(V1_BODY) - 1, lim, &r, &e) == 0 && check(&r, 1, 2);
        tile_request_free(&r);
        if (!ok)
            return -1;
    }
    return 0;
}

__attribute__((noinline, noclone)) static int run_v2(long n, const struct tile_limits *lim)
{
    for (long i = 0; i < n; i++) {
        struct tile_v2_request r;
        struct tile_error e;
        int ok = tile_v2_decode(V2_BODY, sizeof(V2_BODY) - 1, -1, 13, lim, &r, &e) == 0 && check(&r.treq, 2, 2);
        tile_v2_request_free(&r);
        if (!ok)
            return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "v1") != 0 && strcmp(argv[1], "v2") != 0)) {
        fprintf(stderr, "usage: %s v1|v2 N\n", argv[0]);
        return 2;
    }
    long n = atol(argv[2]);
    /* The daemon's defaults (server/infra/config.c). */
    struct tile_limits lim = {.max_body = UINT64_C(256) << 20,
                              .max_output = UINT64_C(1) << 30,
                              .max_stream = UINT64_C(64) << 30,
                              .max_rank = 64,
                              .max_depth = 80};
    int rc = strcmp(argv[1], "v1") == 0 ? run_v1(n, &lim) : run_v2(n, &lim);
    if (rc < 0) {
        fprintf(stderr, "%s: the body did not decode to the expected request\n", argv[1]);
        return 1;
    }
    return 0;
}
