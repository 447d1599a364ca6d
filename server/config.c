/* config.c - the option table and its loaders (see config.h). */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

static const struct opt_enum log_formats[] = {{"json", TILED_LOG_JSON}, {"text", TILED_LOG_TEXT}, {NULL, 0}};
static const struct opt_enum log_levels[] = {
    {"error", TILED_LOG_ERROR}, {"warn", TILED_LOG_WARN}, {"info", TILED_LOG_INFO}, {"debug", TILED_LOG_DEBUG},
    {NULL, 0}};

#define OFF(field) offsetof(struct tiled_config, field)
#define GIB (INT64_C(1) << 30)

static const struct tiled_option tiled_options[] = {
    {"host", "TILED_HOST", OPT_STRING, OFF(host), "127.0.0.1", 0, 0, NULL, "address to listen on"},
    {"port", "TILED_PORT", OPT_INT, OFF(port), "8080", 0, 65535, NULL, "TCP port; 0 picks a free one"},
    {"workers", "TILED_WORKERS", OPT_INT, OFF(workers), "0", 0, 1024, NULL,
     "tiling worker threads; 0 = one per online CPU"},
    {"http-threads", "TILED_HTTP_THREADS", OPT_INT, OFF(http_threads), "1", 1, 64, NULL,
     "HTTP event-loop threads"},
    {"queue", "TILED_QUEUE", OPT_INT, OFF(queue), "256", 1, 1 << 20, NULL,
     "requests waiting for a worker before new ones get 503"},
    {"max-body", "TILED_MAX_BODY", OPT_SIZE, OFF(max_body), "256M", 1, 1024 * GIB, NULL,
     "largest request body in bytes (after decompression)"},
    {"max-output", "TILED_MAX_OUTPUT", OPT_SIZE, OFF(max_output), "1G", 1, 1024 * GIB, NULL,
     "largest output held in memory, in bytes"},
    {"max-stream", "TILED_MAX_STREAM", OPT_SIZE, OFF(max_stream), "64G", 1, INT64_MAX, NULL,
     "largest streamed output, in bytes"},
    {"max-rank", "TILED_MAX_RANK", OPT_INT, OFF(max_rank), "64", 1, TILE_MAX_RANK, NULL,
     "largest input or output rank"},
    {"max-json-depth", "TILED_MAX_JSON_DEPTH", OPT_INT, OFF(max_json_depth), "80", 2, 1000, NULL,
     "deepest JSON nesting accepted"},
    {"max-connections", "TILED_MAX_CONNECTIONS", OPT_INT, OFF(max_connections), "4096", 1, 1 << 20, NULL,
     "simultaneous connections"},
    {"idle-timeout", "TILED_IDLE_TIMEOUT", OPT_INT, OFF(idle_timeout), "30", 1, 86400, NULL,
     "seconds before an idle connection is closed"},
    {"header-timeout", "TILED_HEADER_TIMEOUT", OPT_INT, OFF(header_timeout), "30", 0, 86400, NULL,
     "seconds a client has to send a whole request head, from the connection's start or its previous "
     "request's end (plus --idle-timeout, the keep-alive gap); a slower one is cut (0 = off)"},
    {"drain-timeout", "TILED_DRAIN_TIMEOUT", OPT_INT, OFF(drain_timeout), "20", 0, 3600, NULL,
     "seconds to finish in-flight requests after SIGTERM"},
    {"stream-threshold", "TILED_STREAM_THRESHOLD", OPT_SIZE, OFF(stream_threshold), "8M", 0, INT64_MAX, NULL,
     "response bodies above this many bytes are streamed in chunks"},
    {"body-cache", "TILED_BODY_CACHE", OPT_SIZE, OFF(body_cache), "64M", 0, INT64_MAX, NULL,
     "bytes of answered response bodies kept for reuse, so in-memory outputs skip first-touch page faults "
     "(0 = off)"},
    {"stream-chunk", "TILED_STREAM_CHUNK", OPT_SIZE, OFF(stream_chunk), "1M", 4096, 256 << 20, NULL,
     "bytes per streamed chunk"},
    {"inline-max", "TILED_INLINE_MAX", OPT_SIZE, OFF(inline_max), "64K", 0, 16 << 20, NULL,
     "requests whose body and output are both below this are served on the HTTP thread"},
    {"log-format", "TILED_LOG_FORMAT", OPT_ENUM, OFF(log_format), "json", 0, 0, log_formats,
     "access and event log format: json or text"},
    {"log-level", "TILED_LOG_LEVEL", OPT_ENUM, OFF(log_level), "info", 0, 0, log_levels,
     "error, warn, info or debug; access logs are info"},
    {"api-key-file", "TILED_API_KEY_FILE", OPT_STRING, OFF(api_key_file), "", 0, 0, NULL,
     "file of API keys, one per line; when set, every route but health needs Authorization: Bearer KEY "
     "(re-read on SIGHUP)"},
    {"tls-cert", "TILED_TLS_CERT", OPT_STRING, OFF(tls_cert), "", 0, 0, NULL,
     "PEM certificate file; with --tls-key, serve HTTPS"},
    {"tls-key", "TILED_TLS_KEY", OPT_STRING, OFF(tls_key), "", 0, 0, NULL, "PEM private key file for --tls-cert"},
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

void tiled_config_help(FILE *out)
{
    fprintf(out, "usage: tiled serve [options]\n\n"
                 "options (each also read from its environment variable):\n");
    for (size_t i = 0; i < NOPTIONS; i++) {
        const struct tiled_option *o = &tiled_options[i];
        fprintf(out, "  --%-18s %-24s %s (default: %s)\n", o->flag, o->env, o->help, o->def);
    }
    fprintf(out, "  --%-18s %-24s %s\n", "print-config", "", "print the effective configuration and exit");
    fprintf(out, "  --%-18s %-24s %s\n", "help", "", "show this help");
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
