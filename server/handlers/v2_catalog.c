/* v2_catalog.c - the rules of the model `tile` that every transport of the
 * Open Inference Protocol shares (see v2_catalog.h). */
#include "v2_catalog.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "exchange.h"
#include "server.h"

/* "13, 6, 1": the versions served, for messages. */
static const char *served_versions(char *text, size_t cap)
{
    size_t n = 0;
    text[0] = '\0';
    for (int i = 0; i < TILE_V2_NVERSIONS && n < cap; i++)
        n += (size_t)snprintf(text + n, cap - n, "%s%d", i ? ", " : "", tile_v2_versions[i]);
    return text;
}

enum tiled_v2_found tiled_v2_model_find(const char *model, size_t len, const char *version, size_t vlen, int *v)
{
    if (tile_v2_version_parse(version, vlen, v) < 0)
        return TILED_V2_BAD_VERSION;
    if (len != 4 || memcmp(model, "tile", 4) != 0)
        return TILED_V2_UNKNOWN_MODEL;
    if (*v < 0)
        return TILED_V2_UNKNOWN_VERSION;
    if (!*v)
        *v = tile_v2_versions[0];
    return TILED_V2_FOUND;
}

int tiled_v2_model_version(struct tiled_req *req, const char *model, size_t len, const char *version, size_t vlen)
{
    char versions[TILE_V2_NVERSIONS * 12];
    int v;
    switch (tiled_v2_model_find(model, len, version, vlen, &v)) {
    case TILED_V2_FOUND:
        return v;
    case TILED_V2_BAD_VERSION:
        tiled_reply_error(&req->reply, TILED_BAD_REQUEST,
                          "model version '%.*s' is not a version number (leave it empty for the newest)",
                          (int)(vlen < 64 ? vlen : 64), version);
        return 0;
    case TILED_V2_UNKNOWN_MODEL:
        tiled_reply_error(&req->reply, TILED_NOT_FOUND, "unknown model '%.*s' (this server serves the model 'tile')",
                          (int)(len < 128 ? len : 128), model);
        return 0;
    case TILED_V2_UNKNOWN_VERSION:
        tiled_reply_error(&req->reply, TILED_NOT_FOUND, "unknown version %.*s of model 'tile' (versions: %s)",
                          (int)(vlen < 32 ? vlen : 32), version, served_versions(versions, sizeof(versions)));
        return 0;
    }
    return 0;
}

size_t tiled_v2_extensions(const struct tiled_server *srv, const char *ext[TILED_V2_MAX_EXTENSIONS])
{
    static const char *const always[] = {"binary_tensor_data", "model_configuration", "statistics", "parameters"};
    size_t n = 0;
    for (; n < sizeof(always) / sizeof(always[0]); n++)
        ext[n] = always[n];
    if (srv->shm)
        ext[n++] = "system_shared_memory";
    return n;
}

void tiled_v2_record(const struct tiled_exchange *x, void *srv)
{
    if (!x->model_version)
        return;
    int slot = tile_v2_version_slot(x->model_version);
    if (slot < 0)
        return;
    bool ok = x->status == TILED_OK;
    struct tiled_v2_stats *s = &((struct tiled_server *)srv)->v2_stats[slot];
    const struct tile_timings *t = x->tm;
    atomic_fetch_add(ok ? &s->success_count : &s->fail_count, 1);
    atomic_fetch_add(ok ? &s->success_ns : &s->fail_ns, t->total_us * 1000);
    if (!ok)
        return;
    atomic_fetch_add(&s->queue_ns, t->queue_us * 1000);
    atomic_fetch_add(&s->input_ns, t->decode_us * 1000);
    atomic_fetch_add(&s->infer_ns, t->tile_us * 1000);
    atomic_fetch_add(&s->output_ns, t->encode_us * 1000);
    atomic_store(&s->last_ms, (uint64_t)tiled_wall_ms());
}

void tiled_v2_stats_read(const struct tiled_server *srv, int slot, struct tile_grpc_model_stats *out,
                         char version[16])
{
    const struct tiled_v2_stats *s = &srv->v2_stats[slot];
    uint64_t ok = atomic_load(&s->success_count);
    snprintf(version, 16, "%d", tile_v2_versions[slot]);
    *out = (struct tile_grpc_model_stats){
        .name = "tile",
        .version = version,
        .last_inference_ms = atomic_load(&s->last_ms),
        .inference_count = ok,
        .execution_count = ok,
        .success_count = ok,
        .success_ns = atomic_load(&s->success_ns),
        .fail_count = atomic_load(&s->fail_count),
        .fail_ns = atomic_load(&s->fail_ns),
        .queue_count = ok,
        .queue_ns = atomic_load(&s->queue_ns),
        .compute_input_count = ok,
        .compute_input_ns = atomic_load(&s->input_ns),
        .compute_infer_count = ok,
        .compute_infer_ns = atomic_load(&s->infer_ns),
        .compute_output_count = ok,
        .compute_output_ns = atomic_load(&s->output_ns),
    };
}
