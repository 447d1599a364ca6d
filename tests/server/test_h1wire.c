/* test_h1wire.c - the strict HTTP/1.1 request framer (http/h1wire.h) driven
 * directly: heads, Content-Length and chunked bodies, pipelined requests,
 * each refusal class with its status and message, the limits, and the rule
 * the receive hook relies on: feeding a stream byte by byte, in steps of any
 * size, or whole gives the same verdict and the same boundaries
 * (harness/h1drive.h records them through the framer's observer). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/h1drive.h"

static struct h1drive whole, piecewise;

/* Feeds s whole, then byte by byte and in steps of several sizes: every way
 * must give the record the whole feed gave (left in `whole`). */
static void feed_every_way(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    h1drive_steps(&whole, u, n, 0);
    static const size_t steps[] = {1, 2, 3, 5, 7, 13, 64, 1000};
    for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
        h1drive_steps(&piecewise, u, n, steps[k]);
        if (!h1drive_same(&whole, &piecewise))
            fail_msg("steps of %zu: status %d '%s' pos %llu, %zu events; whole: status %d '%s' pos %llu, %zu events",
                     steps[k], piecewise.p.status, piecewise.p.message, (unsigned long long)piecewise.p.pos,
                     piecewise.n_ev, whole.p.status, whole.p.message, (unsigned long long)whole.p.pos, whole.n_ev);
    }
    assert_false(whole.overflow);
}

#define FEED(lit) feed_every_way(lit, sizeof(lit) - 1)

static void assert_event(size_t k, int kind, uint64_t from, uint64_t to)
{
    if (k >= whole.n_ev)
        fail_msg("event %zu of %zu expected", k, whole.n_ev);
    if (whole.ev[k].kind != kind || whole.ev[k].from != from || whole.ev[k].to != to)
        fail_msg("event %zu: %c %llu-%llu, expected %c %llu-%llu", k, whole.ev[k].kind,
                 (unsigned long long)whole.ev[k].from, (unsigned long long)whole.ev[k].to, kind,
                 (unsigned long long)from, (unsigned long long)to);
}

/* ---- accepted streams: exact boundaries */

static void get_head(void **state)
{
    (void)state;
    static const char s[] = "GET /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n";
    FEED(s);
    assert_int_equal(whole.p.status, 0);
    assert_int_equal(whole.p.accepted, 1);
    assert_int_equal(whole.p.pos, sizeof(s) - 1);
    assert_int_equal(whole.p.unit_start, sizeof(s) - 1); /* all judged */
    assert_int_equal(whole.p.unit, TILED_H1_UNIT_HEAD);
    assert_int_equal(whole.n_ev, 2);
    assert_event(0, 'H', 0, sizeof(s) - 1);
    assert_event(1, 'E', 0, sizeof(s) - 1);
    /* The request line's parts, for the log, while its head is read (after
     * empty lines, offsets in the unit). */
    static const char part[] = "\r\nGET /v2/health/live HTTP/1.1\r\nHost: t\r\n";
    FEED(part);
    assert_int_equal(whole.p.status, 0);
    assert_int_equal(whole.p.unit_start, 0);
    assert_int_equal(whole.p.line_start, 2);
    assert_int_equal(whole.p.method_len, 3);
    assert_memory_equal(part + whole.p.unit_start + whole.p.target_off, "/v2/health/live", 15);
    assert_int_equal(whole.p.target_len, 15);
    assert_int_equal(whole.n_ev, 0);
}

static void head_forms(void **state)
{
    (void)state;
    static const char *const ok[] = {
        "GET /a HTTP/1.0\r\n\r\n",                                    /* HTTP/1.0: Host optional */
        "GET http://t/a HTTP/1.1\r\nHost: t\r\n\r\n",                 /* absolute-form */
        "GET HTTPS://t:8443/a HTTP/1.1\r\nHost: t:8443\r\n\r\n",      /* scheme in any case */
        "OPTIONS * HTTP/1.1\r\nHost: t\r\n\r\n",                      /* asterisk-form */
        "PATCH /a HTTP/1.1\r\nhOsT: [::1]:80\r\n\r\n",                /* IPv6 literal, name case */
        "GET /a HTTP/1.1\r\nHost:\r\n\r\n",                           /* empty Host */
        "GET /a HTTP/1.1\r\nHost:  \t t \t\r\nX-A:\t v\t \r\n\r\n",   /* OWS around values */
        "GET /a?q=%20&b=~ HTTP/1.1\r\nHost: t\r\nX: \x80\xff\r\n\r\n", /* obs-text in a value */
        "GET /a HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n",
        "GET /a HTTP/1.1\r\nHost: t\r\nContent-Length: 000\r\n\r\n",
        "GET /a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nX: 1\r\n\r\n0\r\n\r\n",
        "GET /a HTTP/1.2\r\nHost: t\r\n\r\n", /* a higher minor version: as 1.1 (RFC 9110 2.5) */
        "GET /a HTTP/1.9\r\nHost: t\r\nContent-Length: 0\r\n\r\n",
    };
    for (size_t k = 0; k < sizeof(ok) / sizeof(ok[0]); k++) {
        feed_every_way(ok[k], strlen(ok[k]));
        if (whole.p.status)
            fail_msg("'%s': refused %d %s", ok[k], whole.p.status, whole.p.message);
        assert_int_equal(whole.p.accepted, 1);
        assert_int_equal(whole.p.pos, strlen(ok[k]));
        assert_int_equal(whole.ev[whole.n_ev - 1].kind, 'E');
        assert_int_equal(whole.ev[whole.n_ev - 1].to, strlen(ok[k]));
    }
}

static void content_length_body(void **state)
{
    (void)state;
    static const char s[] = "POST /t HTTP/1.1\r\nHost: t\r\nContent-Length: 0005\r\n\r\nhelloGET / HTTP/1.1\r\n";
    const size_t head = strlen("POST /t HTTP/1.1\r\nHost: t\r\nContent-Length: 0005\r\n\r\n");
    FEED(s);
    assert_int_equal(whole.p.status, 0);
    assert_int_equal(whole.p.accepted, 1);
    assert_event(0, 'H', 0, head);
    assert_event(1, 'D', head, head + 5);
    assert_event(2, 'E', 0, head + 5);
    assert_int_equal(whole.n_ev, 3);
    /* The next request line is unfinished: left for the next feed, unjudged. */
    assert_int_equal(whole.p.pos, head + 5 + strlen("GET / HTTP/1.1\r\n"));
    assert_int_equal(whole.p.unit_start, head + 5);

    /* Part of a body: judged as it comes, nothing held. */
    static const char part[] = "POST /t HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc";
    FEED(part);
    assert_int_equal(whole.p.status, 0);
    assert_int_equal(whole.p.unit, TILED_H1_UNIT_NONE);
    assert_int_equal(whole.p.pos, sizeof(part) - 1);
    assert_int_equal(whole.p.remaining, 7);
    assert_int_equal(whole.n_ev, 2);
}

static void chunked_body(void **state)
{
    (void)state;
    static const char s[] = "POST /t HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: Chunked\r\n\r\n"
                            "5;name=\"v a\"\r\nhello\r\n00A\r\n0123456789\r\n0;x\r\nX-T: 1\r\n\r\n";
    const size_t head = strlen("POST /t HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: Chunked\r\n\r\n");
    const size_t c1 = head + strlen("5;name=\"v a\"\r\n");
    const size_t c2 = c1 + strlen("hello\r\n00A\r\n");
    FEED(s);
    assert_int_equal(whole.p.status, 0);
    assert_event(0, 'H', 0, head);
    assert_event(1, 'D', c1, c1 + 5);
    assert_event(2, 'D', c2, c2 + 10);
    assert_event(3, 'E', 0, sizeof(s) - 1);
    assert_int_equal(whole.n_ev, 4);
    assert_int_equal(whole.p.unit, TILED_H1_UNIT_HEAD);
    assert_int_equal(whole.p.unit_start, sizeof(s) - 1);

    /* Held units: a chunk-size line is judged whole before it goes on. */
    static const char held[] = "POST /t HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel";
    FEED(held);
    assert_int_equal(whole.p.unit, TILED_H1_UNIT_NONE);
    assert_int_equal(whole.p.remaining, 2);
    static const char size_line[] = "POST /t HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1";
    FEED(size_line);
    assert_int_equal(whole.p.unit, TILED_H1_UNIT_CHUNK_NEXT);
    assert_int_equal(whole.p.unit_start, sizeof(size_line) - 4); /* the CRLF after the data */
    assert_int_equal(whole.p.pos, sizeof(size_line) - 2);        /* "1" is unfinished */
}

/* Chunk extensions: the RFC's grammar without whitespace, then ignored. */
static void chunk_extensions(void **state)
{
    (void)state;
    static const char *const ok[] = {
        "5;a\r\n", "5;a=b\r\n", "5;a;b\r\n", "5;a=b;c=d\r\n", "5;a=\"\"\r\n", "5;a=\"v a;b=c\"\r\n",
        "5;a=\"x\\\"y\"\r\n", "5;a=\"\x80\t\"\r\n", "5;!#$%&'*+-.^_`|~=~\r\n",
    };
    for (size_t k = 0; k < sizeof(ok) / sizeof(ok[0]); k++) {
        char s[256];
        int n = snprintf(s, sizeof(s), "POST /t HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n%shello\r\n0\r\n\r\n", ok[k]);
        feed_every_way(s, (size_t)n);
        if (whole.p.status)
            fail_msg("'%s': refused %d %s", ok[k], whole.p.status, whole.p.message);
        assert_int_equal(whole.n_ev, 3);
        assert_int_equal(whole.ev[1].to - whole.ev[1].from, 5);
    }
}

static void pipelined(void **state)
{
    (void)state;
    static const char a[] = "GET /a HTTP/1.1\r\nHost: t\r\n\r\n";
    static const char b[] = "POST /b HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nxyz";
    static const char c[] = "\r\n\r\nPOST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nq\r\n0\r\n\r\n";
    static const char d[] = "GET /d HTTP/1.0\r\n\r\n";
    char s[512];
    snprintf(s, sizeof(s), "%s%s%s%s", a, b, c, d);
    const size_t la = strlen(a), lb = strlen(b), lc = strlen(c), ld = strlen(d);
    feed_every_way(s, strlen(s));
    assert_int_equal(whole.p.status, 0);
    assert_int_equal(whole.p.accepted, 4);
    assert_int_equal(whole.n_ev, 10);
    assert_event(0, 'H', 0, la);
    assert_event(1, 'E', 0, la);
    assert_event(2, 'H', la, la + lb - 3);
    assert_event(3, 'D', la + lb - 3, la + lb);
    assert_event(4, 'E', la, la + lb);
    /* Empty lines before a request are not part of it. */
    size_t c0 = la + lb + 4;
    assert_event(5, 'H', c0, la + lb + strlen("\r\n\r\nPOST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"));
    assert_event(6, 'D', la + lb + lc - 8, la + lb + lc - 7);
    assert_event(7, 'E', c0, la + lb + lc);
    assert_event(8, 'H', la + lb + lc, la + lb + lc + ld);
    assert_event(9, 'E', la + lb + lc, la + lb + lc + ld);
}

static void good_request_then_refused(void **state)
{
    (void)state;
    static const char s[] = "GET /a HTTP/1.1\r\nHost: t\r\n\r\nPOST /b HTTP/1.1\r\nHost: t\r\nTransfer-Encoding : chunked\r\n\r\n";
    FEED(s);
    assert_int_equal(whole.p.status, 400);
    assert_int_equal(whole.p.accepted, 1);
    assert_int_equal(whole.n_ev, 2);
    assert_int_equal(whole.p.unit_start, strlen("GET /a HTTP/1.1\r\nHost: t\r\n\r\n"));
    assert_false(whole.p.in_body);
    assert_non_null(strstr(whole.p.message, "and its colon"));
}

/* ---- refusals: every class, its status and what the message names */

struct refusal {
    const char *name, *raw;
    size_t len; /* 0: strlen(raw) */
    int status;
    const char *fragment;
    bool in_body;
};

#define P(h) "POST /t HTTP/1.1\r\nHost: t\r\n" h "\r\n"
#define C(b) P("Transfer-Encoding: chunked\r\n") b

static const struct refusal refusals[] = {
    /* both framing headers */
    {"cl_te", P("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n") "0\r\n\r\n", 0, 400, "both Content-Length", 0},
    {"te_cl", P("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n"), 0, 400, "both Content-Length", 0},
    {"cl_te_unknown", P("Content-Length: 5\r\nTransfer-Encoding: gzip\r\n"), 0, 400, "both Content-Length", 0},
    /* Transfer-Encoding */
    {"te_http10", "POST /t HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 400, "HTTP/1.0", 0},
    {"te_trailing_space", P("Transfer-Encoding: chunked \r\n"), 0, 400, "malformed Transfer-Encoding", 0},
    {"te_empty_element", P("Transfer-Encoding: , chunked\r\n"), 0, 400, "malformed Transfer-Encoding", 0},
    {"te_empty_last", P("Transfer-Encoding: chunked,\r\n"), 0, 400, "malformed Transfer-Encoding", 0},
    {"te_empty_value", P("Transfer-Encoding:\r\n"), 0, 400, "malformed Transfer-Encoding", 0},
    {"te_chunked_param", P("Transfer-Encoding: chunked;q=1\r\n"), 0, 400, "malformed Transfer-Encoding", 0},
    {"te_stray_byte", P("Transfer-Encoding: \"chunked\"\r\n"), 0, 400, "malformed Transfer-Encoding", 0},
    {"te_xchunked", P("Transfer-Encoding: xchunked\r\n"), 0, 400, "final transfer coding", 0},
    {"te_chunked_identity", P("Transfer-Encoding: chunked, identity\r\n"), 0, 400, "final transfer coding", 0},
    {"te_lines_chunked_first", P("Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n"), 0, 400,
     "final transfer coding", 0},
    {"te_chunked_twice", P("Transfer-Encoding: chunked, chunked\r\n"), 0, 400, "more than once", 0},
    {"te_gzip", P("Transfer-Encoding: gzip, chunked\r\n"), 0, 501, "unsupported transfer coding 'gzip'", 0},
    {"te_gzip_param", P("Transfer-Encoding: gzip;q=1, chunked\r\n"), 0, 501, "'gzip'", 0},
    {"te_two_lines", P("Transfer-Encoding: chunked\r\ntransfer-encoding: chunked\r\n"), 0, 400, "more than once", 0},
    /* Content-Length */
    {"cl_plus", P("Content-Length: +5\r\n"), 0, 400, "not a number of bytes", 0},
    {"cl_minus", P("Content-Length: -1\r\n"), 0, 400, "not a number of bytes", 0},
    {"cl_list", P("Content-Length: 5, 5\r\n"), 0, 400, "not a number of bytes", 0},
    {"cl_empty", P("Content-Length:\r\n"), 0, 400, "not a number of bytes", 0},
    {"cl_hex", P("Content-Length: 0x5\r\n"), 0, 400, "not a number of bytes", 0},
    {"cl_trailing_space", P("Content-Length: 5 \r\n"), 0, 400, "not a number of bytes", 0},
    {"cl_two", P("Content-Length: 5\r\nContent-Length: 5\r\n"), 0, 400, "2 Content-Length headers", 0},
    {"cl_huge", P("Content-Length: 18446744073709551616\r\n"), 0, 413, "too large", 0},
    {"cl_just_too_large", P("Content-Length: 4611686018427387910\r\n"), 0, 413, "too large", 0},
    /* head syntax */
    {"obs_fold", P("X-A: 1\r\n 2\r\n"), 0, 400, "obs-fold", 0},
    {"obs_fold_tab", P("X-A: 1\r\n\t2\r\n"), 0, 400, "obs-fold", 0},
    {"space_before_colon", P("X-A : 1\r\n"), 0, 400, "and its colon", 0},
    {"no_colon", P("X-A\r\n"), 0, 400, "malformed header line", 0},
    {"empty_name", P(": 1\r\n"), 0, 400, "malformed header line", 0},
    {"nul_in_value", P("X-A: a\0b\r\n"), sizeof(P("X-A: a\0b\r\n")) - 1, 400, "control byte 0x00", 0},
    {"nul_in_name", P("X-\0A: 1\r\n"), sizeof(P("X-\0A: 1\r\n")) - 1, 400, "control byte 0x00", 0},
    {"cr_in_value", P("X-A: a\rb\r\n"), 0, 400, "control byte 0x0d", 0},
    {"del_in_value", P("X-A: a\x7f\r\n"), 0, 400, "control byte 0x7f", 0},
    {"bare_lf_request_line", "GET / HTTP/1.1\nHost: t\r\n\r\n", 0, 400, "bare LF", 0},
    {"bare_lf_field", "GET / HTTP/1.1\r\nHost: t\n\r\n", 0, 400, "bare LF", 0},
    {"bare_lf_end", "GET / HTTP/1.1\r\nHost: t\r\n\n", 0, 400, "bare LF", 0},
    {"bare_lf_before_request", "\nGET / HTTP/1.1\r\nHost: t\r\n\r\n", 0, 400, "bare LF", 0},
    /* request line */
    {"two_spaces", "GET  / HTTP/1.1\r\nHost: t\r\n\r\n", 0, 400, "malformed request line", 0},
    {"no_version", "GET /\r\nHost: t\r\n\r\n", 0, 400, "malformed request line", 0},
    {"method_only", "GET\r\n\r\n", 0, 400, "malformed request line", 0},
    {"bad_method", "G@T / HTTP/1.1\r\nHost: t\r\n\r\n", 0, 400, "malformed request line", 0},
    {"tab_separator", "GET\t/ HTTP/1.1\r\nHost: t\r\n\r\n", 0, 400, "malformed request line", 0},
    {"nul_in_target", "GET /a\0b HTTP/1.1\r\nHost: t\r\n\r\n", sizeof("GET /a\0b HTTP/1.1\r\nHost: t\r\n\r\n") - 1,
     400, "control byte 0x00", 0},
    {"cr_in_target", "GET /a\rb HTTP/1.1\r\nHost: t\r\n\r\n", 0, 400, "control byte 0x0d", 0},
    {"obs_text_in_target", "GET /caf\xc3\xa9 HTTP/1.1\r\nHost: t\r\n\r\n", 0, 400, "byte 0xc3 (percent-encode", 0},
    {"relative_target", "GET a HTTP/1.1\r\nHost: t\r\n\r\n", 0, 400, "request target", 0},
    {"ftp_target", "GET ftp://t/a HTTP/1.1\r\nHost: t\r\n\r\n", 0, 400, "request target", 0},
    {"asterisk_not_options", "GET * HTTP/1.1\r\nHost: t\r\n\r\n", 0, 400, "request target", 0},
    {"http_2_0", "GET / HTTP/2.0\r\nHost: t\r\n\r\n", 0, 505, "HTTP version 2.0"[0] ? "HTTP version" : "", 0},
    {"http_3_0", "GET / HTTP/3.0\r\nHost: t\r\n\r\n", 0, 505, "HTTP version", 0},
    {"http_lowercase", "GET / http/1.1\r\nHost: t\r\n\r\n", 0, 400, "version", 0},
    {"version_trailing_space", "GET / HTTP/1.1 \r\nHost: t\r\n\r\n", 0, 400, "version", 0},
    /* Host */
    {"no_host", "GET / HTTP/1.1\r\n\r\n", 0, 400, "Host header is missing", 0},
    {"two_hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 0, 400, "2 Host headers", 0},
    {"two_hosts_http10", "GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n", 0, 400, "2 Host headers", 0},
    {"host_space", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 0, 400, "invalid Host", 0},
    {"host_slash", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 0, 400, "invalid Host", 0},
    {"host_at", "GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", 0, 400, "invalid Host", 0},
    {"host_port", "GET / HTTP/1.1\r\nHost: a:8x\r\n\r\n", 0, 400, "invalid Host", 0},
    {"host_ipv6_open", "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", 0, 400, "invalid Host", 0},
    {"host_ipv6_empty", "GET / HTTP/1.1\r\nHost: []\r\n\r\n", 0, 400, "invalid Host", 0},
    /* chunked bodies */
    {"chunk_overflow", C("10000000000000005\r\nhello\r\n0\r\n\r\n"), 0, 400, "chunk size", 1},
    {"chunk_sixteen_digits", C("1000000000000000\r\n"), 0, 400, "is too large", 1},
    {"chunk_not_hex", C("5g\r\nhello\r\n0\r\n\r\n"), 0, 400, "chunk size line", 1},
    {"chunk_empty_size", C("\r\nhello\r\n0\r\n\r\n"), 0, 400, "chunk size line", 1},
    {"chunk_space_before_ext", C("5 ;a=b\r\nhello\r\n0\r\n\r\n"), 0, 400, "chunk size line", 1},
    {"chunk_leading_space", C(" 5\r\nhello\r\n0\r\n\r\n"), 0, 400, "chunk size line", 1},
    {"chunk_minus", C("-5\r\nhello\r\n0\r\n\r\n"), 0, 400, "chunk size line", 1},
    {"chunk_0x", C("0x5\r\nhello\r\n0\r\n\r\n"), 0, 400, "chunk size line", 1},
    {"chunk_ext_nul", C("5;a\0\r\nhello\r\n0\r\n\r\n"), sizeof(C("5;a\0\r\nhello\r\n0\r\n\r\n")) - 1, 400,
     "control byte 0x00", 1},
    {"chunk_ext_bws", C("5; a\r\nhello\r\n0\r\n\r\n"), 0, 400, "malformed chunk extension", 1},
    {"chunk_ext_bws_eq", C("5;a =b\r\nhello\r\n0\r\n\r\n"), 0, 400, "malformed chunk extension", 1},
    {"chunk_ext_trailing_space", C("5;a=b \r\nhello\r\n0\r\n\r\n"), 0, 400, "malformed chunk extension", 1},
    {"chunk_ext_not_token", C("5;@\r\nhello\r\n0\r\n\r\n"), 0, 400, "malformed chunk extension", 1},
    {"chunk_ext_empty", C("5;\r\nhello\r\n0\r\n\r\n"), 0, 400, "malformed chunk extension", 1},
    {"chunk_ext_empty_value", C("5;a=\r\nhello\r\n0\r\n\r\n"), 0, 400, "malformed chunk extension", 1},
    {"chunk_ext_open_quote", C("5;a=\"b\r\nhello\r\n0\r\n\r\n"), 0, 400, "malformed chunk extension", 1},
    {"chunk_ext_after_quote", C("5;a=\"b\"c\r\nhello\r\n0\r\n\r\n"), 0, 400, "malformed chunk extension", 1},
    {"chunk_ext_obs_text_token", C("5;a=\x80\r\nhello\r\n0\r\n\r\n"), 0, 400, "malformed chunk extension", 1},
    {"chunk_ext_cr", C("5;a\rb\r\nhello\r\n0\r\n\r\n"), 0, 400, "control byte 0x0d", 1},
    {"chunk_bare_lf", C("5\nhello\r\n0\r\n\r\n"), 0, 400, "bare LF", 1},
    {"chunk_data_bare_lf_end", C("5\r\nhello\n0\r\n\r\n"), 0, 400, "bare LF", 1},
    {"chunk_data_too_long", C("3\r\nhello\r\n0\r\n\r\n"), 0, 400, "longer than its size", 1},
    {"trailer_fold", C("0\r\nX-T: 1\r\n 2\r\n\r\n"), 0, 400, "obs-fold", 1},
    {"trailer_no_colon", C("0\r\nX-T\r\n\r\n"), 0, 400, "malformed trailer line", 1},
    {"trailer_nul", C("0\r\nX-T: \0\r\n\r\n"), sizeof(C("0\r\nX-T: \0\r\n\r\n")) - 1, 400, "control byte 0x00", 1},
    {"trailer_space_before_colon", C("0\r\nX-T : 1\r\n\r\n"), 0, 400, "and its colon", 1},
    {"trailer_bare_lf", C("0\r\nX-T: 1\n\r\n"), 0, 400, "bare LF", 1},
};

static void refusal_classes(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof(refusals) / sizeof(refusals[0]); k++) {
        const struct refusal *r = &refusals[k];
        size_t len = r->len ? r->len : strlen(r->raw);
        feed_every_way(r->raw, len);
        if (whole.p.status != r->status || !strstr(whole.p.message, r->fragment) || whole.p.in_body != r->in_body)
            fail_msg("%s: status %d in_body %d '%s', expected %d %d '%s'", r->name, whole.p.status, whole.p.in_body,
                     whole.p.message, r->status, r->in_body, r->fragment);
        /* Nothing of the refused unit is judged good, and nothing after it is read. */
        assert_true(whole.p.unit_start <= whole.p.pos);
        if (whole.p.pos > len)
            fail_msg("%s: pos %llu", r->name, (unsigned long long)whole.p.pos);
        for (size_t e = 0; e < whole.n_ev; e++)
            assert_true(whole.ev[e].to <= whole.p.unit_start || whole.ev[e].kind == 'H');
        /* Dead: more bytes change nothing. */
        struct tiled_h1 after = whole.p;
        assert_int_equal(tiled_h1_feed(&whole.p, (const unsigned char *)"GET / HTTP/1.1\r\nHost: t\r\n\r\n", 28), 0);
        assert_memory_equal(&after, &whole.p, sizeof(after));
    }
}

/* Every byte value at every place of a field value 1 to 20 bytes long
 * (inside and across the eight-byte words the value check reads at once),
 * with a tab or DEL later in some: a value is refused exactly when it holds
 * a control byte other than a tab, or DEL (RFC 9110 5.5), and the message
 * names the first such byte. CR and LF end the line, so they are left to
 * the refusal table. */
static void value_bytes(void **state)
{
    (void)state;
    static const char later[] = {'x', '\t', 0x7f, 0x01};
    char raw[96];
    for (size_t n = 1; n <= 20; n++) {
        for (size_t at = 0; at < n; at++) {
            for (int byte = 0; byte < 256; byte++) {
                if (byte == '\r' || byte == '\n')
                    continue;
                for (size_t l = 0; l < sizeof(later); l++) {
                    char value[24];
                    memset(value, 'v', n);
                    value[at] = (char)byte;
                    if (at + 3 < n)
                        value[at + 3] = later[l];
                    size_t len = (size_t)snprintf(raw, sizeof(raw), "GET / HTTP/1.1\r\nHost: t\r\nX-V: ");
                    memcpy(raw + len, value, n);
                    len += n;
                    memcpy(raw + len, "\r\n\r\n", 4);
                    len += 4;
                    int bad = -1;
                    for (size_t k = 0; k < n && bad < 0; k++) {
                        unsigned char b = (unsigned char)value[k];
                        if ((b < 0x20 && b != '\t') || b == 0x7f)
                            bad = b;
                    }
                    h1drive_steps(&whole, (const unsigned char *)raw, len, 0);
                    if (bad < 0 && whole.p.status != 0)
                        fail_msg("value %zu bytes, 0x%02x at %zu: refused %d '%s'", n, byte, at, whole.p.status,
                                 whole.p.message);
                    if (bad >= 0) {
                        char want[40];
                        snprintf(want, sizeof(want), "control byte 0x%02x", bad);
                        if (whole.p.status != 400 || !strstr(whole.p.message, want))
                            fail_msg("value %zu bytes, 0x%02x at %zu: status %d '%s', expected 400 '%s'", n, byte,
                                     at, whole.p.status, whole.p.message, want);
                    }
                }
            }
        }
    }
}

/* ---- limits, met exactly and exceeded */

static char big[40000];

static size_t fill(const char *prefix, char c, size_t count, const char *suffix)
{
    size_t n = strlen(prefix);
    memcpy(big, prefix, n);
    memset(big + n, c, count);
    n += count;
    memcpy(big + n, suffix, strlen(suffix));
    return n + strlen(suffix);
}

static void limits(void **state)
{
    (void)state;
    /* The request line: TILED_H1_LINE_MAX bytes with its CRLF pass, one more is 414. */
    size_t n = fill("GET /", 'a', TILED_H1_LINE_MAX - 16, " HTTP/1.1\r\nHost: t\r\n\r\n");
    feed_every_way(big, n);
    assert_int_equal(whole.p.status, 0);
    n = fill("GET /", 'a', TILED_H1_LINE_MAX - 15, " HTTP/1.1\r\nHost: t\r\n\r\n");
    feed_every_way(big, n);
    assert_int_equal(whole.p.status, 414);
    /* An unfinished one is refused as soon as it is too long. */
    n = fill("GET /", 'a', TILED_H1_LINE_MAX, "");
    feed_every_way(big, n);
    assert_int_equal(whole.p.status, 414);
    assert_int_equal(whole.p.pos, 0);

    /* The head: TILED_H1_HEAD_MAX bytes with its last CRLF pass, one more is 431. */
    n = fill("GET / HTTP/1.1\r\nHost: t\r\nX-A: ", 'a', TILED_H1_HEAD_MAX - 34, "\r\n\r\n");
    assert_int_equal(n, TILED_H1_HEAD_MAX);
    feed_every_way(big, n);
    assert_int_equal(whole.p.status, 0);
    n = fill("GET / HTTP/1.1\r\nHost: t\r\nX-A: ", 'a', TILED_H1_HEAD_MAX - 33, "\r\n\r\n");
    feed_every_way(big, n);
    assert_int_equal(whole.p.status, 431);
    assert_non_null(strstr(whole.p.message, "request head"));
    /* Empty lines before a request count towards its head, whichever limit a
     * long request line after them meets first. */
    n = fill("", '\n', 12000, "");
    for (size_t k = 0; k < 12000; k += 2)
        big[k] = '\r';
    memcpy(big + n, "GET /", 5);
    memset(big + n + 5, 'a', 9000);
    memcpy(big + n + 9005, " HTTP/1.1\r\nHost: t\r\n\r\n", 22);
    feed_every_way(big, n + 9027);
    assert_int_equal(whole.p.status, 431);
    n = fill("", '\n', 2000, "");
    for (size_t k = 0; k < 2000; k += 2)
        big[k] = '\r';
    memcpy(big + n, "GET /", 5);
    memset(big + n + 5, 'a', 9000);
    memcpy(big + n + 9005, " HTTP/1.1\r\nHost: t\r\n\r\n", 22);
    feed_every_way(big, n + 9027);
    assert_int_equal(whole.p.status, 414);

    /* Field lines: TILED_H1_FIELDS_MAX pass, one more is 431. */
    n = fill("GET / HTTP/1.1\r\n", 'x', 0, "");
    for (int k = 0; k < TILED_H1_FIELDS_MAX; k++)
        n += (size_t)sprintf(big + n, k ? "X-%d: 1\r\n" : "Host: t\r\n", k);
    memcpy(big + n, "\r\n", 2);
    feed_every_way(big, n + 2);
    assert_int_equal(whole.p.status, 0);
    memcpy(big + n, "X: 1\r\n\r\n", 8);
    feed_every_way(big, n + 8);
    assert_int_equal(whole.p.status, 431);
    assert_non_null(strstr(whole.p.message, "header lines"));

    /* Query arguments count with the field lines, as libmicrohttpd's pool
     * holds one entry for each: "/?" has none, "a&&b" is three (an empty
     * piece too), the Host line is one. */
    n = fill("GET /?", 'x', 0, "");
    for (int k = 1; k < TILED_H1_FIELDS_MAX; k++)
        n += (size_t)sprintf(big + n, k > 1 ? "&a%d=1" : "a%d=1", k);
    memcpy(big + n, " HTTP/1.1\r\nHost: t\r\n\r\n", 22);
    feed_every_way(big, n + 22);
    assert_int_equal(whole.p.status, 0);
    memcpy(big + n, "& HTTP/1.1\r\nHost: t\r\n\r\n", 23);
    feed_every_way(big, n + 23);
    assert_int_equal(whole.p.status, 431);
    assert_non_null(strstr(whole.p.message, "query arguments"));
    n = fill("GET /?", '&', TILED_H1_FIELDS_MAX - 2, " HTTP/1.1\r\nHost: t\r\n\r\n");
    feed_every_way(big, n);
    assert_int_equal(whole.p.status, 0);
    n = fill("GET /?", '&', TILED_H1_FIELDS_MAX - 1, " HTTP/1.1\r\nHost: t\r\n\r\n");
    feed_every_way(big, n);
    assert_int_equal(whole.p.status, 431);
    feed_every_way("GET /? HTTP/1.1\r\nHost: t\r\n\r\n", 28); /* a '?' alone: no argument */
    assert_int_equal(whole.p.status, 0);

    /* Trailer lines count with the head's lines: a head of Host and
     * Transfer-Encoding leaves TILED_H1_FIELDS_MAX - 2 of them. */
    n = fill(C("0\r\n"), 'x', 0, "");
    for (int k = 0; k < TILED_H1_FIELDS_MAX - 2; k++)
        n += (size_t)sprintf(big + n, "T%d:\r\n", k);
    memcpy(big + n, "\r\n", 2);
    feed_every_way(big, n + 2);
    assert_int_equal(whole.p.status, 0);
    memcpy(big + n, "T:\r\n\r\n", 6);
    feed_every_way(big, n + 6);
    assert_int_equal(whole.p.status, 431);
    assert_true(whole.p.in_body);
    assert_non_null(strstr(whole.p.message, "trailer lines"));

    /* A chunk-size line with extensions: TILED_H1_CHUNK_LINE_MAX bytes. */
    n = fill(C("5;"), 'e', TILED_H1_CHUNK_LINE_MAX - 4, "\r\nhello\r\n0\r\n\r\n");
    feed_every_way(big, n);
    assert_int_equal(whole.p.status, 0);
    n = fill(C("5;"), 'e', TILED_H1_CHUNK_LINE_MAX - 3, "\r\nhello\r\n0\r\n\r\n");
    feed_every_way(big, n);
    assert_int_equal(whole.p.status, 400);
    assert_non_null(strstr(whole.p.message, "chunk extensions are bounded"));

    /* The trailer section: 431 past TILED_H1_TRAILER_MAX. */
    n = fill(C("0\r\nX-T: "), 't', TILED_H1_TRAILER_MAX, "\r\n\r\n");
    feed_every_way(big, n);
    assert_int_equal(whole.p.status, 431);
    assert_true(whole.p.in_body);
    n = fill(C("0\r\nX-T: "), 't', TILED_H1_TRAILER_MAX - 20, "\r\n\r\n");
    feed_every_way(big, n);
    assert_int_equal(whole.p.status, 0);
}

/* A body larger than any buffer: counted, not held. */
static void large_bodies(void **state)
{
    (void)state;
    struct h1drive *d = &whole;
    h1drive_init(d);
    static const char head[] = "POST /t HTTP/1.1\r\nHost: t\r\nContent-Length: 4611686018427387000\r\n\r\n";
    assert_int_equal(tiled_h1_feed(&d->p, (const unsigned char *)head, sizeof(head) - 1), sizeof(head) - 1);
    static unsigned char zeros[65536];
    for (int k = 0; k < 64; k++)
        assert_int_equal(tiled_h1_feed(&d->p, zeros, sizeof(zeros)), sizeof(zeros));
    assert_int_equal(d->p.status, 0);
    assert_int_equal(d->p.remaining, 4611686018427387000ull - 64 * sizeof(zeros));
    assert_int_equal(d->n_ev, 2); /* the head, then one body piece merged */
    assert_int_equal(d->ev[1].to - d->ev[1].from, 64 * sizeof(zeros));
    /* A chunk of 15 hex digits, the largest size accepted. */
    feed_every_way(C("fffffffffffffff\r\nabc"), strlen(C("fffffffffffffff\r\nabc")));
    assert_int_equal(whole.p.status, 0);
    assert_int_equal(whole.p.remaining, 0xfffffffffffffffull - 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(get_head),
        cmocka_unit_test(head_forms),
        cmocka_unit_test(content_length_body),
        cmocka_unit_test(chunked_body),
        cmocka_unit_test(chunk_extensions),
        cmocka_unit_test(pipelined),
        cmocka_unit_test(good_request_then_refused),
        cmocka_unit_test(refusal_classes),
        cmocka_unit_test(value_bytes),
        cmocka_unit_test(limits),
        cmocka_unit_test(large_bodies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
