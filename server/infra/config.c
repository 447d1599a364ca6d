/* config.c - the option table and its loaders (see config.h). */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "recv_deadline.h"
#include "request.h"

enum opt_type { OPT_STRING, OPT_INT, OPT_SIZE, OPT_ENUM };

struct opt_enum {
    const char *name;
    int64_t value;
};

struct tiled_option {
    const char *flag;
    const char *env;
    enum opt_type type;
    size_t offset;
    const char *def;
    int64_t min, max;
    const struct opt_enum *enums;
    const char *help;
};

static const struct opt_enum log_formats[] = {
    {.name = "json", .value = TILED_LOG_JSON}, {.name = "text", .value = TILED_LOG_TEXT}, {.name = NULL}};
static const struct opt_enum shm_kinds[] = {
    {.name = "none", .value = TILED_SHM_NONE}, {.name = "system", .value = TILED_SHM_SYSTEM}, {.name = NULL}};
static const struct opt_enum log_levels[] = {
    {.name = "error", .value = TILED_LOG_ERROR}, {.name = "warn", .value = TILED_LOG_WARN},
    {.name = "info", .value = TILED_LOG_INFO},   {.name = "debug", .value = TILED_LOG_DEBUG},
    {.name = NULL}};

/* Mozilla's "intermediate" TLS configuration: TLS 1.2 and 1.3, ECDHE key
 * exchange, AES-GCM and ChaCha20-Poly1305 only, its three curves, in the
 * server's order. */
#define TILED_TLS_DEFAULT_PRIORITIES                                                                                 \
    "SECURE128:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:"        \
    "-MAC-ALL:+AEAD:-KX-ALL:+ECDHE-ECDSA:+ECDHE-RSA:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:+GROUP-SECP384R1:"    \
    "%SERVER_PRECEDENCE"

#define OFF(field) offsetof(struct tiled_config, field)
#define GIB (INT64_C(1) << 30)

static const struct tiled_option tiled_options[] = {
    {.flag = "host",
     .env = "TILED_HOST",
     .type = OPT_STRING,
     .offset = OFF(host),
     .def = "127.0.0.1",
     .help = "address to listen on, both ports: an IPv4 or IPv6 literal (:: takes IPv4 too) or a name"},
    {.flag = "port",
     .env = "TILED_PORT",
     .type = OPT_INT,
     .offset = OFF(port),
     .def = "8080",
     .min = 0,
     .max = 65535,
     .help = "TCP port; 0 picks a free one"},
    {.flag = "workers",
     .env = "TILED_WORKERS",
     .type = OPT_INT,
     .offset = OFF(workers),
     .def = "0",
     .min = 0,
     .max = 1024,
     .help = "tiling worker threads; 0 = one per online CPU"},
    {.flag = "http-threads",
     .env = "TILED_HTTP_THREADS",
     .type = OPT_INT,
     .offset = OFF(http_threads),
     .def = "1",
     .min = 1,
     .max = 64,
     .help = "HTTP event-loop threads, and as many for gRPC"},
    {.flag = "grpc-port",
     .env = "TILED_GRPC_PORT",
     .type = OPT_INT,
     .offset = OFF(grpc_port),
     .def = "-1",
     .min = -1,
     .max = 65535,
     .help = "TCP port of the Open Inference Protocol over gRPC (8081 in the container image); -1 = off, 0 picks a "
             "free one"},
    {.flag = "max-grpc-message",
     .env = "TILED_MAX_GRPC_MESSAGE",
     .type = OPT_SIZE,
     .offset = OFF(max_grpc_message),
     .def = "2147483647",
     .min = 64,
     .max = 4294967295,
     .help = "largest gRPC message received or sent, in bytes (a bigger output is refused with RESOURCE_EXHAUSTED)"},
    {.flag = "max-grpc-conn-memory",
     .env = "TILED_MAX_GRPC_CONN_MEMORY",
     .type = OPT_SIZE,
     .offset = OFF(max_grpc_conn_memory),
     .def = "2G",
     .min = 1,
     .max = 1024 * GIB,
     .help = "bytes of request messages (declared sizes) and of replies not yet sent (a streamed one: its two "
             "chunks) that the calls of one gRPC connection may hold; a call or reply above it is refused with "
             "RESOURCE_EXHAUSTED (one call alone is always let in up to --max-body)"},
    {.flag = "grpc-max-connection-age",
     .env = "TILED_GRPC_MAX_CONNECTION_AGE",
     .type = OPT_INT,
     .offset = OFF(grpc_max_conn_age),
     .def = "0",
     .min = 0,
     .max = 30 * 86400,
     .help = "seconds (each connection's own, within +-10%) after which a gRPC connection is told to go away "
             "(GOAWAY, twice: RFC 9113 section 6.8), so long-lived clients spread again over replicas behind an L4 "
             "balancer; 0 = never"},
    {.flag = "grpc-max-connection-age-grace",
     .env = "TILED_GRPC_MAX_CONNECTION_AGE_GRACE",
     .type = OPT_INT,
     .offset = OFF(grpc_max_conn_age_grace),
     .def = "0",
     .min = 0,
     .max = 30 * 86400,
     .help = "seconds the calls of a connection past --grpc-max-connection-age have to finish before it is "
             "closed (calls still open end as cut short); 0 = as long as they take"},
    {.flag = "queue",
     .env = "TILED_QUEUE",
     .type = OPT_INT,
     .offset = OFF(queue),
     .def = "256",
     .min = 1,
     .max = 1 << 20,
     .help = "requests waiting for a worker before new ones get 503"},
    {.flag = "max-body",
     .env = "TILED_MAX_BODY",
     .type = OPT_SIZE,
     .offset = OFF(max_body),
     .def = "256M",
     .min = 1,
     .max = 1024 * GIB,
     .help = "largest request body in bytes (after decompression)"},
    {.flag = "max-memory",
     .env = "TILED_MAX_MEMORY",
     .type = OPT_SIZE,
     .offset = OFF(max_memory),
     .def = "0",
     .min = 0,
     .max = INT64_MAX,
     .help = "bytes of request memory (bodies, decoded inputs, replies held in memory, a streamed reply's two "
             "chunks, the state of gRPC calls and of requests that tile) that all requests together may hold; a request that would go above is "
             "refused with 503 and Retry-After (gRPC: UNAVAILABLE, or REFUSED_STREAM), unless it is alone; 0 = no "
             "bound. docs/operations.md, Memory, sums up the rest"},
    {.flag = "max-output",
     .env = "TILED_MAX_OUTPUT",
     .type = OPT_SIZE,
     .offset = OFF(max_output),
     .def = "64G",
     .min = 1,
     .max = INT64_MAX,
     .help = "largest output in bytes, held in memory or streamed (outputs above --stream-threshold are streamed)"},
    {.flag = "max-stream",
     .env = "TILED_MAX_STREAM",
     .type = OPT_SIZE,
     .offset = OFF(max_stream),
     .def = "64G",
     .min = 1,
     .max = INT64_MAX,
     .help = "largest streamed output, in bytes (also bounded by --max-output)"},
    {.flag = "max-rank",
     .env = "TILED_MAX_RANK",
     .type = OPT_INT,
     .offset = OFF(max_rank),
     .def = "64",
     .min = 1,
     .max = TILE_MAX_RANK,
     .help = "largest input or output rank"},
    {.flag = "max-json-depth",
     .env = "TILED_MAX_JSON_DEPTH",
     .type = OPT_INT,
     .offset = OFF(max_json_depth),
     .def = "80",
     .min = 2,
     .max = 1000,
     .help = "deepest JSON nesting accepted"},
    {.flag = "max-connections",
     .env = "TILED_MAX_CONNECTIONS",
     .type = OPT_INT,
     .offset = OFF(max_connections),
     .def = "4096",
     .min = 1,
     .max = 1 << 20,
     .help = "simultaneous connections"},
    {.flag = "idle-timeout",
     .env = "TILED_IDLE_TIMEOUT",
     .type = OPT_INT,
     .offset = OFF(idle_timeout),
     .def = "30",
     .min = 1,
     .max = 86400,
     .help = "seconds before an idle connection is closed"},
    {.flag = "header-timeout",
     .env = "TILED_HEADER_TIMEOUT",
     .type = OPT_INT,
     .offset = OFF(header_timeout),
     .def = "30",
     .min = 0,
     .max = 86400,
     .help = "seconds a client has to send a whole request head, from the connection's start or its previous "
             "request's end (plus --idle-timeout, the keep-alive gap); a slower one is cut; then as long, plus a "
             "second per " TILED_RECV_MIN_RATE_TEXT " bytes received, from the head's end for the body (else 408, or "
             "a cut when it stalls) and from a gRPC call's start for its whole request (else DEADLINE_EXCEEDED); "
             "0 = off"},
    {.flag = "drain-timeout",
     .env = "TILED_DRAIN_TIMEOUT",
     .type = OPT_INT,
     .offset = OFF(drain_timeout),
     .def = "20",
     .min = 0,
     .max = 3600,
     .help = "seconds to finish in-flight requests after SIGTERM"},
    {.flag = "stream-threshold",
     .env = "TILED_STREAM_THRESHOLD",
     .type = OPT_SIZE,
     .offset = OFF(stream_threshold),
     .def = "8M",
     .min = 0,
     .max = INT64_MAX,
     .help = "response bodies above this many bytes are streamed in chunks"},
    {.flag = "body-cache",
     .env = "TILED_BODY_CACHE",
     .type = OPT_SIZE,
     .offset = OFF(body_cache),
     .def = "64M",
     .min = 0,
     .max = INT64_MAX,
     .help = "bytes of answered response bodies kept for reuse, so in-memory outputs skip first-touch page faults "
             "(0 = off)"},
    {.flag = "stream-chunk",
     .env = "TILED_STREAM_CHUNK",
     .type = OPT_SIZE,
     .offset = OFF(stream_chunk),
     .def = "1M",
     .min = 4096,
     .max = 256 << 20,
     .help = "bytes per streamed chunk"},
    {.flag = "inline-max",
     .env = "TILED_INLINE_MAX",
     .type = OPT_SIZE,
     .offset = OFF(inline_max),
     .def = "64K",
     .min = 0,
     .max = 16 << 20,
     .help = "requests whose body and output are both below this are served on the transport's thread (a "
             "compressed body never is: it is inflated and read on a worker)"},
    {.flag = "log-format",
     .env = "TILED_LOG_FORMAT",
     .type = OPT_ENUM,
     .offset = OFF(log_format),
     .def = "json",
     .enums = log_formats,
     .help = "access and event log format: json or text"},
    {.flag = "log-level",
     .env = "TILED_LOG_LEVEL",
     .type = OPT_ENUM,
     .offset = OFF(log_level),
     .def = "info",
     .enums = log_levels,
     .help = "error, warn, info or debug; access logs are info"},
    {.flag = "log-flush-ms",
     .env = "TILED_LOG_FLUSH_MS",
     .type = OPT_INT,
     .offset = OFF(log_flush_ms),
     .def = "10",
     .min = 0,
     .max = 10000,
     .help = "access lines are written together: by an event loop about to wait once about a hundred have "
             "gathered, else at most this many milliseconds after the first (other lines at once, after them); 0 = "
             "each as it is made"},
    {.flag = "api-key-file",
     .env = "TILED_API_KEY_FILE",
     .type = OPT_STRING,
     .offset = OFF(api_key_file),
     .def = "",
     .help = "file of API keys, one per line; when set, every route but health needs Authorization: Bearer KEY "
             "(re-read on SIGHUP)"},
    {.flag = "cors-origins",
     .env = "TILED_CORS_ORIGINS",
     .type = OPT_STRING,
     .offset = OFF(cors_origins),
     .def = "",
     .help = "origins besides its own that a browser page may call tiled from: comma-separated "
             "(https://app.example) or *; empty = none (no CORS headers; a request from another origin gets 403)"},
    {.flag = "tls-cert",
     .env = "TILED_TLS_CERT",
     .type = OPT_STRING,
     .offset = OFF(tls_cert),
     .def = "",
     .help = "PEM certificate file; with --tls-key, serve HTTPS"},
    {.flag = "tls-key",
     .env = "TILED_TLS_KEY",
     .type = OPT_STRING,
     .offset = OFF(tls_key),
     .def = "",
     .help = "PEM private key file for --tls-cert (unencrypted); both are re-read on SIGHUP"},
    {.flag = "tls-client-ca",
     .env = "TILED_TLS_CLIENT_CA",
     .type = OPT_STRING,
     .offset = OFF(tls_client_ca),
     .def = "",
     .help = "PEM file of CA certificates: both ports then require a client certificate issued by one of them "
             "(mutual TLS; the handshake fails without); re-read on SIGHUP with --tls-cert"},
    {.flag = "tls-priorities",
     .env = "TILED_TLS_PRIORITIES",
     .type = OPT_STRING,
     .offset = OFF(tls_priorities),
     .def = TILED_TLS_DEFAULT_PRIORITIES,
     .help = "TLS versions and suites of both ports, as a GnuTLS priority string (check one with gnutls-cli "
             "--priority STRING --list); the gRPC port also drops what HTTP/2 forbids (TLS < 1.2, RFC 9113 "
             "Appendix A suites)"},
    {.flag = "hsts-max-age",
     .env = "TILED_HSTS_MAX_AGE",
     .type = OPT_INT,
     .offset = OFF(hsts_max_age),
     .def = "63072000",
     .min = 0,
     .max = INT32_MAX,
     .help = "max-age in seconds of the Strict-Transport-Security header of HTTPS answers; 0 = no header"},
    {.flag = "shared-memory",
     .env = "TILED_SHARED_MEMORY",
     .type = OPT_ENUM,
     .offset = OFF(shared_memory),
     .def = "none",
     .enums = shm_kinds,
     .help = "none or system: let clients on this host register POSIX shared-memory regions that infer requests "
             "read inputs from and write outputs into (Triton's system_shared_memory extension)"},
    {.flag = "otlp-endpoint",
     .env = "TILED_OTLP_ENDPOINT",
     .type = OPT_STRING,
     .offset = OFF(otlp_endpoint),
     .def = "",
     .help = "OpenTelemetry collector to export spans to, OTLP/HTTP protobuf: http://host:port (POSTs to "
             "/v1/traces) or http://host:port/path; empty = off. One span per request (the caller's "
             "traceparent its parent, unless that says not sampled) with a child per phase"},
    {.flag = "shm-max-regions",
     .env = "TILED_SHM_MAX_REGIONS",
     .type = OPT_INT,
     .offset = OFF(shm_max_regions),
     .def = "64",
     .min = 1,
     .max = 1024,
     .help = "shared-memory regions registered at once"},
    {.flag = "shm-max-bytes",
     .env = "TILED_SHM_MAX_BYTES",
     .type = OPT_SIZE,
     .offset = OFF(shm_max_bytes),
     .def = "16G",
     .min = 4096,
     .max = INT64_MAX,
     .help = "bytes of shared memory mapped at once (regions still used by a request count until it ends)"},
    {.flag = "shm-key-prefix",
     .env = "TILED_SHM_KEY_PREFIX",
     .type = OPT_STRING,
     .offset = OFF(shm_key_prefix),
     .def = "",
     .help = "when set, only keys starting with it (after the leading '/') may be registered"},
};

#define NOPTIONS (sizeof(tiled_options) / sizeof(tiled_options[0]))

/* Parses sizes like 4096, 64K, 256M, 1G (binary multiples). */
static int parse_size(const char *s, int64_t *out)
{
    size_t len = strlen(s), digits = len;
    int shift = 0;
    if (len && strchr("kKmMgGtT", s[len - 1])) {
        shift = strchr("kK", s[len - 1]) ? 10 : strchr("mM", s[len - 1]) ? 20 : strchr("gG", s[len - 1]) ? 30 : 40;
        digits--;
    }
    int64_t v;
    if (tile_parse_int64(s, digits, &v, "size", NULL) < 0 || v < 0)
        return -1;
    if (shift && v > (INT64_MAX >> shift))
        return -1;
    *out = v << shift;
    return 0;
}

static int set_option(struct tiled_config *cfg, const struct tiled_option *o, const char *value, const char *from,
                      struct tile_error *e)
{
    char *field = (char *)cfg + o->offset;
    int64_t v = 0;
    switch (o->type) {
    case OPT_STRING: /* every string option is a char[256] */
        if (strlen(value) >= sizeof(cfg->host))
            return tile_error_set(e, TILE_EINVAL, "%s: value for %s is too long", from, o->flag);
        memcpy(field, value, strlen(value) + 1);
        return 0;
    case OPT_ENUM:
        for (const struct opt_enum *en = o->enums; en->name; en++) {
            if (strcasecmp(en->name, value) == 0) {
                memcpy(field, &en->value, sizeof(int64_t));
                return 0;
            }
        }
        return tile_error_set(e, TILE_EINVAL, "%s: '%s' is not a valid %s", from, value, o->flag);
    case OPT_INT:
        if (tile_parse_int64(value, strlen(value), &v, o->flag, NULL) < 0)
            return tile_error_set(e, TILE_EINVAL, "%s: '%s' is not an integer for %s", from, value, o->flag);
        break;
    case OPT_SIZE:
        if (parse_size(value, &v) < 0)
            return tile_error_set(e, TILE_EINVAL, "%s: '%s' is not a size for %s (e.g. 4096, 64K, 256M, 1G)", from,
                                  value, o->flag);
        break;
    }
    if (v < o->min || v > o->max)
        return tile_error_set(e, TILE_EINVAL, "%s: %s must be in %lld..%lld, got %lld", from, o->flag,
                              (long long)o->min, (long long)o->max, (long long)v);
    memcpy(field, &v, sizeof(v));
    return 0;
}

static const struct tiled_option *find_flag(const char *name, size_t len)
{
    for (size_t i = 0; i < NOPTIONS; i++) {
        if (strlen(tiled_options[i].flag) == len && strncmp(tiled_options[i].flag, name, len) == 0)
            return &tiled_options[i];
    }
    return NULL;
}

static int load_args(struct tiled_config *cfg, int argc, char **argv, FILE *out, struct tile_error *e)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            tiled_config_help(out);
            return 1;
        }
        if (strcmp(a, "--help-markdown") == 0) {
            tiled_config_markdown(out);
            return 1;
        }
        if (strcmp(a, "--print-config") == 0) {
            int rest = load_args(cfg, argc - i, argv + i, out, e); /* later flags still apply */
            if (rest < 0)
                return -1;
            tiled_config_print(cfg, out);
            return 1;
        }
        if (strncmp(a, "--", 2) != 0)
            return tile_error_set(e, TILE_EINVAL, "unexpected argument '%s' (see --help)", a);
        const char *eq = strchr(a + 2, '=');
        size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        const struct tiled_option *o = find_flag(a + 2, len);
        if (!o)
            return tile_error_set(e, TILE_EINVAL, "unknown option '%s' (see --help)", a);
        const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!value)
            return tile_error_set(e, TILE_EINVAL, "option --%s needs a value", o->flag);
        if (set_option(cfg, o, value, "command line", e) < 0)
            return -1;
    }
    return 0;
}

int tiled_config_load(struct tiled_config *cfg, int argc, char **argv, FILE *out, struct tile_error *e)
{
    memset(cfg, 0, sizeof(*cfg));
    for (size_t i = 0; i < NOPTIONS; i++) {
        if (set_option(cfg, &tiled_options[i], tiled_options[i].def, "default", e) < 0)
            return -1;
    }
    for (size_t i = 0; i < NOPTIONS; i++) {
        const char *v = getenv(tiled_options[i].env);
        if (v && set_option(cfg, &tiled_options[i], v, tiled_options[i].env, e) < 0)
            return -1;
    }
    return load_args(cfg, argc, argv, out, e);
}

static void format_value(const struct tiled_config *cfg, const struct tiled_option *o, char *buf, size_t cap)
{
    const char *field = (const char *)cfg + o->offset;
    int64_t v;
    if (o->type == OPT_STRING) {
        snprintf(buf, cap, "%s", field);
        return;
    }
    memcpy(&v, field, sizeof(v));
    if (o->type == OPT_ENUM) {
        for (const struct opt_enum *en = o->enums; en->name; en++) {
            if (en->value == v) {
                snprintf(buf, cap, "%s", en->name);
                return;
            }
        }
    }
    snprintf(buf, cap, "%lld", (long long)v);
}

/* TEXT from column 7, wrapped to lines of at most HELP_COLUMNS after a
 * character of BREAKS (a space is dropped there, another kept). */
#define HELP_COLUMNS 100
static void print_wrapped(FILE *out, const char *text, const char *breaks)
{
    const int indent = 6;
    int col = 0;
    for (const char *w = text; *w;) {
        int n = (int)strcspn(w, breaks);
        if (w[n] && w[n] != ' ')
            n++; /* a kept break character ends its piece */
        if (col > indent && col + 1 + n > HELP_COLUMNS) {
            fputc('\n', out);
            col = 0;
        }
        bool space = col && w[-1] == ' ';
        col += col ? fprintf(out, "%s%.*s", space ? " " : "", n, w) : fprintf(out, "%*s%.*s", indent, "", n, w);
        w += n;
        w += strspn(w, " ");
    }
    fputc('\n', out);
}

void tiled_config_help(FILE *out)
{
    fprintf(out, "usage: tiled serve [options]\n\n"
                 "options (each also read from its environment variable):\n");
    for (size_t i = 0; i < NOPTIONS; i++) {
        const struct tiled_option *o = &tiled_options[i];
        int head = (int)(strlen(o->flag) + strlen(o->env) + strlen(o->def) + 20);
        if (head <= HELP_COLUMNS) {
            fprintf(out, "  --%s  %s  (default: %s)\n", o->flag, o->env, o->def);
            print_wrapped(out, o->help, " ");
        } else { /* a long default (TLS priorities) goes below, broken after its colons */
            fprintf(out, "  --%s  %s  (default below)\n", o->flag, o->env);
            print_wrapped(out, o->help, " ");
            fprintf(out, "      default:\n");
            print_wrapped(out, o->def, ":");
        }
    }
    fprintf(out, "  --print-config\n");
    print_wrapped(out, "print the effective configuration and exit", " ");
    fprintf(out, "  --help\n");
    print_wrapped(out, "show this help", " ");
}

void tiled_config_print(const struct tiled_config *cfg, FILE *out)
{
    char buf[300];
    for (size_t i = 0; i < NOPTIONS; i++) {
        format_value(cfg, &tiled_options[i], buf, sizeof(buf));
        fprintf(out, "%s = %s\n", tiled_options[i].flag, buf);
    }
}

void tiled_config_markdown(FILE *out)
{
    fprintf(out, "| flag | environment | default | meaning |\n|---|---|---|---|\n");
    for (size_t i = 0; i < NOPTIONS; i++) {
        const struct tiled_option *o = &tiled_options[i];
        fprintf(out, "| `--%s` | `%s` | `%s` | %s |\n", o->flag, o->env, o->def, o->help);
    }
}
