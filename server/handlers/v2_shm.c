/* v2_shm.c - Triton's system shared-memory extension (see v2_shm.h).
 *
 * DESIGN. Endpoints follow Triton's paths, bodies and statuses:
 *   GET  /v2/systemsharedmemory[/region/NAME]/status      200 [{name,key,offset,byte_size}]
 *   POST /v2/systemsharedmemory/region/NAME/register      {"key","offset","byte_size"} -> 200
 *   POST /v2/systemsharedmemory[/region/NAME]/unregister  200, an unknown name too
 * Off (no --shared-memory system), status answers [] and register and
 * unregister 501, as Triton does without --allow-client-shm. The CUDA
 * variant is answered only as far as clients that call it blindly need
 * (perf_analyzer and Triton's examples unregister CUDA regions at start):
 * status [], unregister 200, register 501.
 *
 * An infer request naming regions holds a view of each (shm.h) from decode
 * to the end of its work, in its struct tiled_v2_infer (v2_state.h). When
 * the output goes to a region, fixed-width inputs are read in place and
 * the encoder tiles the output straight into the region with the pool;
 * the body is only the output's metadata. When it does not, inputs are
 * copied at decode and their views let go at once, so a body streamed
 * later never reads a region a client may truncate. A region truncated
 * while held turns the request into a 400.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v2_shm.h"

#include "caching.h"
#include "clock.h"
#include "handlers.h"
#include "inflate.h"
#include "server.h"
#include "v2_state.h"

/* ---- infer ------------------------------------------------------------------ */

/* The request's release hook: the views it holds, and the answer kept for
 * the end (tiled_v2_shm_output). */
static void release_all(struct tiled_req *req)
{
    struct tiled_v2_infer *s = tiled_v2_infer_of(req);
    tiled_v2_shm_release(req, NULL);
    free(s->shm_reply);
    s->shm_reply = NULL;
}

static int resolve_input(void *ctx, const char *tensor, const struct tile_v2_shm_ref *ref, const void **data,
                         struct tile_error *e)
{
    struct tiled_req *req = ctx;
    struct tiled_v2_infer *s = tiled_v2_infer_of(req);
    char what[64];
    snprintf(what, sizeof(what), "input '%s'", tensor);
    if ((size_t)s->nshm_in == sizeof(s->shm_in) / sizeof(s->shm_in[0]))
        return tile_error_set(e, TILE_EINVAL, "too many inputs in shared memory");
    struct tiled_shm_view *v = &s->shm_in[s->nshm_in];
    if (tiled_shm_acquire(req->srv->shm, ref->region, ref->offset, ref->byte_size, what, v, e) < 0)
        return -1;
    s->nshm_in++;
    s->work.release = release_all;
    *data = v->data;
    return 0;
}

const struct tile_v2_shm_source *tiled_v2_shm_source(struct tiled_req *req, struct tile_v2_shm_source *src)
{
    if (!req->srv->shm)
        return NULL;
    *src = (struct tile_v2_shm_source){.resolve = resolve_input, .ctx = req, .borrow = true};
    return src;
}

int tiled_v2_shm_output(struct tiled_req *req, uint64_t data_bytes, const void *reply, size_t reply_len,
                        struct tile_error *e)
{
    struct tiled_v2_infer *s = tiled_v2_infer_of(req);
    const struct tile_v2_shm_ref *ref = &s->v2.out_shm;
    if (!req->srv->shm)
        return tile_error_set(e, TILE_EINVAL,
                              "output 'output' names shared memory region '%s', but shared memory is not enabled on "
                              "this server (tiled serve --shared-memory system)",
                              ref->region);
    if (ref->byte_size < data_bytes)
        return tile_error_set(e, TILE_EINVAL,
                              "shared memory size specified with the request for output 'output' (%llu bytes) should "
                              "be at least %llu bytes to hold the results",
                              (unsigned long long)ref->byte_size, (unsigned long long)data_bytes);
    if (tiled_shm_acquire(req->srv->shm, ref->region, ref->offset, ref->byte_size, "output 'output'", &s->shm_out,
                          e) < 0)
        return -1;
    s->work.release = release_all;
    s->work.produce = tiled_v2_shm_produce; /* into the region, not a body */
    s->shm_reply = malloc(reply_len ? reply_len : 1);
    if (s->shm_reply)
        memcpy(s->shm_reply, reply, reply_len);
    s->shm_reply_len = reply_len;
    struct tile_encode_frame f = {.head = "", .tail = ""};
    s->work.enc = tile_encoder_new(TILE_FMT_RAW, &s->work.plan, &s->work.treq, &f, data_bytes, e);
    if (!s->shm_reply || !s->work.enc)
        return tile_error_set(e, TILE_ENOMEM, "out of memory");
    if (tile_encoder_size(s->work.enc) > s->shm_out.len) /* never write past the view */
        return tile_error_set(e, TILE_EINVAL, "output 'output' does not fit its shared memory region");
    return 0;
}

int tiled_v2_shm_release(struct tiled_req *req, struct tile_error *e)
{
    struct tiled_v2_infer *s = tiled_v2_infer_of(req);
    int rc = 0;
    for (int i = 0; i < s->nshm_in; i++)
        rc |= tiled_shm_release(&s->shm_in[i], e);
    s->nshm_in = 0;
    rc |= tiled_shm_release(&s->shm_out, e);
    return rc ? -1 : 0;
}

int tiled_v2_shm_produce(struct tiled_req *req, struct tile_error *e)
{
    struct tiled_v2_infer *s = tiled_v2_infer_of(req);
    uint64_t t0 = tiled_now_us();
    tile_encoder_fill(s->work.enc, s->shm_out.data, req->srv->pool);
    req->tm.tile_us += tiled_now_us() - t0;
    if (tiled_v2_shm_release(req, e) < 0)
        return -1;
    req->reply.status = TILED_OK;
    tiled_reply_set_body(&req->reply, s->shm_reply, s->shm_reply_len, NULL); /* taken over */
    s->shm_reply = NULL;
    return 0;
}

/* ---- endpoints -------------------------------------------------------------- */

/* A register the server could not carry out is its own fault (I/O, out of
 * memory); any other refusal is the request's, as Triton answers them all
 * (INVALID_ARG), a region too large or one too many included. */
static enum tiled_fault register_fault(const struct tile_error *e)
{
    return e->code == TILE_EIO || e->code == TILE_ENOMEM ? tiled_fault_of(e) : TILED_FAULT_INVALID;
}

/* Reads an unsigned integer member; false (and a 400) when it is wrong. */
static bool body_uint(struct tiled_req *req, json_t *doc, const char *key, bool required, uint64_t *out)
{
    json_t *v = json_object_get(doc, key);
    *out = 0;
    if (!v && !required)
        return true;
    if (!v) {
        tiled_reply_error(&req->reply, TILED_BAD_REQUEST, "Shared memory register request has no '%s' field", key);
        return false;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        tiled_reply_error(&req->reply, TILED_BAD_REQUEST, "'%s' in a shared memory register request must be an integer >= 0", key);
        return false;
    }
    *out = (uint64_t)json_integer_value(v);
    return true;
}

bool tiled_v2_shm_allowed(struct tiled_req *req, bool cuda, enum tiled_shm_call call, const char *name)
{
    if (call == TILED_SHM_STATUS && cuda && name[0])
        tiled_reply_error(&req->reply, TILED_NOT_FOUND, "Unable to find cuda shared memory region: '%s'", name);
    else if (call == TILED_SHM_REGISTER && cuda)
        tiled_reply_error(&req->reply, TILED_NOT_IMPLEMENTED,
                          "CUDA shared memory is not supported by this server (use system shared memory)");
    else if (call != TILED_SHM_STATUS && !req->srv->shm && !cuda)
        tiled_reply_error(&req->reply, TILED_NOT_IMPLEMENTED,
                          "shared memory is disabled on this server (start it with --shared-memory system)");
    else if (call == TILED_SHM_REGISTER && !name[0])
        tiled_reply_error(&req->reply, TILED_BAD_REQUEST,
                          "'region name' is necessary to register system shared memory region");
    return req->reply.status == 0;
}

bool tiled_v2_shm_list(struct tiled_req *req, bool cuda, const char *name, tiled_shm_each_fn fn, void *ctx)
{
    struct tile_error e = {0};
    if (cuda || !req->srv->shm) /* nothing is registered */
        return true;
    if (tiled_shm_status(req->srv->shm, name[0] ? name : NULL, fn, ctx, &e) == 0)
        return true;
    tiled_reply_error(&req->reply, TILED_NOT_FOUND, "Unable to find system shared memory region: '%s'", name);
    return false;
}

bool tiled_v2_shm_register(struct tiled_req *req, const char *name, const char *key, uint64_t offset,
                           uint64_t byte_size)
{
    struct tile_error e = {0};
    if (tiled_shm_register(req->srv->shm, name, key, offset, byte_size, &e) == 0)
        return true;
    tiled_reply_fault(&req->reply, register_fault(&e), "%s", e.text);
    return false;
}

void tiled_v2_shm_unregister(struct tiled_req *req, bool cuda, const char *name)
{
    if (!cuda) /* CUDA regions are never registered: unregistering them is a no-op */
        tiled_shm_unregister(req->srv->shm, name[0] ? name : NULL);
}

static void handle_register(struct tiled_req *req, const char *name)
{
    struct tile_error e = {0};
    int inflated = tiled_inflate_body(req, &e);
    if (inflated == -1)
        tiled_reply_tile_error(&req->reply, &e);
    if (inflated < 0)
        return;
    json_error_t je;
    json_t *doc = json_loadb(req->body ? req->body : "", req->body_len, JSON_REJECT_DUPLICATES, &je);
    json_t *key = json_object_get(doc, "key");
    uint64_t offset, byte_size;
    if (!json_is_object(doc))
        tiled_reply_error(&req->reply, TILED_BAD_REQUEST, "a shared memory register request is a JSON object "
                                            "{\"key\", \"offset\", \"byte_size\"}: %s", doc ? "not an object" : je.text);
    else if (!json_is_string(key))
        tiled_reply_error(&req->reply, TILED_BAD_REQUEST, key ? "'key' in a shared memory register request must be a string"
                                                : "Shared memory register request has no 'key' field");
    else if (body_uint(req, doc, "offset", false, &offset) && body_uint(req, doc, "byte_size", true, &byte_size) &&
             tiled_v2_shm_register(req, name, json_string_value(key), offset, byte_size))
        tiled_reply_json(&req->reply, TILED_OK, "");
    json_decref(doc);
}

/* Appends a region to a JSON array (the HTTP status answer). */
static void json_region(void *ctx, const struct tiled_shm_info *r)
{
    json_array_append_new(ctx, json_pack("{s:s, s:s, s:I, s:I}", "name", r->name, "key", r->key, "offset",
                                         (json_int_t)r->offset, "byte_size", (json_int_t)r->byte_size));
}

static void handle_status(struct tiled_req *req, bool cuda, const char *name)
{
    tiled_cache_no_store(&req->reply); /* regions come and go with every register call */
    json_t *list = json_array();
    if (tiled_v2_shm_list(req, cuda, name, json_region, list))
        tiled_reply_doc(&req->reply, TILED_OK, list);
    else
        json_decref(list);
}

/* Splits "[/region/NAME]/ACTION" after the extension's prefix. */
static bool split_path(const char *rest, char *name, size_t cap, const char **action)
{
    name[0] = '\0';
    if (strncmp(rest, "/region/", 8) == 0) {
        rest += 8;
        size_t n = strcspn(rest, "/");
        if (n == 0 || n >= cap || rest[n] != '/')
            return false;
        memcpy(name, rest, n);
        name[n] = '\0';
        rest += n;
    }
    if (*rest != '/')
        return false;
    *action = rest + 1;
    return strcmp(*action, "status") == 0 || strcmp(*action, "register") == 0 || strcmp(*action, "unregister") == 0;
}

#define SYSTEM_SHM "/v2/systemsharedmemory"
#define CUDA_SHM "/v2/cudasharedmemory"

static void handle_shm(struct tiled_req *req, const char *prefix, bool cuda);

/* A register body that may be large once decoded (compressed, or above
 * --inline-max) is read on a worker, not on the thread that serves other
 * connections: work.h's prepare step, run after the work path inflated
 * the body; -2 as the reply is decided. */
static int shm_prepare(struct tiled_req *req, struct tile_error *e)
{
    (void)e;
    bool cuda = strncmp(req->path, CUDA_SHM, strlen(CUDA_SHM)) == 0;
    handle_shm(req, cuda ? CUDA_SHM : SYSTEM_SHM, cuda);
    return -2;
}

static void handle_shm(struct tiled_req *req, const char *prefix, bool cuda)
{
    char name[TILED_SHM_NAME_MAX + 2];
    const char *action;
    if (!split_path(req->path + strlen(prefix), name, sizeof(name), &action)) {
        tiled_reply_error(&req->reply, TILED_NOT_FOUND, "no such endpoint: %s %s", req->method, req->path);
        return;
    }
    enum tiled_shm_call call = strcmp(action, "status") == 0     ? TILED_SHM_STATUS
                               : strcmp(action, "register") == 0 ? TILED_SHM_REGISTER
                                                                 : TILED_SHM_UNREGISTER;
    if (!tiled_method_is(req, call == TILED_SHM_STATUS ? "GET" : "POST") ||
        !tiled_v2_shm_allowed(req, cuda, call, name))
        return;
    if (call == TILED_SHM_STATUS) {
        handle_status(req, cuda, name);
    } else if (call == TILED_SHM_REGISTER) {
        if (req->prepare != shm_prepare && (tiled_inflate_needed(req) || req->body_len > (uint64_t)req->srv->cfg.inline_max))
            req->prepare = shm_prepare; /* left to a worker */
        else
            handle_register(req, name);
    } else {
        tiled_v2_shm_unregister(req, cuda, name);
        tiled_reply_json(&req->reply, TILED_OK, "");
    }
}

void tiled_handle_system_shm(struct tiled_req *req)
{
    handle_shm(req, SYSTEM_SHM, false);
}

void tiled_handle_cuda_shm(struct tiled_req *req)
{
    handle_shm(req, CUDA_SHM, true);
}
