/* log.c - one line per event on stderr, JSON or text.
 *
 * DESIGN. Lines are formatted into a local buffer and written with a single
 * write(2), so lines from different threads never interleave. The level
 * check comes first, so a disabled level costs one comparison.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#include "base.h"
#include "server.h"

static enum tiled_log_level log_level = TILED_LOG_INFO;
static enum tiled_log_format log_format = TILED_LOG_JSON;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void tiled_log_init(const struct tiled_config *cfg)
{
    log_level = (enum tiled_log_level)cfg->log_level;
    log_format = (enum tiled_log_format)cfg->log_format;
}

static size_t timestamp(char *buf, size_t cap)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(buf + n, cap - n, ".%03ldZ", ts.tv_nsec / 1000000);
    return n;
}

static void emit(char *line, size_t n, size_t cap)
{
    if (n >= cap - 1)
        n = cap - 2;
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, n);
    (void)w;
}

/* `fields` is a JSON fragment ("\"k\":v,...") also shown as is in text. */
void tiled_log_event(enum tiled_log_level level, const char *event, const char *fmt, ...)
{
    if (level > log_level)
        return;
    char line[2048], ts[40], fields[1600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fields, sizeof(fields), fmt, ap);
    va_end(ap);
    timestamp(ts, sizeof(ts));
    int n;
    if (log_format == TILED_LOG_JSON)
        n = snprintf(line, sizeof(line), "{\"time\":\"%s\",\"level\":\"%s\",\"event\":\"%s\"%s%s}", ts,
                     level_names[level], event, fields[0] ? "," : "", fields);
    else
        n = snprintf(line, sizeof(line), "%s %s %s %s", ts, level_names[level], event, fields);
    emit(line, n < 0 ? 0 : (size_t)n, sizeof(line));
}

void tiled_log_error(const char *event, const char *message)
{
    char esc[600];
    size_t j = 0;
    for (const unsigned char *p = (const unsigned char *)message; *p && j + 7 < sizeof(esc); p++) {
        if (*p == '"' || *p == '\\')
            esc[j++] = '\\';
        esc[j++] = *p < 0x20 ? ' ' : (char)*p;
    }
    esc[j] = '\0';
    tiled_log_event(TILED_LOG_ERROR, event, "\"error\":\"%s\"", esc);
}

bool tiled_log_enabled(enum tiled_log_level level)
{
    return level <= log_level;
}

void tiled_log_access(const struct tiled_req *req, int status)
{
    if (!tiled_log_enabled(TILED_LOG_INFO))
        return;
    char path[300];
    size_t j = 0;
    for (size_t i = 0; req->path[i] && j + 2 < sizeof(path); i++) {
        unsigned char ch = (unsigned char)req->path[i];
        path[j++] = ch < 0x20 || ch == '"' || ch == '\\' || ch >= 0x7f ? '?' : (char)ch;
    }
    path[j] = '\0';
    const struct tile_timings *t = &req->tm;
    tiled_log_event(TILED_LOG_INFO, "access",
                    "\"request_id\":\"%s\",\"method\":\"%s\",\"path\":\"%s\",\"status\":%d,\"bytes_in\":%llu,"
                    "\"bytes_out\":%llu,\"queue_us\":%llu,\"decode_us\":%llu,\"tile_us\":%llu,\"encode_us\":%llu,"
                    "\"total_us\":%llu,\"remote\":\"%s\"",
                    req->request_id, req->method, path, status, (unsigned long long)req->body_len,
                    (unsigned long long)req->bytes_out, (unsigned long long)t->queue_us,
                    (unsigned long long)t->decode_us, (unsigned long long)t->tile_us,
                    (unsigned long long)t->encode_us, (unsigned long long)(tiled_now_us() - req->t_start),
                    req->remote);
}
