/* fake_transport.c - see fake_transport.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "bodycache.h"
#include "fake_transport.h"
#include "log.h"
#include "serve.h"
#include "service.h"

const char *fake_header(void *conn, enum tiled_field f)
{
    struct fake_conn *c = conn;
    for (int i = 0; i < c->nheaders; i++) {
        if (strcasecmp(c->headers[i][0], tiled_field_names[f]) == 0)
            return c->headers[i][1];
    }
    return NULL;
}

static void fake_suspend(void *conn)
{
    struct fake_conn *c = conn;
    pthread_mutex_lock(&c->lock);
    c->suspends++;
    pthread_mutex_unlock(&c->lock);
}

static void fake_resume(void *conn)
{
    struct fake_conn *c = conn;
    pthread_mutex_lock(&c->lock);
    c->resumes++;
    pthread_cond_signal(&c->woken);
    pthread_mutex_unlock(&c->lock);
}

const struct tiled_conn_ops fake_ops = {.suspend = fake_suspend, .resume = fake_resume};

void fake_conn_init(struct fake_conn *c)
{
    memset(c, 0, sizeof(*c));
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->woken, NULL);
}

void fake_conn_header(struct fake_conn *c, const char *name, const char *value)
{
    c->headers[c->nheaders][0] = name;
    c->headers[c->nheaders][1] = value;
    c->nheaders++;
}

void fake_conn_query(struct fake_conn *c, const char *key, const char *value)
{
    if (c->nquery == TILED_QUERY_MAX)
        c->query_overflow = true;
    else
        c->query[c->nquery++] = (struct tiled_kv){.key = key, .value = value};
}

struct tiled_req *fake_exchange(struct tiled_server *srv, struct fake_conn *c, enum tiled_transport transport,
                                const char *method, const char *path, const void *body, size_t len)
{
    const struct tiled_head head = {.transport = transport,
                                    .method = method,
                                    .path = path,
                                    .query = c->query,
                                    .nquery = c->nquery,
                                    .query_overflow = c->query_overflow,
                                    .header = fake_header};
    struct tiled_req *req = tiled_req_new(srv, &head, c, &fake_ops);
    assert_non_null(req);
    char length[24];
    snprintf(length, sizeof(length), "%zu", len);
    /* The head's steps in the order the transports take them
     * (server/http/h1conn.c, server/grpc/call.c): the browser rules over
     * HTTP only, then route, body length and head check. */
    if ((transport == TILED_TRANSPORT_HTTP &&
         tiled_service_browser(req, fake_header(c, TILED_F_ORIGIN), fake_header(c, TILED_F_HOST),
                               fake_header(c, TILED_F_ACR_METHOD))) ||
        tiled_service_route(req, fake_header(c, TILED_F_AUTHORIZATION)) ||
        tiled_service_expect_body(req, body ? length : NULL) || tiled_service_check_head(req))
        return req;
    if (body)
        tiled_service_body(req, body, len);
    pthread_mutex_lock(&c->lock);
    int resumed_before = c->resumes;
    pthread_mutex_unlock(&c->lock);
    if (!tiled_service_dispatch(req)) {
        pthread_mutex_lock(&c->lock);
        while (c->resumes == resumed_before)
            pthread_cond_wait(&c->woken, &c->lock);
        pthread_mutex_unlock(&c->lock);
        assert_true(req->done);
    }
    return req;
}

struct tiled_server fake_srv = {.submit_lock = PTHREAD_MUTEX_INITIALIZER};

int fake_setup(void **state)
{
    (void)state;
    struct tile_error e = {0};
    char *argv[] = {"serve", "--workers", "2", "--log-level", "error", NULL};
    struct tiled_server *srv = &fake_srv;
    if (tiled_config_load(&srv->cfg, 5, argv, stdout, &e) != 0)
        return -1;
    srv->lim = (struct tile_limits){.max_body = (uint64_t)srv->cfg.max_body,
                                    .max_output = (uint64_t)srv->cfg.max_output,
                                    .max_stream = (uint64_t)srv->cfg.max_stream,
                                    .max_rank = (int)srv->cfg.max_rank,
                                    .max_depth = (int)srv->cfg.max_json_depth};
    tiled_log_init(&srv->cfg);
    srv->pool = tile_pool_init(2, 16, &e);
    srv->bodies = tiled_bodycache_new((uint64_t)srv->cfg.body_cache);
    return srv->pool && srv->bodies && tiled_serve_wire(srv, &e) == 0 ? 0 : -1;
}

int fake_teardown(void **state)
{
    (void)state;
    tile_pool_free(fake_srv.pool);
    tiled_bodycache_free(fake_srv.bodies);
    return 0;
}
