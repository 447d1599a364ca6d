/* h1_replies.c - see h1_replies.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fuzz_common.h"
#include "h1_replies.h"
#include "h1wire.h"

/* A reply head longer than this is not one tiled writes. */
#define HEAD_MAX (64u * 1024u)
/* JSON bodies up to this are read back whole. */
#define JSON_MAX (1u << 20)

/* What the client knows of a request it sent (or began to send). */
struct request {
    bool head;        /* its method is HEAD: the reply has no body */
    bool http10;
    bool expect;      /* Expect: 100-continue, over HTTP/1.1 */
    bool wants_close; /* the reply must announce the close */
    bool complete;    /* the client sent the whole message */
    bool refused;     /* the framer refused it: its head (status) or its body */
    int status;       /* a refused head's: the reply carries it */
    bool continued;   /* a 100 Continue was read for it */
};

enum state {
    R_STATUS,     /* a status line next */
    R_FIELDS,     /* the head's field lines */
    R_BODY_LEN,   /* `remaining` bytes of a Content-Length body */
    R_CHUNK_SIZE, /* a chunk-size line */
    R_CHUNK_DATA, /* `remaining` bytes of a chunk */
    R_CHUNK_END,  /* the CRLF after a chunk's data */
    R_TRAILER,    /* trailer fields, up to the empty line */
    R_BODY_EOF,   /* a body read to the connection's end */
    R_CLOSED,     /* after a reply that announced the close: nothing more */
};

static struct {
    bool verbose;
    /* The client's side: its stream through the framer. */
    struct tiled_h1 p;
    const uint8_t *stream; /* valid inside h1_replies_sent */
    struct request *reqs;
    size_t nreqs, reqs_cap, complete;
    bool refused;
    /* The server's side. */
    uint8_t *buf; /* bytes read and not consumed yet */
    size_t off, len, cap;
    enum state st;
    uint64_t remaining;
    size_t replies;
    bool closing, eof;
    /* The reply being read. */
    int status;
    bool interim, r_close, r_chunked, r_length, r_te, r_conn, r_json, r_encoded;
    uint64_t r_len;
    char *body; /* a JSON body, read back when whole */
    size_t body_len, body_cap;
    bool body_keep;
} rd;

static void grow(void **buf, size_t *cap, size_t need, size_t size)
{
    if (*cap >= need)
        return;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *nb = realloc(*buf, c * size);
    FUZZ_CHECK(nb != NULL, "out of memory");
    *buf = nb;
    *cap = c;
}

/* ---- the client's requests ----------------------------------------------------- */

static bool ieq(const uint8_t *s, size_t n, const char *lit)
{
    return strlen(lit) == n && strncasecmp((const char *)s, lit, n) == 0;
}

/* Whether the comma-separated list v[0..n) has `token` (case-insensitive). */
static bool lists(const uint8_t *v, size_t n, const char *token)
{
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t s = i;
        while (i < n && v[i] != ',')
            i++;
        size_t e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        if (e > s && ieq(v + s, e - s, token))
            return true;
    }
    return false;
}

/* A head the framer accepted, [from, to) of the stream: its method, its
 * Connection and Expect fields. */
static void add_head(const struct tiled_h1 *p, uint64_t from, uint64_t to)
{
    grow((void **)&rd.reqs, &rd.reqs_cap, rd.nreqs + 1, sizeof(*rd.reqs));
    struct request *q = &rd.reqs[rd.nreqs++];
    memset(q, 0, sizeof(*q));
    const uint8_t *h = rd.stream + from, *end = rd.stream + to;
    q->head = p->method_len == 4 && memcmp(h, "HEAD", 4) == 0;
    q->http10 = p->http10;
    bool close = false, keep_alive = false, expect_seen = false;
    const uint8_t *line = memchr(h, '\n', (size_t)(end - h));
    for (line = line ? line + 1 : end; line < end;) {
        const uint8_t *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol)
            break;
        size_t n = (size_t)(eol - line) - 1; /* without the CRLF */
        const uint8_t *colon = memchr(line, ':', n);
        if (colon) {
            const uint8_t *v = colon + 1, *ve = line + n;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            size_t name_len = (size_t)(colon - line), vlen = (size_t)(ve - v);
            if (ieq(line, name_len, "Connection")) {
                close |= lists(v, vlen, "close");
                keep_alive |= lists(v, vlen, "keep-alive");
            } else if (ieq(line, name_len, "Expect") && !expect_seen) {
                expect_seen = true; /* the first Expect field is the one read */
                q->expect = !q->http10 && ieq(v, vlen, "100-continue");
            }
        }
        line = eol + 1;
    }
    /* RFC 9112 9.3: "close" ends the connection after the reply; an
     * HTTP/1.0 connection persists only with "keep-alive". */
    q->wants_close = close || (q->http10 && !keep_alive);
    if (rd.verbose)
        fprintf(stderr, "client: request %zu: %.*s%s%s%s\n", rd.nreqs - 1, (int)p->method_len, (const char *)h,
                q->http10 ? " HTTP/1.0" : "", q->expect ? ", expects 100-continue" : "",
                q->wants_close ? ", asks for the close" : "");
}

static void observe(void *arg, const struct tiled_h1 *p, enum tiled_h1_event ev, uint64_t from, uint64_t to)
{
    (void)arg;
    if (ev == TILED_H1_EV_HEAD) {
        add_head(p, from, to);
    } else if (ev == TILED_H1_EV_END) {
        FUZZ_CHECK(rd.nreqs > 0 && !rd.reqs[rd.nreqs - 1].complete, "the framer ended a message it never began");
        rd.reqs[rd.nreqs - 1].complete = true;
        rd.complete++;
    }
}

/* A refused head is answered as a request of its own, named as far as it
 * was read (h1conn.c, refused_line): whether that is a HEAD decides
 * whether its reply has a body. `unit` is the stream from the head's start. */
static bool refused_head_is_head(const struct tiled_h1 *p, const uint8_t *unit, size_t len)
{
    const uint8_t *m;
    size_t n;
    if (p->method_len && p->target_off >= p->method_len + 1 && (size_t)p->target_off + p->target_len <= len) {
        m = unit + p->target_off - p->method_len - 1;
        n = p->method_len;
    } else {
        size_t i = 0;
        while (i < len && (unit[i] == '\r' || unit[i] == '\n'))
            i++;
        m = unit + i;
        for (n = 0; i + n < len && unit[i + n] > 0x20 && unit[i + n] < 0x7f; n++)
            ;
    }
    return n == 4 && memcmp(m, "HEAD", 4) == 0;
}

void h1_replies_sent(const uint8_t *stream, size_t len)
{
    if (rd.refused || rd.p.pos >= len)
        return;
    rd.stream = stream;
    tiled_h1_feed(&rd.p, stream + rd.p.pos, len - (size_t)rd.p.pos);
    if (rd.p.status) {
        rd.refused = true;
        if (!rd.p.in_body) {
            grow((void **)&rd.reqs, &rd.reqs_cap, rd.nreqs + 1, sizeof(*rd.reqs));
            struct request *q = &rd.reqs[rd.nreqs++];
            memset(q, 0, sizeof(*q));
            size_t at = (size_t)rd.p.unit_start;
            q->head = refused_head_is_head(&rd.p, stream + at, len - at);
            q->status = rd.p.status;
        } else {
            FUZZ_CHECK(rd.nreqs > 0, "the framer refused a body of no request");
        }
        rd.reqs[rd.nreqs - 1].refused = true;
        rd.reqs[rd.nreqs - 1].wants_close = true;
        if (rd.verbose)
            fprintf(stderr, "client: the framer refuses request %zu (%s): %d %s\n", rd.nreqs - 1,
                    rd.p.in_body ? "its body" : "its head", rd.p.status, rd.p.message);
    }
    rd.stream = NULL;
}

/* ---- the server's replies --------------------------------------------------------- */

/* The next line (without its CRLF), when it is all here. */
static bool next_line(const uint8_t **line, size_t *n)
{
    const uint8_t *s = rd.buf + rd.off;
    size_t avail = rd.len - rd.off;
    const uint8_t *lf = memchr(s, '\n', avail);
    if (!lf) {
        FUZZ_CHECK(avail <= HEAD_MAX, "a reply line of more than %u bytes", HEAD_MAX);
        return false;
    }
    size_t k = (size_t)(lf - s);
    FUZZ_CHECK(k > 0 && s[k - 1] == '\r', "reply %zu: a line ends in a bare LF: '%.*s'", rd.replies, (int)k, s);
    FUZZ_CHECK(!memchr(s, '\r', k - 1), "reply %zu: a bare CR in a line: '%.*s'", rd.replies, (int)k - 1, s);
    *line = s;
    *n = k - 1;
    rd.off += k + 1;
    return true;
}

static bool tchar(uint8_t ch)
{
    return (ch >= '0' && ch <= '9') || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* Field-value and reason bytes: visible, obs-text, SP, HTAB; no other
 * control byte (a request's bytes echoed must not break the head). */
static void check_text(const uint8_t *s, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(s[i] == '\t' || (s[i] >= 0x20 && s[i] != 0x7f), "reply %zu: byte 0x%02x in %s '%.*s'",
                   rd.replies, s[i], what, (int)n, s);
}

/* A field line "name: value": its value trimmed of OWS. */
static void split_field(const uint8_t *line, size_t n, size_t *name_len, const uint8_t **v, size_t *vlen)
{
    size_t k = 0;
    while (k < n && tchar(line[k]))
        k++;
    FUZZ_CHECK(k > 0 && k < n && line[k] == ':', "reply %zu: not a field line: '%.*s'", rd.replies, (int)n, line);
    const uint8_t *s = line + k + 1, *e = line + n;
    while (s < e && (*s == ' ' || *s == '\t'))
        s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    check_text(line + k + 1, n - k - 1, "a field value");
    *name_len = k;
    *v = s;
    *vlen = (size_t)(e - s);
}

static void status_line(const uint8_t *s, size_t n)
{
    FUZZ_CHECK(n >= 13 && memcmp(s, "HTTP/1.1 ", 9) == 0 && s[9] >= '1' && s[9] <= '5' && s[10] >= '0' &&
                   s[10] <= '9' && s[11] >= '0' && s[11] <= '9' && s[12] == ' ',
               "reply %zu: not a status line: '%.*s'", rd.replies, (int)n, s);
    check_text(s + 13, n - 13, "the reason phrase");
    rd.status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
    rd.interim = rd.status < 200;
    rd.r_close = rd.r_chunked = rd.r_length = rd.r_te = rd.r_conn = rd.r_json = rd.r_encoded = false;
    rd.r_len = 0;
}

static void field(const uint8_t *line, size_t n)
{
    size_t name_len, vlen;
    const uint8_t *v;
    split_field(line, n, &name_len, &v, &vlen);
    if (ieq(line, name_len, "Content-Length")) {
        FUZZ_CHECK(!rd.r_length, "reply %zu: two Content-Length fields", rd.replies);
        FUZZ_CHECK(vlen > 0 && vlen <= 18, "reply %zu: Content-Length '%.*s'", rd.replies, (int)vlen, v);
        rd.r_length = true;
        for (size_t i = 0; i < vlen; i++) {
            FUZZ_CHECK(v[i] >= '0' && v[i] <= '9', "reply %zu: Content-Length '%.*s'", rd.replies, (int)vlen, v);
            rd.r_len = rd.r_len * 10 + (uint64_t)(v[i] - '0');
        }
    } else if (ieq(line, name_len, "Transfer-Encoding")) {
        FUZZ_CHECK(!rd.r_te && ieq(v, vlen, "chunked"), "reply %zu: Transfer-Encoding '%.*s' (or two of them)",
                   rd.replies, (int)vlen, v);
        rd.r_te = rd.r_chunked = true;
    } else if (ieq(line, name_len, "Connection")) {
        FUZZ_CHECK(!rd.r_conn, "reply %zu: two Connection fields", rd.replies);
        rd.r_conn = true;
        rd.r_close = lists(v, vlen, "close");
    } else if (ieq(line, name_len, "Content-Type")) {
        rd.r_json = vlen >= 16 && strncasecmp((const char *)v, "application/json", 16) == 0 &&
                    (vlen == 16 || v[16] == ';' || v[16] == ' ');
    } else if (ieq(line, name_len, "Content-Encoding")) {
        rd.r_encoded = !ieq(v, vlen, "identity");
    }
}

static void reply_done(void)
{
    const struct request *q = &rd.reqs[rd.replies];
    if (rd.body_keep && rd.body_len > 0) {
        char what[64];
        snprintf(what, sizeof(what), "reply %zu's JSON body", rd.replies);
        fuzz_check_json(rd.body, rd.body_len, what);
    }
    if (rd.verbose)
        fprintf(stderr, "server: reply %zu: %d%s%s\n", rd.replies, rd.status, q->head ? " (to a HEAD)" : "",
                rd.r_close ? ", Connection: close" : "");
    rd.replies++;
    rd.closing = rd.r_close;
    rd.st = rd.r_close ? R_CLOSED : R_STATUS;
}

/* The head is in: what the request allows, and how its body is framed. */
static void head_done(void)
{
    FUZZ_CHECK(rd.replies < rd.nreqs, "reply %zu (%d) answers no request: the client began %zu", rd.replies, rd.status,
               rd.nreqs);
    struct request *q = &rd.reqs[rd.replies];
    if (rd.interim) {
        FUZZ_CHECK(rd.status == 100 && q->expect && !q->continued && !rd.r_length && !rd.r_te,
                   "reply %zu: an interim %d to a request that %s", rd.replies, rd.status,
                   q->continued ? "had its 100 Continue" : q->expect ? "expects 100 Continue" : "did not ask for it");
        q->continued = true;
        if (rd.verbose)
            fprintf(stderr, "server: reply %zu: 100 Continue\n", rd.replies);
        rd.st = R_STATUS;
        return;
    }
    FUZZ_CHECK(!(rd.r_length && rd.r_te), "reply %zu: both Content-Length and Transfer-Encoding", rd.replies);
    FUZZ_CHECK(!q->wants_close || rd.r_close, "reply %zu (%d): the request asked for the close, the reply keeps the "
               "connection", rd.replies, rd.status);
    FUZZ_CHECK(q->complete || rd.r_close, "reply %zu (%d): its request was not sent whole, and the reply keeps the "
               "connection (where would the next request start?)", rd.replies, rd.status);
    FUZZ_CHECK(!q->refused || q->status == 0 || rd.status == q->status,
               "reply %zu: %d to a head the framer refused with %d", rd.replies, rd.status, q->status);
    FUZZ_CHECK(!rd.r_te || !q->http10, "reply %zu: chunked to an HTTP/1.0 request", rd.replies);
    if (rd.status == 204)
        FUZZ_CHECK(!rd.r_length && !rd.r_te, "reply %zu: a 204 with a framing field", rd.replies);
    rd.body_len = 0;
    rd.body_keep = rd.r_json && !rd.r_encoded;
    if (q->head || rd.status == 204 || rd.status == 304) {
        rd.body_keep = false;
        reply_done();
    } else if (rd.r_te) {
        rd.st = R_CHUNK_SIZE;
    } else if (rd.r_length) {
        rd.remaining = rd.r_len;
        rd.st = R_BODY_LEN;
        if (!rd.remaining)
            reply_done();
    } else {
        FUZZ_CHECK(rd.r_close, "reply %zu (%d): no Content-Length, not chunked, and the connection is kept: its body "
                   "has no end", rd.replies, rd.status);
        rd.st = R_BODY_EOF;
    }
}

static void body_bytes(size_t n)
{
    if (rd.body_keep) {
        if (rd.body_len + n > JSON_MAX) {
            rd.body_keep = false;
        } else {
            grow((void **)&rd.body, &rd.body_cap, rd.body_len + n, 1);
            memcpy(rd.body + rd.body_len, rd.buf + rd.off, n);
            rd.body_len += n;
        }
    }
    rd.off += n;
}

/* Reads what it can; false when it needs more bytes. */
static bool step(void)
{
    const uint8_t *line;
    size_t n, avail = rd.len - rd.off;
    switch (rd.st) {
    case R_STATUS:
        if (!next_line(&line, &n))
            return false;
        status_line(line, n);
        rd.st = R_FIELDS;
        return true;
    case R_FIELDS:
        if (!next_line(&line, &n))
            return false;
        if (n == 0)
            head_done();
        else
            field(line, n);
        return true;
    case R_BODY_LEN:
    case R_CHUNK_DATA:
        if (!avail)
            return false;
        n = avail < rd.remaining ? avail : (size_t)rd.remaining;
        body_bytes(n);
        rd.remaining -= n;
        if (!rd.remaining) {
            if (rd.st == R_BODY_LEN)
                reply_done();
            else
                rd.st = R_CHUNK_END;
        }
        return true;
    case R_CHUNK_SIZE: {
        if (!next_line(&line, &n))
            return false;
        FUZZ_CHECK(n > 0 && n <= 16, "reply %zu: chunk-size line '%.*s'", rd.replies, (int)n, line);
        uint64_t size = 0;
        for (size_t i = 0; i < n; i++) {
            uint8_t ch = line[i] | 0x20;
            FUZZ_CHECK((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'), "reply %zu: chunk-size line '%.*s'",
                       rd.replies, (int)n, line);
            size = size * 16 + (uint64_t)(ch <= '9' ? ch - '0' : ch - 'a' + 10);
        }
        rd.remaining = size;
        rd.st = size ? R_CHUNK_DATA : R_TRAILER;
        return true;
    }
    case R_CHUNK_END:
        if (!next_line(&line, &n))
            return false;
        FUZZ_CHECK(n == 0, "reply %zu: a chunk longer than its size: '%.*s'", rd.replies, (int)n, line);
        rd.st = R_CHUNK_SIZE;
        return true;
    case R_TRAILER:
        if (!next_line(&line, &n))
            return false;
        if (n == 0) {
            reply_done();
        } else {
            size_t name_len, vlen;
            const uint8_t *v;
            split_field(line, n, &name_len, &v, &vlen);
            FUZZ_CHECK(!ieq(line, name_len, "Content-Length") && !ieq(line, name_len, "Transfer-Encoding"),
                       "reply %zu: a framing field in the trailers", rd.replies);
        }
        return true;
    case R_BODY_EOF:
        if (!avail)
            return false;
        body_bytes(avail);
        return true;
    case R_CLOSED:
        FUZZ_CHECK(!avail, "%zu bytes after reply %zu, which announced the close: '%.*s'", avail, rd.replies - 1,
                   (int)(avail < 40 ? avail : 40), rd.buf + rd.off);
        return false;
    }
    return false;
}

void h1_replies_read(const uint8_t *p, size_t n)
{
    FUZZ_CHECK(!rd.eof, "%zu bytes after the server's side ended", n);
    if (rd.off == rd.len) {
        rd.off = rd.len = 0;
    } else if (rd.off > 0) {
        memmove(rd.buf, rd.buf + rd.off, rd.len - rd.off);
        rd.len -= rd.off;
        rd.off = 0;
    }
    grow((void **)&rd.buf, &rd.cap, rd.len + n, 1);
    memcpy(rd.buf + rd.len, p, n);
    rd.len += n;
    while (step())
        ;
}

void h1_replies_eof(void)
{
    if (rd.eof)
        return;
    rd.eof = true;
    if (rd.st == R_BODY_EOF)
        reply_done();
    if (rd.verbose)
        fprintf(stderr, "server: end of the connection\n");
}

void h1_replies_account(struct h1_account *a)
{
    a->requests = rd.complete;
    a->refused = rd.refused;
    a->replies = rd.replies;
    a->closing = rd.closing;
    a->partial = rd.st != R_CLOSED && (rd.st != R_STATUS || rd.off < rd.len);
    a->eof = rd.eof;
}

void h1_replies_begin(bool verbose)
{
    rd.verbose = verbose;
    tiled_h1_init(&rd.p);
    rd.p.observer = observe;
    rd.nreqs = rd.complete = 0;
    rd.refused = false;
    rd.off = rd.len = 0;
    rd.st = R_STATUS;
    rd.replies = 0;
    rd.closing = rd.eof = false;
}

void h1_replies_end(void)
{
    free(rd.reqs);
    free(rd.buf);
    free(rd.body);
    memset(&rd, 0, sizeof(rd));
}
