/* log.c - one line per event on stderr, JSON or text.
 *
 * DESIGN. Every line is a JSON object (text lines show the same fields
 * after the time, level and event), so a field can never break the line:
 * request text goes through tiled_json_text() or tiled_json_quote(), which
 * turn bytes that are not UTF-8 into U+FFFD. Events are built with
 * jansson; the access line, written for every request, field by field
 * (format_access) from a record of its facts (struct access_rec). For the access line and errors the level check comes
 * first, so a disabled level costs one comparison. tiled_log_event is the
 * exception: it packs its fields before the check, since its "o" arguments
 * are references only the pack releases.
 *
 * Output. Lines go to stderr whole (one write(2) never splits a line, so
 * lines from different threads never interleave), in the order they were
 * made. Once tiled_log_start() has run with a flush interval, access lines
 * are gathered in one buffer, as records, and formatted and written
 * together, under the buffer's lock (a loop that ends a request meanwhile
 * waits for the formatting as it waited for the write): by an event loop
 * about to wait for more events once LOG_EAGER bytes of records have
 * gathered (tiled_log_flush, called by each loop just before epoll_wait),
 * at once when the buffer is full, before any other line (an event or
 * error is never held back, and never overtakes an access line made before
 * it), and otherwise by a flusher thread at most the interval after the
 * first of them. A line too long to gather (its text could outgrow the
 * text buffer: a path of kilobytes) is written at once, after the lines
 * gathered before it. A write per request was a tenth of a small request's system time;
 * a write per loop turn, of the lines of the requests one wait returned,
 * was still 4% of a small request's CPU time when the log is a file (0.42
 * of 9.7 µs); a busy loop now writes about a hundred lines at a time. A
 * process killed outright loses the lines of up to the interval (nginx's
 * `access_log ... buffer= flush=` makes the same trade).
 *
 * The flusher's deadline is the oldest gathered line's time plus the
 * interval (out.first_us). Under load the loops write every millisecond or
 * so, so at its deadline the flusher mostly finds only younger lines: it
 * then sleeps again until their deadline, still armed, and no loop has to
 * wake it. Woken by the first line after each loop's write and writing
 * what it found at a deadline counted from its wake-up, it had been
 * switched in ~325 times a second on a loop's core, and each switch
 * preempted the loop (docs/performance.md, "The access log's flusher").
 *
 * The file's page cache. When stderr is a regular file the flusher thread
 * starts writing each finished MiB of it to disk and drops the MiB
 * CACHE_KEEP behind from the page cache once it is on disk, so the log
 * holds about CACHE_KEEP of memory however long it grows. Left to the
 * kernel, a log written at 40 MB/s keeps gigabytes of it cached (charged
 * to the container's memory limit, where there is one) and is written out
 * in bursts at the dirty expiry; and on a virtual machine that hands free
 * memory back to its host, every page of new cache is memory the host must
 * supply again: appending cost four to seven times as much a KiB once the
 * cache had grown past one or two gigabytes, and stays flat with the drop
 * (bench/log_append.c; docs/performance.md, "The access log's page
 * cache"). The loops never do this work: they only note that a MiB was
 * finished. */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "exchange.h"
#include "numfmt.h"
#include "otlp.h"
#include "text.h"
#include "trace.h"

static enum tiled_log_level log_level = TILED_LOG_INFO;
static enum tiled_log_format log_format = TILED_LOG_JSON;

static const char *const level_names[] = {
    [TILED_LOG_ERROR] = "error", [TILED_LOG_WARN] = "warn", [TILED_LOG_INFO] = "info", [TILED_LOG_DEBUG] = "debug"};
_Static_assert(sizeof(level_names) / sizeof(level_names[0]) == TILED_LOG_DEBUG + 1, "a name per log level");

void tiled_log_init(const struct tiled_config *cfg)
{
    log_level = (enum tiled_log_level)cfg->log_level;
    log_format = (enum tiled_log_format)cfg->log_format;
}

bool tiled_log_enabled(enum tiled_log_level level)
{
    return level <= log_level;
}

/* "YYYY-MM-DDTHH:MM:SS.mmmZ" (24 bytes and a NUL) into buf, for the
 * wall-clock time `ts`. The part to the second is formatted once a second
 * per thread: strftime was a tenth of the access line's cost. */
static void format_time(const struct timespec *tsp, char buf[25])
{
    static _Thread_local time_t cached_sec = -1;
    static _Thread_local char cached[20];
    struct timespec ts = *tsp;
    if (ts.tv_sec != cached_sec) {
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        if (strftime(cached, sizeof(cached), "%Y-%m-%dT%H:%M:%S", &tm) != 19)
            memset(cached, '0', 19);
        cached_sec = ts.tv_sec;
    }
    unsigned ms = (unsigned)(ts.tv_nsec / 1000000);
    memcpy(buf, cached, 19);
    buf[19] = '.';
    buf[20] = (char)('0' + ms / 100);
    buf[21] = (char)('0' + ms / 10 % 10);
    buf[22] = (char)('0' + ms % 10);
    buf[23] = 'Z';
    buf[24] = '\0';
}

static void timestamp(char buf[25])
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    format_time(&ts, buf);
}

/* The wall-clock time of a moment read on the monotonic clock (µs), for
 * the access line, whose request already read the clock at its end: the
 * wall clock's offset is read again per thread once the moments are a
 * second or more from the last reading, either way (the lines a write
 * formats ended before it, up to the flush interval), so a step of the
 * system clock shows in the lines within a second. One clock read less
 * per request. */
static void timestamp_at(uint64_t mono_us, char buf[25])
{
    static _Thread_local uint64_t offset_at_us, offset_ns; /* wall - monotonic, as read at offset_at_us */
    static _Thread_local bool have_offset;
    uint64_t apart = mono_us > offset_at_us ? mono_us - offset_at_us : offset_at_us - mono_us;
    if (!have_offset || apart >= 1000000u) {
        struct timespec w, m;
        clock_gettime(CLOCK_REALTIME, &w);
        clock_gettime(CLOCK_MONOTONIC, &m);
        offset_ns = ((uint64_t)w.tv_sec - (uint64_t)m.tv_sec) * 1000000000u + (uint64_t)w.tv_nsec - (uint64_t)m.tv_nsec;
        offset_at_us = (uint64_t)m.tv_sec * 1000000u + (uint64_t)m.tv_nsec / 1000u;
        have_offset = true;
    }
    uint64_t ns = mono_us * 1000u + offset_ns;
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u)};
    format_time(&ts, buf);
}

/* ---- the access line ------------------------------------------------------ */

/* What a request's access line says, recorded when it ends; the line
 * itself is formatted where it is written (format_access). A record is
 * this struct followed by its four strings (the request id, the method,
 * the path and the client's address, in that order, no NULs), padded to a
 * multiple of 8 bytes: recording costs a few copies, and the formatting
 * of some hundred lines runs together when a loop writes them, its code and
 * branches warm, instead of once in every request's path, where it cost a
 * request about 64 instruction-cache misses, 30 data-cache misses and 20
 * mispredicted branches more than its own instructions (callgrind's
 * simulation, docs/performance.md "A ninth round"). */
/* The line's figures, in its order: their keys here, their values in
 * struct access_rec's `figures`. */
enum { FIG_BYTES_IN, FIG_BYTES_OUT, FIG_QUEUE, FIG_DECODE, FIG_TILE, FIG_ENCODE, FIG_TOTAL, FIG_COUNT };
static const struct {
    const char *key;
    size_t len;
} figure_keys[FIG_COUNT] = {
#define KEY(s) {s, sizeof(s) - 1}
    [FIG_BYTES_IN] = KEY(",\"bytes_in\":"), [FIG_BYTES_OUT] = KEY(",\"bytes_out\":"),
    [FIG_QUEUE] = KEY(",\"queue_us\":"),    [FIG_DECODE] = KEY(",\"decode_us\":"),
    [FIG_TILE] = KEY(",\"tile_us\":"),      [FIG_ENCODE] = KEY(",\"encode_us\":"),
    [FIG_TOTAL] = KEY(",\"total_us\":"),
#undef KEY
};

struct access_rec {
    uint64_t end_us; /* monotonic µs (clock.h) at the request's end */
    uint64_t figures[FIG_COUNT];
    int status;
    enum tiled_transport transport;
    uint32_t size; /* of the whole record */
    uint32_t id_len, method_len, path_len, remote_len;
    uint8_t trace_id[16];
};

static size_t record_size(size_t strings)
{
    return (sizeof(struct access_rec) + strings + 7) & ~(size_t)7;
}

/* Records x into rec (record_size() of its four strings' lengths). */
static void record_access(struct access_rec *rec, const struct tiled_exchange *x, const size_t len[4])
{
    const struct tile_timings *t = x->tm;
    *rec = (struct access_rec){.end_us = x->t_start + x->duration_us,
                               .figures = {[FIG_BYTES_IN] = x->bytes_in, [FIG_BYTES_OUT] = x->bytes_out,
                                           [FIG_QUEUE] = t->queue_us, [FIG_DECODE] = t->decode_us,
                                           [FIG_TILE] = t->tile_us, [FIG_ENCODE] = t->encode_us,
                                           [FIG_TOTAL] = x->duration_us},
                               .status = x->status, .transport = x->transport,
                               .size = (uint32_t)record_size(len[0] + len[1] + len[2] + len[3]),
                               .id_len = (uint32_t)len[0], .method_len = (uint32_t)len[1],
                               .path_len = (uint32_t)len[2], .remote_len = (uint32_t)len[3]};
    memcpy(rec->trace_id, x->trace->trace_id, sizeof(rec->trace_id));
    char *p = (char *)(rec + 1);
    const char *str[4] = {x->request_id, x->method, x->path, x->remote};
    for (int i = 0; i < 4; i++) {
        memcpy(p, str[i], len[i]);
        p += len[i];
    }
}

/* The most text format_access writes for rec. */
static size_t access_line_max(const struct access_rec *rec)
{
    return 768 + TILED_JSON_QUOTED_MAX((size_t)rec->id_len + rec->method_len + rec->path_len + rec->remote_len);
}

/* Appenders for the access line: each returns the end of what it wrote. */
static char *put(char *o, const char *s, size_t n)
{
    memcpy(o, s, n);
    return o + n;
}

#define PUT_LIT(o, lit) put((o), (lit), sizeof(lit) - 1)

static char *put_u64(char *o, uint64_t v)
{
    return o + tile_format_u64(o, v);
}

/* The access line of rec, ending in a newline, into `line`
 * (access_line_max() bytes); returns its length. Written field by field, not built as a
 * jansson document: it is the one line every request writes, and a
 * document of 17 fields, packed, merged and dumped, cost about as much as
 * the rest of a small request's logging path (callgrind); nor with
 * sprintf, whose format parsing was still half of the line's cost. The
 * fields and their escaping are what the document gave (tiled_json_quote). */
static size_t format_access(const struct access_rec *rec, char *line)
{
    const char *id = (const char *)(rec + 1), *method = id + rec->id_len, *path = method + rec->method_len,
               *remote = path + rec->path_len;
    char ts[25];
    timestamp_at(rec->end_us, ts);
    char *o = line;
    if (log_format == TILED_LOG_TEXT) {
        o = put(o, ts, 24);
        o = PUT_LIT(o, " info access {");
    } else {
        o = PUT_LIT(o, "{\"time\":\"");
        o = put(o, ts, 24);
        o = PUT_LIT(o, "\",\"level\":\"info\",\"event\":\"access\",");
    }
    o = PUT_LIT(o, "\"request_id\":");
    o += tiled_json_quote_n(o, id, rec->id_len);
    o = PUT_LIT(o, ",\"trace_id\":\"");
    tile_hex(o, rec->trace_id, 16);
    o += 32;
    o = PUT_LIT(o, "\",\"transport\":\"");
    const char *transport = tiled_transport_name(rec->transport);
    o = put(o, transport, strlen(transport));
    o = PUT_LIT(o, "\",\"method\":");
    o += tiled_json_quote_n(o, method, rec->method_len);
    o = PUT_LIT(o, ",\"path\":");
    o += tiled_json_quote_n(o, path, rec->path_len);
    o = PUT_LIT(o, ",\"status\":");
    if (rec->status < 0) {
        *o++ = '-';
        o = put_u64(o, (uint64_t)-(int64_t)rec->status);
    } else {
        o = put_u64(o, (uint64_t)rec->status);
    }
    for (int f = 0; f < FIG_COUNT; f++) {
        o = put(o, figure_keys[f].key, figure_keys[f].len);
        o = put_u64(o, rec->figures[f]);
    }
    o = PUT_LIT(o, ",\"remote\":");
    o += tiled_json_quote_n(o, remote, rec->remote_len);
    *o++ = '}';
    *o++ = '\n';
    return (size_t)(o - line);
}

/* ---- output ---------------------------------------------------------------- */

/* The access lines' records gathered (struct access_rec), and the text
 * they are formatted into when written. */
#define LOG_RECORDS (48 * 1024)
#define LOG_BUFFER (64 * 1024)
/* What a loop about to wait writes at once rather than leave to the
 * flusher: the records of about a hundred lines, some 40 KiB of text.
 * Appending to a file cost about 9 µs a write and 1.25 µs a KiB on the
 * host measured (bench/log_append.c at 11, 22 and 44 KB a write,
 * docs/performance.md "A ninth round"): the fewer writes, the less of the
 * first. */
#define LOG_EAGER (16 * 1024)
/* The log file's page cache: handled a MiB at a time, the newest
 * CACHE_KEEP of it left cached (for readers that follow the file). */
#define CACHE_STEP ((off_t)1 << 20)
#define CACHE_KEEP (8 * CACHE_STEP)
/* At most this much is handled at once (more was written by others). */
#define CACHE_BATCH (64 * CACHE_STEP)

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake; /* the flusher's: a line it must write, or the stop */
    bool running;        /* access lines are gathered (under lock) */
    bool stop;
    bool flusher_armed;  /* the flusher waits out a deadline (no need to wake it) */
    uint64_t first_us;   /* len > 0: when the oldest gathered line came (tiled_now_us) */
    atomic_bool pending; /* len > 0: read without the lock by tiled_log_flush */
    unsigned flush_ms;
    bool regular;        /* stderr is a regular file: its page cache is trimmed */
    off_t cache_done;    /* the file's MiBs before this are handled (flusher) */
    off_t cache_due;     /* ... and those before this are finished (written) */
    pthread_t flusher;
    size_t len;              /* bytes of recs in use */
    _Alignas(8) char recs[LOG_RECORDS];
    char buf[LOG_BUFFER];    /* the text of recs, as it is written */
} out = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};


static void write_all(const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* stderr gone or full for good: a log line is not worth a stall */
        p += w;
        n -= (size_t)w;
    }
}

/* After a write, under out.lock: when another MiB of the log file is
 * finished, the flusher is told (one signal a MiB). */
static void note_written(void)
{
    if (!out.regular)
        return;
    off_t end = lseek(STDERR_FILENO, 0, SEEK_CUR);
    if (end < 0)
        return;
    off_t due = end / CACHE_STEP * CACHE_STEP;
    if (due < out.cache_done) /* truncated (log rotation): from here on */
        out.cache_done = due;
    if (due > out.cache_due) {
        out.cache_due = due;
        pthread_cond_signal(&out.wake);
    }
}

/* The flusher's, without out.lock: for each finished MiB in [from, to),
 * writeback starts now (a MiB at a time, not gigabytes at the dirty
 * expiry), and the MiB CACHE_KEEP behind it, waited for until it is on
 * disk (long since, at any steady rate), leaves the page cache. */
static void trim_cache(off_t from, off_t to)
{
    if (to - from > CACHE_BATCH)
        from = to - CACHE_BATCH;
    for (off_t m = from; m < to; m += CACHE_STEP) {
        sync_file_range(STDERR_FILENO, m, CACHE_STEP, SYNC_FILE_RANGE_WRITE);
        if (m < CACHE_KEEP)
            continue;
        off_t old = m - CACHE_KEEP;
        sync_file_range(STDERR_FILENO, old, CACHE_STEP,
                        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
        posix_fadvise(STDERR_FILENO, old, CACHE_STEP, POSIX_FADV_DONTNEED);
    }
}

/* Writes the gathered lines, formatted from their records a bufferful at a
 * time; under out.lock. */
static void flush_locked(void)
{
    size_t o = 0;
    for (size_t at = 0; at < out.len;) {
        const struct access_rec *rec = (const struct access_rec *)(const void *)(out.recs + at);
        if (o + access_line_max(rec) > sizeof(out.buf)) { /* gathered: at most a bufferful */
            write_all(out.buf, o);
            o = 0;
        }
        o += format_access(rec, out.buf + o);
        at += rec->size;
    }
    if (o) {
        write_all(out.buf, o);
        note_written();
    }
    out.len = 0;
    atomic_store_explicit(&out.pending, false, memory_order_relaxed);
}

void tiled_log_flush(void)
{
    if (!atomic_load_explicit(&out.pending, memory_order_relaxed))
        return; /* the usual case under no load, and a load-and-branch */
    pthread_mutex_lock(&out.lock);
    if (out.len >= LOG_EAGER)
        flush_locked();
    pthread_mutex_unlock(&out.lock);
}

void tiled_log_flush_now(void)
{
    if (!atomic_load_explicit(&out.pending, memory_order_relaxed))
        return;
    pthread_mutex_lock(&out.lock);
    flush_locked();
    pthread_mutex_unlock(&out.lock);
}

/* One whole line (ending in '\n'), written after whatever was gathered
 * before it. */
static void put_line(const char *line, size_t n)
{
    pthread_mutex_lock(&out.lock);
    flush_locked();
    write_all(line, n);
    note_written();
    pthread_mutex_unlock(&out.lock);
}

static void *flusher_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&out.lock);
    while (!out.stop) {
        if (out.cache_due > out.cache_done) {
            off_t from = out.cache_done, to = out.cache_due;
            out.cache_done = to;
            pthread_mutex_unlock(&out.lock);
            trim_cache(from, to);
            pthread_mutex_lock(&out.lock);
            continue;
        }
        if (out.len == 0) {
            out.flusher_armed = false;
            pthread_cond_wait(&out.wake, &out.lock);
            continue;
        }
        /* Lines are gathered: write them once the oldest is the interval
         * old, if a loop has not (then the next oldest sets the deadline).
         * A wake for the cache or the stop keeps it. */
        uint64_t due = out.first_us + (uint64_t)out.flush_ms * 1000u;
        if (tiled_now_us() >= due) {
            flush_locked();
            continue;
        }
        out.flusher_armed = true;
        struct timespec until = {.tv_sec = (time_t)(due / 1000000u), .tv_nsec = (long)(due % 1000000u) * 1000L};
        pthread_cond_timedwait(&out.wake, &out.lock, &until);
    }
    flush_locked();
    pthread_mutex_unlock(&out.lock);
    return NULL;
}

int tiled_log_start(unsigned flush_ms)
{
    if (flush_ms == 0)
        return 0;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_destroy(&out.wake);
    pthread_cond_init(&out.wake, &attr);
    pthread_condattr_destroy(&attr);
    out.flush_ms = flush_ms;
    out.stop = false;
    struct stat st;
    out.regular = fstat(STDERR_FILENO, &st) == 0 && S_ISREG(st.st_mode);
    off_t at = out.regular ? lseek(STDERR_FILENO, 0, SEEK_CUR) : 0;
    out.cache_done = out.cache_due = at > 0 ? at / CACHE_STEP * CACHE_STEP : 0;
    if (pthread_create(&out.flusher, NULL, flusher_main, NULL) != 0)
        return -1;
    pthread_mutex_lock(&out.lock);
    out.running = true;
    pthread_mutex_unlock(&out.lock);
    return 0;
}

void tiled_log_stop(void)
{
    pthread_mutex_lock(&out.lock);
    bool running = out.running;
    out.running = false;
    out.stop = true;
    pthread_cond_signal(&out.wake);
    pthread_mutex_unlock(&out.lock);
    if (running)
        pthread_join(out.flusher, NULL);
}

static void emit(const char *text)
{
    size_t n = strlen(text);
    char *line = malloc(n + 1);
    if (!line)
        return;
    memcpy(line, text, n);
    line[n] = '\n';
    put_line(line, n + 1);
    free(line);
}

/* Writes the line for `fields` (released). */
static void log_fields(enum tiled_log_level level, const char *event, json_t *fields)
{
    char ts[25];
    timestamp(ts);
    if (log_format == TILED_LOG_TEXT) {
        char *rest = fields && json_object_size(fields) ? json_dumps(fields, JSON_COMPACT) : NULL;
        char head[128];
        snprintf(head, sizeof(head), "%s %s %s ", ts, level_names[level], event);
        size_t hn = strlen(head), rn = rest ? strlen(rest) : 0;
        char *line = malloc(hn + rn + 1);
        if (line) {
            memcpy(line, head, hn);
            memcpy(line + hn, rest ? rest : "", rn + 1);
            emit(line);
            free(line);
        }
        free(rest);
        json_decref(fields);
        return;
    }
    json_t *doc = json_pack("{s:s, s:s, s:s}", "time", ts, "level", level_names[level], "event", event);
    if (doc && fields)
        json_object_update(doc, fields);
    json_decref(fields);
    char *text = tiled_json_dump(doc);
    if (text)
        emit(text);
    free(text);
}

void tiled_log_event(enum tiled_log_level level, const char *event, const char *fmt, ...)
{
    json_t *fields = NULL;
    if (fmt) {
        /* Packed even when the level is off: "o" arguments are references the
         * pack takes over, and only it releases them. */
        va_list ap;
        va_start(ap, fmt);
        fields = json_vpack_ex(NULL, 0, fmt, ap);
        va_end(ap);
    }
    if (level > log_level) {
        json_decref(fields);
        return;
    }
    log_fields(level, event, fields);
}

void tiled_log_error(const char *event, const char *message)
{
    if (tiled_log_enabled(TILED_LOG_ERROR))
        log_fields(TILED_LOG_ERROR, event, json_pack("{s:o}", "error", tiled_json_text(message)));
}

/* The access line: recorded into the gathered records when a flusher
 * runs (the loops' and the flusher's writes format it), else formatted
 * and written now. */
void tiled_log_access(const struct tiled_exchange *x, void *ctx)
{
    (void)ctx;
    if (!tiled_log_enabled(TILED_LOG_INFO))
        return;
    const size_t len[4] = {strlen(x->request_id), strlen(x->method), strlen(x->path), strlen(x->remote)};
    size_t size = record_size(len[0] + len[1] + len[2] + len[3]);
    size_t text_max = 768 + TILED_JSON_QUOTED_MAX(len[0] + len[1] + len[2] + len[3]);
    pthread_mutex_lock(&out.lock);
    if (out.running && size <= LOG_RECORDS && text_max <= LOG_BUFFER) {
        if (out.len + size > LOG_RECORDS)
            flush_locked();
        if (out.len == 0) { /* the first line since the last write */
            out.first_us = tiled_now_us(); /* once a write (a loop's: ~100 lines) */
            /* An armed flusher looks again at its deadline, which is
             * closer than this line's: no need to wake it. */
            if (!out.flusher_armed)
                pthread_cond_signal(&out.wake);
        }
        record_access((struct access_rec *)(void *)(out.recs + out.len), x, len);
        out.len += size;
        atomic_store_explicit(&out.pending, true, memory_order_relaxed);
        pthread_mutex_unlock(&out.lock);
        return;
    }
    pthread_mutex_unlock(&out.lock);
    /* Not gathered: no flusher runs, or a line too long to gather. */
    _Alignas(8) char stack[4096];
    char *mem = size + text_max <= sizeof(stack) ? stack : malloc(size + text_max);
    if (!mem)
        return;
    struct access_rec *rec = (struct access_rec *)(void *)mem;
    record_access(rec, x, len);
    put_line(mem + size, format_access(rec, mem + size));
    if (mem != stack)
        free(mem);
}
