/* test_log.c - the log's output order (log.c): access lines gathered once
 * tiled_log_start() has run are written before any other line, by a
 * loop's tiled_log_flush() once 16 KiB of their records have gathered (or its
 * tiled_log_flush_now() as it ends), when the buffer fills, and at the stop;
 * none is lost and none overtakes another. stderr is a file here, read
 * back after each step. No event loop runs in this test, so nothing but
 * the steps below writes a gathered line (the flusher waits 10 s). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "config.h"
#include "exchange.h"
#include "log.h"
#include "trace.h"

static int saved_stderr = -1;
static FILE *sink;
static const char *self; /* argv[0]: the page-cache test's file goes beside it */

/* The request ids of the lines written so far ("event:" plus the event for
 * lines that are not access lines), in order, as one string. */
static char *written(void)
{
    static char out[1 << 16];
    size_t o = 0;
    out[0] = '\0';
    fflush(sink);
    rewind(sink);
    static char line[32768];
    while (fgets(line, sizeof(line), sink)) {
        json_error_t err;
        json_t *j = json_loads(line, 0, &err);
        assert_non_null(j);
        const char *ev = json_string_value(json_object_get(j, "event"));
        const char *id = json_string_value(json_object_get(j, "request_id"));
        assert_non_null(ev);
        o += (size_t)snprintf(out + o, sizeof(out) - o, "%s%s%s", o ? " " : "",
                              strcmp(ev, "access") == 0 ? "" : "event:", strcmp(ev, "access") == 0 ? id : ev);
        json_decref(j);
        assert_true(o < sizeof(out));
    }
    return out;
}

/* Checks what is written, with stderr back on the terminal for the
 * assertion's message. */
static void expect_written(const char *want)
{
    char *got = written();
    dup2(saved_stderr, STDERR_FILENO);
    assert_string_equal(got, want);
    dup2(fileno(sink), STDERR_FILENO);
}

static void access_line(const char *id)
{
    static const struct tiled_trace trace;
    static const struct tile_timings tm;
    const struct tiled_exchange x = {.request_id = id, .method = "GET", .path = "/v2/health/live",
                                     .remote = "127.0.0.1", .trace = &trace, .status = 200, .tm = &tm};
    tiled_log_access(&x, NULL);
}

static int setup(void **state)
{
    (void)state;
    struct tiled_config cfg = {.log_level = TILED_LOG_INFO, .log_format = TILED_LOG_JSON};
    tiled_log_init(&cfg);
    sink = tmpfile();
    if (!sink)
        return -1;
    fflush(stderr);
    saved_stderr = dup(STDERR_FILENO);
    return dup2(fileno(sink), STDERR_FILENO) < 0 ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    fclose(sink);
    return 0;
}

static void gathered_lines_keep_their_order(void **state)
{
    (void)state;
    assert_int_equal(tiled_log_start(10000), 0);
    access_line("a");
    access_line("b");
    access_line("c");
    /* An error is written at once, after the lines gathered before it. */
    tiled_log_error("boom", "something failed");
    expect_written("a b c event:boom");
    access_line("d");
    tiled_log_flush(); /* a loop's flush before it waits: one line is left to the flusher */
    expect_written("a b c event:boom");
    tiled_log_flush_now(); /* a loop that ends */
    expect_written("a b c event:boom d");
    /* 150 lines (records of over 16 KiB, under the buffer's 48): kept
     * until a loop's flush, which writes them. */
    char id[64], *eager = malloc(4096);
    assert_non_null(eager);
    size_t e = (size_t)snprintf(eager, 4096, "a b c event:boom d");
    for (int i = 0; i < 150; i++) {
        snprintf(id, sizeof(id), "eager-%03d", i);
        access_line(id);
        e += (size_t)snprintf(eager + e, 4096 - e, " %s", id);
    }
    expect_written("a b c event:boom d");
    tiled_log_flush();
    expect_written(eager);
    /* A line too long to gather (its text could be over the 64 KiB the
     * records are formatted into) is written at once, after the lines
     * gathered before it. */
    access_line("before-long");
    char *long_id = malloc(12 * 1024 + 1);
    assert_non_null(long_id);
    memset(long_id, 'L', 12 * 1024);
    long_id[12 * 1024] = '\0';
    access_line(long_id);
    e += (size_t)snprintf(eager + e, 4096 - e, " before-long");
    char *with_long = malloc(e + 12 * 1024 + 2);
    assert_non_null(with_long);
    snprintf(with_long, e + 12 * 1024 + 2, "%s %s", eager, long_id);
    expect_written(with_long);
    free(long_id);
    /* A full buffer is written as the next line comes; the stop writes the rest. */
    for (int i = 0; i < 600; i++) {
        snprintf(id, sizeof(id), "fill-%03d-%s", i, "padding-padding-padding-padding-padding");
        access_line(id);
    }
    access_line("last");
    tiled_log_stop();
    char *want = malloc(1 << 16);
    assert_non_null(want);
    size_t o = (size_t)snprintf(want, 1 << 16, "%s", with_long);
    for (int i = 0; i < 600; i++)
        o += (size_t)snprintf(want + o, (1 << 16) - o, " fill-%03d-%s", i, "padding-padding-padding-padding-padding");
    snprintf(want + o, (1 << 16) - o, " last");
    expect_written(want);
    free(want);
    free(with_long);
    free(eager);
}

/* Before tiled_log_start() (or with no flush interval) nothing is
 * gathered: each access line is written as its request ends, after none. */
static void ungathered_lines_are_written_at_once(void **state)
{
    (void)state;
    access_line("first");
    expect_written("first");
    tiled_log_error("boom", "something failed");
    access_line("second");
    expect_written("first event:boom second");
}

/* How many of the pages of fd's [off, off + len) are in the page cache. */
static size_t resident(int fd, off_t off, size_t len)
{
    void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, off);
    assert_true(m != MAP_FAILED);
    size_t page = (size_t)sysconf(_SC_PAGESIZE), n = (len + page - 1) / page, in = 0;
    unsigned char *vec = malloc(n);
    assert_non_null(vec);
    assert_int_equal(mincore(m, len, vec), 0);
    for (size_t i = 0; i < n; i++)
        in += vec[i] & 1;
    free(vec);
    munmap(m, len);
    return in;
}

/* With stderr a regular file, what was written more than 8 MiB ago leaves
 * the page cache once it is on disk (the flusher's work, log.c); the newest
 * MiBs stay. The file is beside the test binary, on the checkout's file
 * system (a tmpfs, where /tmp may be, keeps every page by design). */
static void old_log_pages_leave_the_cache(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof(path), "%s.cache-XXXXXX", self);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    dup2(fd, STDERR_FILENO);
    assert_int_equal(tiled_log_start(10000), 0);
    size_t msg_len = 64 * 1024;
    char *msg = malloc(msg_len + 1);
    assert_non_null(msg);
    memset(msg, 'x', msg_len);
    msg[msg_len] = '\0';
    for (int i = 0; i < 16 * 16; i++) /* 16 MiB of lines, each written at once */
        tiled_log_error("fill", msg);
    free(msg);
    const off_t mib = 1 << 20;
    off_t size = lseek(fd, 0, SEEK_END);
    /* The flusher handles each MiB after it is finished: wait for it (a
     * minute at most, for a loaded machine's disk). */
    bool trimmed = false;
    for (int i = 0; i < 6000 && !(trimmed = resident(fd, 0, 7 * mib) == 0); i++)
        usleep(10 * 1000);
    size_t newest = resident(fd, (size - mib) / mib * mib, (size_t)mib); /* the last whole MiB */
    tiled_log_stop();
    dup2(fileno(sink), STDERR_FILENO);
    close(fd);
    assert_true(size >= 16 * mib);
    assert_true(trimmed);
    assert_true(newest > 0);
}

int main(int argc, char **argv)
{
    (void)argc;
    self = argv[0];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(ungathered_lines_are_written_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(gathered_lines_keep_their_order, setup, teardown),
        cmocka_unit_test_setup_teardown(old_log_pages_leave_the_cache, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
