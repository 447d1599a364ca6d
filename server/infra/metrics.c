/* metrics.c - Prometheus counters, histograms and gauges (see metrics.h).
 *
 * DESIGN. Label sets are small and known in advance (transport x route x
 * format x status), so every series is a fixed slot in a static array of atomics:
 * recording is a few relaxed atomic adds with no lock and no allocation,
 * and rendering walks the array and prints the series that are non-zero.
 * Histogram buckets follow the Prometheus convention: cumulative counts
 * with an upper bound `le`, from 50 microseconds to 10 seconds.
 *
 * The `code` label is the exact status for every status tiled sends: the
 * slots come from status.h's TILED_STATUSES list, so a status added there
 * has its own label and cannot be left out. A code outside the list is
 * counted by its class, "4xx" or "5xx", which code=~"5.." still matches.
 *
 * The same text renders in two formats: Prometheus' text format 0.0.4, and
 * OpenMetrics 1.0 when the scraper asks for it (counter families named
 * without "_total", and "# EOF" at the end).
 */
#include "metrics.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "grow.h"
#include "recv_deadline.h"
#include "status.h"
#include "trace.h"
#include "version.h"

#ifndef TILED_GIT_COMMIT
#define TILED_GIT_COMMIT "unknown"
#endif

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The request formats, one more slot for requests that had none, and one
 * for gRPC's protobuf messages (exchange.h). */
#define NFORMATS TILED_FORMAT_COUNT
static const char *const format_names[NFORMATS] = {[TILE_FMT_JSON] = "json", [TILE_FMT_RAW] = "octet-stream",
                                                   [TILE_FMT_NPY] = "npy",   [TILED_FORMAT_NONE] = "none",
                                                   [TILED_FORMAT_PROTOBUF] = "protobuf"};
_Static_assert(COUNT(format_names) == NFORMATS, "a name per format slot");

/* The statuses counted one by one, then one slot per class (1xx to 5xx)
 * for codes tiled does not send itself. */
#define STATUS_CODE_(name, code) code,
static const int status_codes[] = {TILED_STATUSES(STATUS_CODE_)};
#undef STATUS_CODE_
#define STATUS_INDEX_(name, code) SLOT_##name,
enum { TILED_STATUSES(STATUS_INDEX_) NOWN_STATUS };
#undef STATUS_INDEX_
#define STATUS_RANGE_(name, code) _Static_assert((code) >= 100 && (code) <= 599, #name " is an HTTP status code");
TILED_STATUSES(STATUS_RANGE_)
#undef STATUS_RANGE_
_Static_assert(COUNT(status_codes) == NOWN_STATUS, "a code label per status of status.h");
#define NCLASSES 5
#define NSTATUS (NOWN_STATUS + NCLASSES)

/* The buckets' upper bounds in microseconds (rendered in seconds: `le`,
 * bound / 1e6, which is the double nearest the decimal bound). Whole
 * microseconds, so a request is placed with integer comparisons. */
static const uint64_t bounds_us[] = {50,     100,    250,    500,     1000,    2500,    5000,    10000,   25000,
                                     50000,  100000, 250000, 500000,  1000000, 2500000, 5000000, 10000000};
#define NBUCKETS COUNT(bounds_us)
enum phase { PHASE_QUEUE, PHASE_DECODE, PHASE_TILE, PHASE_ENCODE, NPHASES };
static const char *const phase_names[] = {
    [PHASE_QUEUE] = "queue", [PHASE_DECODE] = "decode", [PHASE_TILE] = "tile", [PHASE_ENCODE] = "encode"};
_Static_assert(COUNT(phase_names) == NPHASES, "a name per phase");

struct histogram {
    atomic_uint_fast64_t counts[NBUCKETS + 1]; /* last: above every bound */
    atomic_uint_fast64_t sum_us;
};

#define NTRANSPORTS TILED_TRANSPORT_COUNT

static struct {
    atomic_uint_fast64_t requests[NTRANSPORTS][TILED_RL_COUNT][NFORMATS][NSTATUS];
    atomic_uint_fast64_t bytes_in[NTRANSPORTS], bytes_out[NTRANSPORTS];
    struct histogram duration[NTRANSPORTS][TILED_RL_COUNT]; /* the whole request (service.h) */
    struct histogram phases[NTRANSPORTS][NPHASES];
    atomic_int connections[NTRANSPORTS];
} m;

static int status_slot(int status)
{
    for (int i = 0; i < NOWN_STATUS; i++) {
        if (status_codes[i] == status)
            return i;
    }
    int cls = status / 100;
    return NOWN_STATUS + (cls >= 1 && cls <= 5 ? cls - 1 : 4); /* nonsense: counted as a server error */
}

static void status_label(int slot, char out[8])
{
    if (slot < NOWN_STATUS)
        snprintf(out, 8, "%d", status_codes[slot]);
    else
        snprintf(out, 8, "%dxx", slot - NOWN_STATUS + 1);
}

void tiled_metrics_connection(enum tiled_transport transport, int delta)
{
    if ((unsigned)transport < NTRANSPORTS)
        atomic_fetch_add_explicit(&m.connections[transport], delta, memory_order_relaxed);
}

static void observe(struct histogram *h, uint64_t us)
{
    size_t b = 0;
    while (b < NBUCKETS && us > bounds_us[b])
        b++;
    atomic_fetch_add_explicit(&h->counts[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_us, us, memory_order_relaxed);
}

void tiled_metrics_record(const struct tiled_exchange *x, void *ctx)
{
    (void)ctx;
    enum tiled_route_label r = (unsigned)x->label < TILED_RL_COUNT ? x->label : TILED_RL_OTHER;
    int tr = (unsigned)x->transport < NTRANSPORTS ? (int)x->transport : TILED_TRANSPORT_HTTP;
    int f = x->format >= 0 && x->format < NFORMATS ? x->format : TILED_FORMAT_NONE;
    atomic_fetch_add_explicit(&m.requests[tr][r][f][status_slot(x->status)], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m.bytes_in[tr], x->bytes_in, memory_order_relaxed);
    atomic_fetch_add_explicit(&m.bytes_out[tr], x->bytes_out, memory_order_relaxed);
    observe(&m.duration[tr][r], x->duration_us);
    const struct tile_timings *t = x->tm;
    const uint64_t phase_us[NPHASES] = {
        [PHASE_QUEUE] = t->queue_us, [PHASE_DECODE] = t->decode_us, [PHASE_TILE] = t->tile_us,
        [PHASE_ENCODE] = t->encode_us,
    };
    for (int p = 0; p < NPHASES; p++)
        observe(&m.phases[tr][p], phase_us[p]);
}

/* ---- rendering ---------------------------------------------------------------- */

struct tiled_metrics_out {
    char *buf;
    size_t len, cap;
    int failed;
    bool openmetrics;
};

static void put(struct tiled_metrics_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct tiled_metrics_out *o, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            o->failed = 1;
            return;
        }
        if ((size_t)n < o->cap - o->len) {
            o->len += (size_t)n;
            return;
        }
        char *nb = tile_grow(o->buf, &o->cap, o->len, (size_t)n + 1, 1, 4096, SIZE_MAX); /* + its NUL */
        if (!nb) {
            o->failed = 1;
            return;
        }
        o->buf = nb;
    }
}

/* The registered providers (metrics.h): written before serving, read by scrapes. */
#define MAX_PROVIDERS 8
static struct {
    tiled_metrics_provider_fn *fn;
    void *ctx;
} providers[MAX_PROVIDERS];
static int nproviders;

int tiled_metrics_provide(tiled_metrics_provider_fn *fn, void *ctx)
{
    if (nproviders == MAX_PROVIDERS)
        return -1;
    providers[nproviders].fn = fn;
    providers[nproviders].ctx = ctx;
    nproviders++;
    return 0;
}

void tiled_metrics_provide_none(void)
{
    nproviders = 0;
}

/* A family's HELP and TYPE lines. OpenMetrics names a counter's family
 * without the "_total" its sample carries. */
static void header(struct tiled_metrics_out *o, const char *name, const char *type, const char *help)
{
    int n = (int)strlen(name);
    if (o->openmetrics && strcmp(type, "counter") == 0 && n > 6 && strcmp(name + n - 6, "_total") == 0)
        n -= 6;
    put(o, "# HELP %.*s %s\n# TYPE %.*s %s\n", n, name, help, n, name, type);
}

void tiled_metrics_family(struct tiled_metrics_out *o, const char *name, const char *type, const char *help)
{
    header(o, name, type, help);
}

void tiled_metrics_sample(struct tiled_metrics_out *o, const char *name, uint64_t value)
{
    put(o, "%s %llu\n", name, (unsigned long long)value);
}

/* Whether a transport's series are shown: HTTP's always (the daemon
 * always serves it), another's once it carried a request. */
static bool transport_shown(int t)
{
    uint64_t n = 0;
    for (size_t b = 0; b <= NBUCKETS; b++)
        for (int r = 0; r < TILED_RL_COUNT; r++)
            n += atomic_load(&m.duration[t][r].counts[b]);
    return t == TILED_TRANSPORT_HTTP || n > 0;
}

static void render_requests(struct tiled_metrics_out *o)
{
    header(o, "tiled_requests_total", "counter",
           "Requests answered, by transport, route, request format and status code.");
    for (int t = 0; t < NTRANSPORTS; t++)
        for (int r = 0; r < TILED_RL_COUNT; r++)
            for (int f = 0; f < NFORMATS; f++)
                for (int s = 0; s < (int)NSTATUS; s++) {
                    uint64_t v = atomic_load(&m.requests[t][r][f][s]);
                    if (!v)
                        continue;
                    char code[8];
                    status_label(s, code);
                    put(o, "tiled_requests_total{transport=\"%s\",route=\"%s\",format=\"%s\",code=\"%s\"} %llu\n",
                        tiled_transport_name((enum tiled_transport)t), tiled_route_label_name((enum tiled_route_label)r),
                        format_names[f], code, (unsigned long long)v);
                }
    header(o, "tiled_request_bytes_total", "counter", "Bytes of request bodies (gRPC: messages) received.");
    for (int t = 0; t < NTRANSPORTS; t++)
        if (transport_shown(t))
            put(o, "tiled_request_bytes_total{transport=\"%s\"} %llu\n", tiled_transport_name((enum tiled_transport)t),
                (unsigned long long)atomic_load(&m.bytes_in[t]));
    header(o, "tiled_response_bytes_total", "counter", "Bytes of response bodies (gRPC: messages) sent.");
    for (int t = 0; t < NTRANSPORTS; t++)
        if (transport_shown(t))
            put(o, "tiled_response_bytes_total{transport=\"%s\"} %llu\n", tiled_transport_name((enum tiled_transport)t),
                (unsigned long long)atomic_load(&m.bytes_out[t]));
}

/* One histogram's series; `labels` are its labels but le, as k="v",... */
static void render_histogram(struct tiled_metrics_out *o, const char *name, const char *labels, const struct histogram *h)
{
    uint64_t cum = 0;
    for (size_t b = 0; b <= NBUCKETS; b++) {
        char le[24];
        cum += atomic_load(&h->counts[b]);
        if (b < NBUCKETS)
            snprintf(le, sizeof(le), "%g", (double)bounds_us[b] / 1e6);
        put(o, "%s_bucket{%s,le=\"%s\"} %llu\n", name, labels, b < NBUCKETS ? le : "+Inf", (unsigned long long)cum);
    }
    put(o, "%s_sum{%s} %.6f\n", name, labels, (double)atomic_load(&h->sum_us) / 1e6);
    put(o, "%s_count{%s} %llu\n", name, labels, (unsigned long long)cum);
}

static uint64_t histogram_count(const struct histogram *h)
{
    uint64_t n = 0;
    for (size_t b = 0; b <= NBUCKETS; b++)
        n += atomic_load(&h->counts[b]);
    return n;
}

static void render_histograms(struct tiled_metrics_out *o)
{
    char labels[96];
    header(o, "tiled_request_duration_seconds", "histogram",
           "Time from a request's head read to its last byte handed to the socket, by transport and route.");
    for (int t = 0; t < NTRANSPORTS; t++)
        for (int r = 0; r < TILED_RL_COUNT; r++) {
            if (!histogram_count(&m.duration[t][r]))
                continue;
            snprintf(labels, sizeof(labels), "transport=\"%s\",route=\"%s\"",
                     tiled_transport_name((enum tiled_transport)t), tiled_route_label_name((enum tiled_route_label)r));
            render_histogram(o, "tiled_request_duration_seconds", labels, &m.duration[t][r]);
        }
    header(o, "tiled_request_phase_seconds", "histogram",
           "Time per phase of a request (as Server-Timing): queue (waiting for a worker), decode, tile, encode.");
    for (int t = 0; t < NTRANSPORTS; t++)
        for (int p = 0; transport_shown(t) && p < NPHASES; p++) {
            snprintf(labels, sizeof(labels), "transport=\"%s\",phase=\"%s\"",
                     tiled_transport_name((enum tiled_transport)t), phase_names[p]);
            render_histogram(o, "tiled_request_phase_seconds", labels, &m.phases[t][p]);
        }
}

/* Requests too slow to arrive (server/http/h1conn.c, recv_deadline.h). */
static void render_receive_timeouts(struct tiled_metrics_out *o, const struct tiled_metrics_gauges *g)
{
    header(o, "tiled_header_timeouts_total", "counter",
           "Connections cut because a request head did not arrive within --header-timeout.");
    put(o, "tiled_header_timeouts_total %llu\n", (unsigned long long)g->header_timeouts);
    header(o, "tiled_body_timeouts_total", "counter",
           "Requests refused (408; gRPC: DEADLINE_EXCEEDED) or cut because their body (gRPC: the call's whole "
           "request) did not arrive within --header-timeout plus a second per " TILED_RECV_MIN_RATE_TEXT
           " bytes received.");
    for (int t = 0; t < NTRANSPORTS; t++) {
        if (t != TILED_TRANSPORT_HTTP && !g->grpc)
            continue;
        put(o, "tiled_body_timeouts_total{transport=\"%s\"} %llu\n", tiled_transport_name((enum tiled_transport)t),
            (unsigned long long)g->body_timeouts[t]);
    }
}

static void render_gauges(struct tiled_metrics_out *o, const struct tiled_metrics_gauges *g)
{
    header(o, "tiled_inflight_requests", "gauge", "Requests being received, processed or sent.");
    put(o, "tiled_inflight_requests %d\n", g->inflight);
    header(o, "tiled_open_connections", "gauge", "Client connections open, by transport.");
    for (int t = 0; t < NTRANSPORTS; t++) {
        if (t != TILED_TRANSPORT_HTTP && !g->grpc)
            continue;
        put(o, "tiled_open_connections{transport=\"%s\"} %d\n", tiled_transport_name((enum tiled_transport)t),
            atomic_load(&m.connections[t]));
    }
    header(o, "tiled_max_connections", "gauge", "Connections a transport accepts at once (--max-connections).");
    put(o, "tiled_max_connections %lld\n", g->max_connections);
    header(o, "tiled_draining", "gauge", "1 from SIGTERM until the daemon stops: no new requests are taken.");
    put(o, "tiled_draining %d\n", g->draining ? 1 : 0);
    header(o, "tiled_queue_depth", "gauge", "Requests waiting for a worker.");
    put(o, "tiled_queue_depth %d\n", g->queue_depth);
    header(o, "tiled_workers", "gauge", "Size of the worker pool.");
    put(o, "tiled_workers %d\n", g->workers);
    header(o, "tiled_busy_workers", "gauge", "Workers running a job.");
    put(o, "tiled_busy_workers %d\n", g->busy_workers);
    render_receive_timeouts(o, g);
    for (int i = 0; i < nproviders; i++)
        providers[i].fn(o, providers[i].ctx);
    header(o, "tiled_build_info", "gauge", "Build information; the value is always 1.");
    put(o, "tiled_build_info{version=\"%s\",commit=\"%s\"} 1\n", TILED_VERSION, TILED_GIT_COMMIT);
}

static int count_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d)
        return 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n > 3 ? n - 3 : 0; /* ".", ".." and the directory's own fd */
}

static void render_process(struct tiled_metrics_out *o, const struct tiled_metrics_gauges *g)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
                 (double)ru.ru_stime.tv_usec / 1e6;
    header(o, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
    put(o, "process_resident_memory_bytes %ld\n", rss * sysconf(_SC_PAGESIZE));
    header(o, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
    put(o, "process_virtual_memory_bytes %ld\n", pages * sysconf(_SC_PAGESIZE));
    header(o, "process_open_fds", "gauge", "Number of open file descriptors.");
    put(o, "process_open_fds %d\n", count_open_fds());
    header(o, "process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch in seconds.");
    put(o, "process_start_time_seconds %.3f\n", (double)g->start_wall_ms / 1e3);
    header(o, "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.");
    put(o, "process_cpu_seconds_total %.6f\n", cpu);
}

static void render_tracing(struct tiled_metrics_out *o)
{
    uint64_t exported, failed, dropped;
    if (!tiled_trace_exporting())
        return;
    tiled_trace_counts(&exported, &failed, &dropped);
    header(o, "tiled_otlp_spans_exported_total", "counter", "Spans the OTLP collector accepted.");
    put(o, "tiled_otlp_spans_exported_total %llu\n", (unsigned long long)exported);
    header(o, "tiled_otlp_spans_failed_total", "counter",
           "Spans sent to the OTLP collector that it refused or that could not reach it.");
    put(o, "tiled_otlp_spans_failed_total %llu\n", (unsigned long long)failed);
    header(o, "tiled_otlp_spans_dropped_total", "counter",
           "Spans dropped before export because the queue of finished spans was full.");
    put(o, "tiled_otlp_spans_dropped_total %llu\n", (unsigned long long)dropped);
    uint64_t queued, capacity;
    tiled_trace_queued(&queued, &capacity);
    header(o, "tiled_otlp_queued_requests", "gauge", "Finished requests whose spans wait for export.");
    put(o, "tiled_otlp_queued_requests %llu\n", (unsigned long long)queued);
    header(o, "tiled_otlp_queue_capacity", "gauge",
           "Finished requests the export queue holds at most; past it, spans are dropped.");
    put(o, "tiled_otlp_queue_capacity %llu\n", (unsigned long long)capacity);
}

char *tiled_metrics_render(const struct tiled_metrics_gauges *g, bool openmetrics, size_t *len)
{
    struct tiled_metrics_out o = {malloc(16384), 0, 16384, 0, openmetrics};
    if (!o.buf)
        return NULL;
    render_requests(&o);
    render_histograms(&o);
    render_gauges(&o, g);
    render_process(&o, g);
    render_tracing(&o);
    if (openmetrics)
        put(&o, "# EOF\n");
    if (o.failed) {
        free(o.buf);
        return NULL;
    }
    *len = o.len;
    return o.buf;
}
