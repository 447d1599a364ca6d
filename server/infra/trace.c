/* trace.c - trace context per request and the OTLP/HTTP exporter (see
 * trace.h).
 *
 * DESIGN. Ids come from a per-thread splitmix64 generator seeded once from
 * getrandom(2): three draws per request, no lock, no system call. The
 * exporter is one thread behind a ring of TRACE_RING finished requests
 * (each up to 6 spans); a request thread holds the ring's lock only to
 * copy its record in, and wakes the exporter only when a batch is full.
 * The exporter takes up to TRACE_BATCH records at a time, at least once a
 * second, encodes them (api/otlp.c) and POSTs them over a plain HTTP/1.1
 * connection with connect, send and receive timeouts. A collector that is
 * slow or gone makes the ring fill and records be dropped (counted); it
 * never reaches a request. No retries: a failed batch is counted and let go.
 *
 * Phase spans. The service measures phase durations, not their start
 * times; the children are placed from them: queue where the request waited
 * for a worker, decode, tile and encode back to back from the worker's
 * start (for a request served inline: ending where sending began), send
 * from the start of sending to the end. Each is clamped inside the
 * request's span. A streamed answer tiles and encodes while it sends, so
 * there those phases overlap send.
 */
#include "trace.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#include "clock.h"
#include "exchange.h"
#include "otlp.h"
#include "text.h"
#include "version.h"

#define TRACE_RING 2048        /* finished requests waiting for export */
#define TRACE_BATCH 256        /* requests per POST */
#define TRACE_FLUSH_MS 1000    /* a partial batch waits at most this long */
#define TRACE_IO_TIMEOUT_MS 2000 /* one POST: connect, send, and the answer's status line */

/* ---- ids ----------------------------------------------------------------------- */

static _Thread_local uint64_t rng_state;
static _Thread_local bool rng_seeded;

static uint64_t rng_next(void)
{
    if (!rng_seeded) {
        uint64_t seed = 0;
        if (getrandom(&seed, sizeof(seed), 0) != (ssize_t)sizeof(seed)) /* never short for 8 bytes; be safe */
            seed = tiled_now_us() ^ (uint64_t)(uintptr_t)&seed;
        rng_state = seed;
        rng_seeded = true;
    }
    /* splitmix64 (Steele, Lea, Flood 2014): full period, passes BigCrush. */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* n: 16 (a trace id) or 8 (a span id), whole words of the generator. */
static void random_id(uint8_t *dst, size_t n)
{
    for (;;) {
        uint64_t acc = 0;
        for (size_t i = 0; i < n; i += 8) {
            uint64_t r = rng_next();
            memcpy(dst + i, &r, 8);
            acc |= r;
        }
        if (acc) /* all zero is invalid */
            return;
    }
}

static bool valid_state(const char *s)
{
    size_t n = strnlen(s, TILED_TRACESTATE_MAX + 1);
    if (n == 0 || n > TILED_TRACESTATE_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < 0x20 || s[i] > 0x7e)
            return false;
    }
    return true;
}

void tiled_trace_begin(struct tiled_trace *t, const char *traceparent, const char *tracestate)
{
    struct tile_traceparent tp;
    if (traceparent && tile_traceparent_parse(traceparent, &tp) == 0) {
        memcpy(t->trace_id, tp.trace_id, 16);
        memcpy(t->parent_id, tp.parent_id, 8);
        t->sampled = tp.flags & 1;
        /* tracestate belongs to the traceparent it came with. */
        t->trace_state = tracestate && valid_state(tracestate) ? tracestate : NULL;
    } else {
        /* A new trace, rooted here: this server decides, and samples it. */
        random_id(t->trace_id, 16);
        memset(t->parent_id, 0, 8);
        t->sampled = true;
        t->trace_state = NULL;
    }
    random_id(t->span_id, 8);
}

/* ---- the ring ------------------------------------------------------------------ */

/* A finished request, as much as its spans need. Times: ns since the epoch. */
struct trace_rec {
    struct tiled_trace ctx; /* trace_state points into `state` */
    char state[TILED_TRACESTATE_MAX + 1];
    char name[96];
    char path[128];
    char request_id[80];
    const char *transport;
    int status;
    uint64_t start_ns, end_ns;
    uint64_t queue_ns, queue_len; /* queue_ns 0: not queued */
    uint64_t work_ns;             /* decode begins here; 0: see below */
    uint64_t decode_len, tile_len, encode_len;
    uint64_t send_ns;
};

static struct {
    bool on;
    char host[256], port[8], path[256];
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    struct trace_rec *ring; /* TRACE_RING slots */
    size_t head, count;     /* oldest slot, records held */
    bool stop;
    atomic_uint_fast64_t exported, failed, dropped;
} ex = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

bool tiled_trace_exporting(void)
{
    return ex.on;
}

void tiled_trace_counts(uint64_t *exported, uint64_t *failed, uint64_t *dropped)
{
    *exported = atomic_load(&ex.exported);
    *failed = atomic_load(&ex.failed);
    *dropped = atomic_load(&ex.dropped);
}

void tiled_trace_queued(uint64_t *queued, uint64_t *capacity)
{
    pthread_mutex_lock(&ex.lock);
    *queued = ex.count;
    pthread_mutex_unlock(&ex.lock);
    *capacity = TRACE_RING;
}

static uint64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static size_t rec_spans(const struct trace_rec *r)
{
    return 1 + (r->queue_ns != 0) + (r->decode_len != 0) + (r->tile_len != 0) + (r->encode_len != 0) +
           (r->send_ns != 0);
}

void tiled_trace_end(const struct tiled_exchange *x, void *ctx)
{
    (void)ctx;
    if (!ex.on || !x->trace->sampled)
        return;
    struct trace_rec r;
    uint64_t now_us = tiled_now_us();
    uint64_t end_ns = wall_ns();
    /* Monotonic µs to wall ns, anchored at the end. */
#define AT(us) (end_ns - (now_us - (us)) * 1000u)
    memset(&r, 0, sizeof(r));
    r.ctx = *x->trace;
    r.ctx.trace_state = NULL; /* borrowed from the request: the copy is `state` */
    if (x->trace->trace_state)
        tiled_copy_str(r.state, sizeof(r.state), x->trace->trace_state);
    if (x->transport == TILED_TRANSPORT_GRPC)
        tiled_copy_str(r.name, sizeof(r.name), x->route_path ? x->path + (x->path[0] == '/') : "grpc");
    else
        snprintf(r.name, sizeof(r.name), "%s%s%s", x->method, x->route_path ? " " : "",
                 x->route_path ? x->route_path : "");
    tiled_copy_str(r.path, sizeof(r.path), x->path);
    tiled_copy_str(r.request_id, sizeof(r.request_id), x->request_id);
    r.transport = tiled_transport_name(x->transport);
    r.status = x->status;
    r.start_ns = AT(x->t_start);
    r.end_ns = end_ns;
    if (x->t_queued) {
        r.queue_ns = AT(x->t_queued);
        r.queue_len = x->tm->queue_us * 1000u;
    }
    if (x->t_work)
        r.work_ns = AT(x->t_work);
    r.decode_len = x->tm->decode_us * 1000u;
    r.tile_len = x->tm->tile_us * 1000u;
    r.encode_len = x->tm->encode_us * 1000u;
    if (x->t_sent)
        r.send_ns = AT(x->t_sent);
#undef AT
    pthread_mutex_lock(&ex.lock);
    if (ex.count == TRACE_RING) {
        pthread_mutex_unlock(&ex.lock);
        atomic_fetch_add(&ex.dropped, rec_spans(&r));
        return;
    }
    struct trace_rec *slot = &ex.ring[(ex.head + ex.count) % TRACE_RING];
    *slot = r;
    bool full = ++ex.count == TRACE_BATCH;
    pthread_mutex_unlock(&ex.lock);
    if (full)
        pthread_cond_signal(&ex.wake);
}

/* ---- spans --------------------------------------------------------------------- */

static uint64_t clamp(uint64_t v, uint64_t lo, uint64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* The spans of `r` into out[] (room for 6) and their attributes into
 * attrs[] (room for 6). Returns how many spans. */
static size_t rec_to_spans(const struct trace_rec *r, struct tile_otlp_span *out, struct tile_otlp_attr *attrs)
{
    size_t n = 0;
    bool grpc = strcmp(r->transport, "grpc") == 0;
    attrs[0] = (struct tile_otlp_attr){.key = grpc ? "rpc.method" : "url.path", .s = r->path};
    attrs[1] = (struct tile_otlp_attr){.key = "tiled.transport", .s = r->transport};
    attrs[2] = (struct tile_otlp_attr){.key = "http.response.status_code", .i = r->status};
    attrs[3] = (struct tile_otlp_attr){.key = "tiled.request_id", .s = r->request_id};
    struct tile_otlp_span *req = &out[n++];
    *req = (struct tile_otlp_span){.name = r->name, .kind = TILE_OTLP_SERVER, .start_ns = r->start_ns,
                                   .end_ns = r->end_ns, .attrs = attrs, .nattrs = 4,
                                   .trace_state = r->state, .status = r->status >= 500 ? TILE_OTLP_ERROR
                                                                                       : TILE_OTLP_UNSET};
    memcpy(req->trace_id, r->ctx.trace_id, 16);
    memcpy(req->span_id, r->ctx.span_id, 8);
    memcpy(req->parent_id, r->ctx.parent_id, 8);

    uint64_t lo = r->start_ns, hi = r->end_ns;
    uint64_t work = r->decode_len + r->tile_len + r->encode_len;
    uint64_t base = r->work_ns ? r->work_ns : (r->send_ns ? r->send_ns : hi) - work;
    struct {
        const char *name;
        uint64_t start, len;
    } phase[] = {
        {"queue", r->queue_ns, r->queue_len},
        {"decode", base, r->decode_len},
        {"tile", base + r->decode_len, r->tile_len},
        {"encode", base + r->decode_len + r->tile_len, r->encode_len},
        {"send", r->send_ns, r->send_ns ? hi - clamp(r->send_ns, lo, hi) : 0},
    };
    for (size_t i = 0; i < sizeof(phase) / sizeof(phase[0]); i++) {
        if (!phase[i].start || (!phase[i].len && strcmp(phase[i].name, "send") != 0))
            continue;
        struct tile_otlp_span *s = &out[n++];
        uint64_t start = clamp(phase[i].start, lo, hi);
        *s = (struct tile_otlp_span){.name = phase[i].name, .kind = TILE_OTLP_INTERNAL, .start_ns = start,
                                     .end_ns = clamp(start + phase[i].len, start, hi), .trace_state = r->state};
        memcpy(s->trace_id, r->ctx.trace_id, 16);
        random_id(s->span_id, 8);
        memcpy(s->parent_id, r->ctx.span_id, 8);
    }
    return n;
}

/* ---- HTTP/1.1 client ----------------------------------------------------------- */

/* Waits for `events` until `deadline` (tiled_now_us()); -1 when it passes. */
static int wait_fd(int fd, short events, uint64_t deadline)
{
    struct pollfd p = {.fd = fd, .events = events};
    int rc;
    do {
        uint64_t now = tiled_now_us();
        if (now >= deadline)
            return -1;
        rc = poll(&p, 1, (int)((deadline - now + 999) / 1000));
    } while (rc < 0 && errno == EINTR);
    return rc == 1 ? 0 : -1;
}

static int connect_to(uint64_t deadline)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(ex.host, ex.port, &hints, &res) != 0)
        return -1;
    int fd = -1;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0)
            continue;
        int err = 0;
        socklen_t elen = sizeof(err);
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 ||
            (errno == EINPROGRESS && wait_fd(fd, POLLOUT, deadline) == 0 &&
             getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err == 0))
            break;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

static int send_all(int fd, const void *buf, size_t len, uint64_t deadline)
{
    const char *p = buf;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EAGAIN && wait_fd(fd, POLLOUT, deadline) == 0)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* POSTs `body`; 0 when the collector answered 2xx. */
static int post(const uint8_t *body, size_t len)
{
    /* One deadline for the whole exchange: a collector that trickles
     * cannot hold the exporter longer than this. */
    uint64_t deadline = tiled_now_us() + TRACE_IO_TIMEOUT_MS * 1000u;
    int fd = connect_to(deadline);
    if (fd < 0)
        return -1;
    char head[768];
    int hn = snprintf(head, sizeof(head),
                      "POST %s HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: application/x-protobuf\r\n"
                      "Content-Length: %zu\r\nConnection: close\r\nUser-Agent: tiled/" TILED_VERSION "\r\n\r\n",
                      ex.path, ex.host, ex.port, len);
    int rc = -1;
    if (hn > 0 && (size_t)hn < sizeof(head) && send_all(fd, head, (size_t)hn, deadline) == 0 &&
        send_all(fd, body, len, deadline) == 0) {
        /* The status line is what matters, but the answer is read to its
         * end (the collector closes: Connection: close), so the collector
         * is not reset while it writes; at most 64 KiB, by the deadline. */
        char answer[4096], first[16] = {0};
        size_t got = 0;
        for (;;) {
            ssize_t n = recv(fd, answer, sizeof(answer), 0);
            if (n < 0 && errno == EAGAIN && wait_fd(fd, POLLIN, deadline) == 0)
                continue;
            if (n <= 0 || got >= 65536)
                break;
            if (got < sizeof(first) - 1)
                memcpy(first + got, answer, (size_t)n < sizeof(first) - 1 - got ? (size_t)n : sizeof(first) - 1 - got);
            got += (size_t)n;
        }
        if (got >= 12 && strncmp(first, "HTTP/1.", 7) == 0 && first[8] == ' ' && first[9] == '2')
            rc = 0;
    }
    close(fd);
    return rc;
}

/* ---- exporter thread ----------------------------------------------------------- */

static const struct tile_otlp_attr resource[] = {
    {.key = "service.name", .s = "tiled"},
    {.key = "service.version", .s = TILED_VERSION},
};

static bool export_batch(const struct trace_rec *recs, size_t n)
{
    struct tile_otlp_span *spans = malloc(n * 6 * sizeof(*spans));
    struct tile_otlp_attr *attrs = malloc(n * 4 * sizeof(*attrs));
    size_t nspans = 0, len = 0, want = 0;
    for (size_t i = 0; i < n; i++)
        want += rec_spans(&recs[i]);
    uint8_t *body = NULL;
    if (spans && attrs) {
        for (size_t i = 0; i < n; i++)
            nspans += rec_to_spans(&recs[i], spans + nspans, attrs + 4 * i);
        body = tile_otlp_encode(resource, sizeof(resource) / sizeof(resource[0]), "tiled", TILED_VERSION, spans,
                                nspans, &len);
    }
    bool ok = body && post(body, len) == 0;
    atomic_fetch_add(ok ? &ex.exported : &ex.failed, want);
    free(body);
    free(attrs);
    free(spans);
    return ok;
}

static void *exporter(void *arg)
{
    (void)arg;
    struct trace_rec *batch = malloc(TRACE_BATCH * sizeof(*batch));
    pthread_mutex_lock(&ex.lock);
    for (;;) {
        if (!ex.stop && ex.count < TRACE_BATCH) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += TRACE_FLUSH_MS / 1000;
            pthread_cond_timedwait(&ex.wake, &ex.lock, &until);
        }
        size_t n = ex.count < TRACE_BATCH ? ex.count : TRACE_BATCH;
        if (n == 0 && ex.stop)
            break;
        if (!batch) { /* out of memory: what is held is dropped */
            for (size_t i = 0; i < n; i++)
                atomic_fetch_add(&ex.dropped, rec_spans(&ex.ring[(ex.head + i) % TRACE_RING]));
        }
        for (size_t i = 0; batch && i < n; i++)
            batch[i] = ex.ring[(ex.head + i) % TRACE_RING];
        ex.head = (ex.head + n) % TRACE_RING;
        ex.count -= n;
        if (n == 0 || !batch)
            continue;
        bool stopping = ex.stop;
        pthread_mutex_unlock(&ex.lock);
        bool ok = export_batch(batch, n);
        pthread_mutex_lock(&ex.lock);
        if (stopping && !ok) { /* at exit, one failure ends the flush: the rest is counted failed */
            for (size_t i = 0; i < ex.count; i++)
                atomic_fetch_add(&ex.failed, rec_spans(&ex.ring[(ex.head + i) % TRACE_RING]));
            ex.count = 0;
            break;
        }
    }
    pthread_mutex_unlock(&ex.lock);
    free(batch);
    return NULL;
}

/* http://host[:port][/path]; no path (or "/") means /v1/traces. */
static int parse_endpoint(const char *url, struct tile_error *e)
{
    if (strncmp(url, "https://", 8) == 0)
        return tile_error_set(e, TILE_EINVAL,
                              "--otlp-endpoint %s: https is not supported; send to a local collector over http://",
                              url);
    if (strncmp(url, "http://", 7) != 0)
        return tile_error_set(e, TILE_EINVAL, "--otlp-endpoint '%s' is not an http://host[:port][/path] URL", url);
    const char *h = url + 7, *slash = strchr(h, '/');
    size_t hl = slash ? (size_t)(slash - h) : strlen(h);
    const char *colon = NULL;
    if (h[0] == '[') { /* [v6 address] */
        const char *close_br = memchr(h, ']', hl);
        if (!close_br)
            return tile_error_set(e, TILE_EINVAL, "--otlp-endpoint '%s': unclosed '['", url);
        colon = close_br + 1 < h + hl && close_br[1] == ':' ? close_br + 1 : NULL;
        size_t n = (size_t)(close_br - h - 1);
        if (n == 0 || n >= sizeof(ex.host))
            return tile_error_set(e, TILE_EINVAL, "--otlp-endpoint '%s': bad host", url);
        memcpy(ex.host, h + 1, n);
        ex.host[n] = '\0';
    } else {
        colon = memchr(h, ':', hl);
        size_t n = colon ? (size_t)(colon - h) : hl;
        if (n == 0 || n >= sizeof(ex.host))
            return tile_error_set(e, TILE_EINVAL, "--otlp-endpoint '%s': bad host", url);
        memcpy(ex.host, h, n);
        ex.host[n] = '\0';
    }
    const char *port = colon ? colon + 1 : "80";
    size_t pl = colon ? (size_t)(h + hl - port) : 2;
    long pv = 0;
    for (size_t i = 0; i < pl; i++)
        pv = port[i] >= '0' && port[i] <= '9' && pv < 65536 ? pv * 10 + (port[i] - '0') : 70000;
    if (pl == 0 || pv < 1 || pv > 65535)
        return tile_error_set(e, TILE_EINVAL, "--otlp-endpoint '%s': bad port", url);
    snprintf(ex.port, sizeof(ex.port), "%ld", pv);
    const char *path = slash && slash[1] ? slash : "/v1/traces";
    if (strlen(path) >= sizeof(ex.path))
        return tile_error_set(e, TILE_EINVAL, "--otlp-endpoint '%s': path too long", url);
    for (const char *p = path; *p; p++) {
        if (*p <= 0x20 || *p >= 0x7f)
            return tile_error_set(e, TILE_EINVAL, "--otlp-endpoint '%s': bad character in the path", url);
    }
    tiled_copy_str(ex.path, sizeof(ex.path), path);
    return 0;
}

int tiled_trace_init(const struct tiled_config *cfg, struct tile_error *e)
{
    if (!cfg->otlp_endpoint[0])
        return 0;
    if (parse_endpoint(cfg->otlp_endpoint, e) < 0)
        return -1;
    ex.ring = malloc(TRACE_RING * sizeof(*ex.ring));
    if (!ex.ring)
        return tile_error_set(e, TILE_ENOMEM, "cannot allocate the span ring");
    ex.head = ex.count = 0;
    ex.stop = false;
    if (pthread_create(&ex.thread, NULL, exporter, NULL) != 0) {
        free(ex.ring);
        ex.ring = NULL;
        return tile_error_set(e, TILE_ENOMEM, "cannot start the span exporter thread");
    }
    ex.on = true;
    return 0;
}

void tiled_trace_stop(void)
{
    if (!ex.on)
        return;
    pthread_mutex_lock(&ex.lock);
    ex.stop = true;
    pthread_mutex_unlock(&ex.lock);
    pthread_cond_signal(&ex.wake);
    pthread_join(ex.thread, NULL);
    ex.on = false;
    free(ex.ring);
    ex.ring = NULL;
}
