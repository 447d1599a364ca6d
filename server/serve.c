/* serve.c - the daemon's lifecycle: configure, listen, drain, exit.
 *
 * DESIGN. Signals are blocked in every thread (the mask is inherited by
 * the pool's and the transports' threads created after it is set) and taken
 * synchronously by the main thread with sigwait, so shutdown logic runs in
 * ordinary code, not in a handler. Drain: stop accepting (quiesce), report
 * not-ready, wait for in-flight requests and for the gRPC connections to
 * finish going away (every stream their final GOAWAY covers is served) up
 * to --drain-timeout, then stop.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "serve.h"

#include "auth.h"
#include "bodycache.h"
#include "clock.h"
#include "compress.h"
#include "cors.h"
#include "exchange.h"
#include "grpc.h"
#include "http.h"
#include "listener.h"
#include "log.h"
#include "memory.h"
#include "metrics.h"
#include "router.h"
#include "server.h"
#include "shm.h"
#include "stream.h"
#include "text.h"
#include "tls.h"
#include "trace.h"
#include "v2_catalog.h"

static void limits_from_config(struct tiled_server *srv)
{
    const struct tiled_config *c = &srv->cfg;
    srv->lim = (struct tile_limits){
        .max_body = (uint64_t)c->max_body,
        .max_output = (uint64_t)c->max_output,
        .max_stream = (uint64_t)c->max_stream,
        .max_rank = (int)c->max_rank,
        .max_depth = (int)c->max_json_depth,
    };
}

static void drain(struct tiled_server *srv)
{
    atomic_store(&srv->draining, true);
    tiled_http_quiesce(srv);
    tiled_grpc_quiesce(srv);
    tiled_log_event(TILED_LOG_INFO, "drain", "{s:i, s:I}", "inflight", atomic_load(&srv->inflight), "timeout_s",
                    (json_int_t)srv->cfg.drain_timeout);
    uint64_t deadline = tiled_now_us() + (uint64_t)srv->cfg.drain_timeout * 1000000u;
    /* gRPC connections are waited for too: a stream the final GOAWAY
     * covers may still arrive after the last call in flight ended; and
     * both listeners, until the connections in their queues are taken. */
    while ((!tiled_http_drained(srv) || atomic_load(&srv->inflight) > 0 || !tiled_grpc_drained(srv)) &&
           tiled_now_us() < deadline) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Waits (briefly) for the jobs admitted before stopping to finish. */
static void wait_idle(struct tiled_server *srv)
{
    uint64_t deadline = tiled_now_us() + 5000000u;
    while ((tile_pool_queue_depth(srv->pool) > 0 || tile_pool_busy(srv->pool) > 0) && tiled_now_us() < deadline) {
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* The shared-memory registry, only when enabled: off, the daemon maps
 * nothing and keeps the default SIGBUS disposition. */
static int shm_start(struct tiled_server *srv, struct tile_error *e)
{
    const struct tiled_config *c = &srv->cfg;
    if (c->shared_memory != TILED_SHM_SYSTEM)
        return 0;
    struct tiled_shm_limits lim = {.max_regions = (uint64_t)c->shm_max_regions,
                                   .max_bytes = (uint64_t)c->shm_max_bytes,
                                   .key_prefix = c->shm_key_prefix};
    srv->shm = tiled_shm_new(&lim, e);
    return srv->shm ? 0 : -1;
}

/* The modules with figures of their own, in the order a scrape shows them:
 * each names and documents its series (metrics.h, providers). */
static int metrics_start(struct tiled_server *srv, struct tile_error *e)
{
    if (tiled_metrics_provide(tiled_bodycache_metrics, srv->bodies) < 0 ||
        tiled_metrics_provide(tiled_memory_metrics, &srv->memory) < 0 ||
        (srv->shm && tiled_metrics_provide(tiled_shm_metrics, srv->shm) < 0) ||
        tiled_metrics_provide(tiled_grpc_metrics, srv) < 0)
        return tile_error_set(e, TILE_EIO, "too many metrics providers");
    return 0;
}

int tiled_serve_wire(struct tiled_server *srv, struct tile_error *e)
{
    srv->find_route = tiled_route_find;
    tiled_exchange_observe_none();
    if (tiled_exchange_observe(tiled_log_access, NULL) < 0 || tiled_exchange_observe(tiled_metrics_record, NULL) < 0 ||
        tiled_exchange_observe(tiled_trace_end, NULL) < 0 || tiled_exchange_observe(tiled_v2_record, srv) < 0)
        return tile_error_set(e, TILE_EIO, "too many observers of finished requests");
    return 0;
}

/* The certificate and key, when TLS is on: both ports' policy and files,
 * loaded before either listens so a bad file stops the start by name. */
static int tls_start(struct tiled_server *srv, struct tile_error *e)
{
    const struct tiled_config *c = &srv->cfg;
    if (!c->tls_cert[0] && !c->tls_key[0] && !c->tls_client_ca[0])
        return 0;
    srv->tls = tiled_tls_new(c->tls_cert, c->tls_key, c->tls_client_ca, c->tls_priorities, e);
    return srv->tls ? 0 : -1;
}

/* SIGHUP: new handshakes get the files as they are now; open connections
 * keep what they started with. A file that does not load keeps the old
 * certificate, and the log says why. */
static void tls_reload(struct tiled_server *srv)
{
    if (!srv->tls)
        return;
    struct tile_error e = {0};
    if (tiled_tls_reload(srv->tls, &e) < 0) {
        tiled_log_error("tls_reload", e.text);
        return;
    }
    char subject[256];
    tiled_tls_subject(srv->tls, subject, sizeof(subject));
    tiled_log_event(TILED_LOG_INFO, "tls_reload", "{s:o}", "subject", tiled_json_text(subject));
}

static int serve(struct tiled_server *srv)
{
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* Started after the mask: every thread inherits it, so the signals are sigwait()'s. */
    if (tiled_log_start((unsigned)srv->cfg.log_flush_ms) < 0) /* lines are then written one by one */
        tiled_log_event(TILED_LOG_WARN, "log", "{s:s}", "error", "cannot start the log flusher");

    struct tile_error e = {0};
    int rc = tiled_cors_check(srv->cfg.cors_origins, &e) < 0 ? -1 : tiled_auth_load(srv->cfg.api_key_file, &e);
    if (rc == 0) {
        srv->pool = tile_pool_init((int)srv->cfg.workers, (int)srv->cfg.queue, &e);
        srv->bodies = tiled_bodycache_new((uint64_t)srv->cfg.body_cache);
        srv->memory.budget = (uint64_t)srv->cfg.max_memory;
        if (!srv->bodies)
            tile_error_set(&e, TILE_ENOMEM, "cannot allocate the body cache");
        rc = srv->pool && srv->bodies && shm_start(srv, &e) == 0 && tls_start(srv, &e) == 0 &&
                     metrics_start(srv, &e) == 0 && tiled_serve_wire(srv, &e) == 0 &&
                     tiled_trace_init(&srv->cfg, &e) == 0
                 ? tiled_http_start(srv, &e)
                 : -1;
        if (rc == 0 && (rc = tiled_grpc_start(srv, &e)) < 0)
            tiled_http_stop(srv);
    }
    if (rc < 0) {
        tiled_log_error("exit", e.text);
        fprintf(stderr, "tiled: %s\n", e.text);
        tiled_metrics_provide_none();
        tiled_exchange_observe_none();
        tile_pool_free(srv->pool);
        tiled_bodycache_free(srv->bodies);
        tiled_shm_free(srv->shm);
        tiled_tls_free(srv->tls);
        tiled_trace_stop();
        tiled_auth_free();
        tiled_log_stop();
        return 1;
    }
    tiled_log_event(TILED_LOG_INFO, "listening", "{s:o, s:i, s:i, s:i}", "host", tiled_json_text(srv->cfg.host),
                    "port", (int)srv->port, "grpc_port", srv->grpc ? (int)srv->grpc_port : -1, "workers",
                    tile_pool_size(srv->pool));
    char host[300];
    tiled_listener_url_host(srv->cfg.host, host, sizeof(host));
    printf("listening on %s://%s:%u\n", srv->tls ? "https" : "http", host, srv->port);
    if (srv->grpc)
        printf("listening on %s://%s:%u\n", srv->tls ? "grpcs" : "grpc", host, srv->grpc_port);
    fflush(stdout);

    int sig = 0;
    for (;;) {
        sigwait(&sigs, &sig);
        if (sig != SIGHUP)
            break;
        struct tile_error re = {0}; /* a failed reload keeps the old keys */
        if (tiled_auth_load(srv->cfg.api_key_file, &re) < 0)
            tiled_log_error("api_keys", re.text);
        tls_reload(srv);
    }
    tiled_log_event(TILED_LOG_INFO, "signal", "{s:s}", "signal", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    drain(srv);
    /* Whatever is still in flight after the drain timeout is cut short:
     * suspended streams are woken to end, queued jobs still run (and resume
     * their connections) while the transports are up, then they stop. */
    pthread_mutex_lock(&srv->submit_lock);
    atomic_store(&srv->stopping, true);
    pthread_mutex_unlock(&srv->submit_lock);
    tiled_streams_abort();
    wait_idle(srv);
    tiled_grpc_stop(srv);
    tiled_http_stop(srv);
    tiled_metrics_provide_none(); /* no scrape can come: their contexts go next */
    tiled_exchange_observe_none(); /* no request is left to end */
    tile_pool_free(srv->pool);
    tiled_bodycache_free(srv->bodies); /* after the transports: they have given back every body */
    tiled_shm_free(srv->shm); /* no request holds a region any more */
    srv->shm = NULL;
    tiled_trace_stop(); /* both transports are stopped: no request adds spans */
    tiled_tls_free(srv->tls); /* both transports are stopped: no session holds it */
    srv->tls = NULL;
    tiled_auth_free();
    tiled_log_stop(); /* every request has ended: its access line is written */
    tiled_log_event(TILED_LOG_INFO, "exit", "{s:i}", "status", 0);
    return 0;
}

void tiled_serve_libraries(char *dst, size_t cap)
{
    snprintf(dst, cap, "%s, %s, %s, jansson %s", tiled_grpc_library(), tiled_tls_library(), tiled_compress_library(),
             jansson_version_str());
}

int tiled_serve_main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--version") == 0) {
            char libs[256];
            tiled_serve_libraries(libs, sizeof(libs));
            printf("tiled %s (%s)\n", TILED_VERSION, libs);
            return 0;
        }
    }
    static struct tiled_server srv = {.submit_lock = PTHREAD_MUTEX_INITIALIZER};
    struct tile_error e = {0};
    int rc = tiled_config_load(&srv.cfg, argc, argv, stdout, &e);
    if (rc < 0) {
        fprintf(stderr, "tiled: %s\n", e.text);
        return 2;
    }
    if (rc > 0)
        return 0;
    limits_from_config(&srv);
    srv.start_s = (uint64_t)time(NULL);
    srv.start_wall_ms = tiled_wall_ms();
    tiled_log_init(&srv.cfg);
    char libs[256];
    tiled_serve_libraries(libs, sizeof(libs));
    tiled_log_event(TILED_LOG_INFO, "start", "{s:i, s:s, s:s}", "pid", (int)getpid(), "version", TILED_VERSION,
                    "libraries", libs);
    return serve(&srv);
}
