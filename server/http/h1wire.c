/* h1wire.c - a strict HTTP/1.1 request framer (see h1wire.h).
 *
 * Where RFC 9112 lets a server choose between rejecting and repairing
 * (obs-fold, bare LF, whitespace after a framing value), this rejects:
 * parsers repair some of these their own way (libmicrohttpd 0.9.75, for
 * one, appends a folded line to the field *name*, ends lines at a bare LF,
 * keeps trailing whitespace in a Content-Length it then fails to parse),
 * and any repair another party does differently is a way to smuggle a
 * request. Leniency stays where it
 * cannot change the framing: leading empty lines before a request, leading
 * zeros in a Content-Length (both read them as one number), chunk
 * extensions (bounded, then ignored).
 */
#include "h1wire.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "swar.h"

enum {
    S_HEAD,       /* before or in a request line */
    S_FIELDS,     /* field lines of a head */
    S_BODY,       /* Content-Length body data */
    S_CHUNK_LINE, /* a chunk-size line */
    S_CHUNK_DATA, /* a chunk's data */
    S_CHUNK_END,  /* the CRLF after a chunk's data */
    S_TRAILERS,   /* the trailer section after the last chunk */
    S_DEAD,       /* after a violation */
};

/* Byte classes: T tchar (RFC 9110 5.6.2), V a visible byte of a field value
 * or a request target (VCHAR or obs-text), H a Host reg-name byte
 * (RFC 3986: unreserved, sub-delims, '%'), X a hex digit. */
enum { T = 1, V = 2, H = 4, X = 8 };
static const unsigned char CLS[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 7, 2, 3, 7, 7, 7, 7, 6, 6, 7, 7, 6, 7, 7, 2, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 2, 6, 2, 6, 2, 2,
    2, 15, 15, 15, 15, 15, 15, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 2, 2, 2, 3, 7,
    3, 15, 15, 15, 15, 15, 15, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 2, 3, 2, 7, 0,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
};

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void refuse(struct tiled_h1 *p, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->message, sizeof(p->message), fmt, ap);
    va_end(ap);
    p->status = status;
    p->in_body = p->unit != TILED_H1_UNIT_HEAD;
    p->state = S_DEAD;
}

static void tell(struct tiled_h1 *p, enum tiled_h1_event ev, uint64_t from, uint64_t to)
{
    if (p->observer)
        p->observer(p->observer_arg, p, ev, from, to);
}

static void new_head(struct tiled_h1 *p, uint64_t at)
{
    p->state = S_HEAD;
    p->unit = TILED_H1_UNIT_HEAD;
    p->unit_start = at;
    p->fields = p->host_lines = p->cl_lines = p->te_lines = 0;
    p->http10 = p->te_chunked_only = p->te_bad_syntax = p->te_chunked_not_last = p->te_chunked_twice = false;
    p->te_seen_chunked = false;
    p->te_unknown[0] = '\0';
    p->content_length = 0;
    p->method_len = p->target_off = p->target_len = 0;
    p->line_start = at;
    p->trailers = false;
}

void tiled_h1_init(struct tiled_h1 *p)
{
    memset(p, 0, sizeof(*p));
    new_head(p, 0);
}

static bool is_ows(unsigned char c)
{
    return c == ' ' || c == '\t';
}

/* "METHOD SP request-target SP HTTP-version" (RFC 9112 3), single spaces. */
/* Header lines, query arguments and trailer lines, counted together
 * against one limit (h1wire.h). False once over the limit (refused). */
static bool count_fields(struct tiled_h1 *p, uint32_t n)
{
    p->fields += n;
    if (p->fields <= TILED_H1_FIELDS_MAX)
        return true;
    refuse(p, 431, "the request has more than %d header lines, query arguments and trailer lines together",
           TILED_H1_FIELDS_MAX);
    return false;
}

/* The target's query arguments as a query parser splits them: the pieces
 * between '&'s after the first '?' (a piece may be empty). */
static uint32_t query_arguments(const unsigned char *t, size_t n)
{
    const unsigned char *q = memchr(t, '?', n);
    if (!q || q + 1 == t + n)
        return 0;
    uint32_t args = 1;
    for (q++; q < t + n; q++)
        args += *q == '&';
    return args;
}

static void request_line(struct tiled_h1 *p, const unsigned char *c, size_t len, size_t off)
{
    size_t i = 0;
    while (i < len && (CLS[c[i]] & T))
        i++;
    if (i == 0 || i == len || c[i] != ' ') {
        refuse(p, 400, "malformed request line: expected 'METHOD /path HTTP/1.1'");
        return;
    }
    p->method_len = (uint32_t)i;
    size_t t0 = ++i;
    while (i < len && (CLS[c[i]] & V) && c[i] < 0x80) /* URI characters only (RFC 3986) */
        i++;
    p->target_off = (uint32_t)(off + t0);
    p->target_len = (uint32_t)(i - t0);
    if (i < len && c[i] >= 0x80) {
        refuse(p, 400, "the request target contains the byte 0x%02x (percent-encode it, RFC 3986 2.1)", c[i]);
        return;
    }
    if (i < len && c[i] != ' ') {
        refuse(p, 400, "the request target contains the control byte 0x%02x", c[i]);
        return;
    }
    if (i == t0 || i == len) {
        refuse(p, 400, "malformed request line: expected 'METHOD /path HTTP/1.1'");
        return;
    }
    const unsigned char *ver = c + i + 1;
    size_t vlen = len - i - 1;
    if (vlen == 8 && memcmp(ver, "HTTP/1.", 7) == 0 && ver[7] >= '0' && ver[7] <= '9') {
        /* A minor version above 1 is processed as 1.1, the highest this
         * server implements (RFC 9110 2.5: a recipient SHOULD). */
        p->http10 = ver[7] == '0';
    } else if (vlen == 8 && memcmp(ver, "HTTP/", 5) == 0 && ver[5] >= '0' && ver[5] <= '9' && ver[6] == '.' &&
               ver[7] >= '0' && ver[7] <= '9') {
        refuse(p, 505, "HTTP version %.8s is not supported (send HTTP/1.1 or HTTP/1.0)", (const char *)ver);
        return;
    } else {
        refuse(p, 400, "malformed request line: the version is not HTTP/1.1 or HTTP/1.0");
        return;
    }
    const unsigned char *t = c + t0;
    size_t tl = p->target_len;
    if (!count_fields(p, query_arguments(t, tl)))
        return;
    if (t[0] == '/')
        return; /* origin-form */
    if (tl == 1 && t[0] == '*' && p->method_len == 7 && memcmp(c, "OPTIONS", 7) == 0)
        return; /* asterisk-form */
    if ((tl > 7 && strncasecmp((const char *)t, "http://", 7) == 0) ||
        (tl > 8 && strncasecmp((const char *)t, "https://", 8) == 0))
        return; /* absolute-form (RFC 9112 3.2.2: a server MUST accept it) */
    refuse(p, 400, "the request target must be a path ('/...') or an absolute http(s) URI");
}

/* Host = uri-host [ ":" port ] (RFC 9110 7.2, RFC 3986 3.2.2). */
static bool host_valid(const unsigned char *v, size_t n)
{
    size_t i = 0;
    if (n && v[0] == '[') {
        for (i = 1; i < n && v[i] != ']'; i++) {
            if (!(CLS[v[i]] & X) && v[i] != ':' && v[i] != '.' && !(CLS[v[i]] & H))
                return false;
        }
        if (i == n || i == 1)
            return false;
        i++;
    } else {
        while (i < n && (CLS[v[i]] & H))
            i++;
    }
    if (i == n)
        return true;
    if (v[i] != ':')
        return false;
    for (i++; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return false;
    }
    return true;
}

/* One Transfer-Encoding field value, a list of codings (RFC 9112 6.1),
 * combined with the lines before it. */
static void transfer_encoding(struct tiled_h1 *p, const unsigned char *v, size_t n, bool trailing_ows)
{
    p->te_lines++;
    p->te_chunked_only = p->te_lines == 1 && !trailing_ows && n == 7 && strncasecmp((const char *)v, "chunked", 7) == 0;
    if (trailing_ows)
        p->te_bad_syntax = true;
    size_t i = 0;
    for (;;) {
        while (i < n && is_ows(v[i]))
            i++;
        size_t s = i;
        while (i < n && (CLS[v[i]] & T))
            i++;
        size_t e = i;
        if (s == e) { /* an empty element or a stray byte */
            p->te_bad_syntax = true;
            return;
        }
        bool chunked = e - s == 7 && strncasecmp((const char *)v + s, "chunked", 7) == 0;
        while (i < n && is_ows(v[i]))
            i++;
        if (i < n && v[i] == ';') { /* parameters: none for chunked */
            if (chunked) {
                p->te_bad_syntax = true;
                return;
            }
            while (i < n && v[i] != ',')
                i++;
        }
        if (chunked) {
            if (p->te_seen_chunked)
                p->te_chunked_twice = true;
            p->te_seen_chunked = true;
        } else if (!p->te_unknown[0]) {
            size_t k = e - s < sizeof(p->te_unknown) - 1 ? e - s : sizeof(p->te_unknown) - 1;
            memcpy(p->te_unknown, v + s, k);
            p->te_unknown[k] = '\0';
        }
        p->te_chunked_not_last = !chunked;
        if (i == n)
            return;
        if (v[i] != ',') {
            p->te_bad_syntax = true;
            return;
        }
        i++;
    }
}

/* Where a field value's bytes from c[k] stop being plain for certain:
 * eight at a time while no byte of a word is below 0x20 or DEL (swar.h's
 * "any" is exact). From the first word that may hold a tab or a control
 * byte on, the byte loop after it judges. */
static size_t value_plain_end(const unsigned char *c, size_t k, size_t len)
{
    for (; k + 8 <= len; k += 8) {
        uint64_t w;
        memcpy(&w, c + k, 8);
        if (tile_swar_below(w, 0x20) | tile_swar_eq(w, 0x7f))
            break;
    }
    return k;
}

/* field-line = field-name ":" OWS field-value OWS (RFC 9112 5). Returns the
 * name's length, 0 after a refusal. */
static size_t field_line(struct tiled_h1 *p, const unsigned char *c, size_t len, const char *what)
{
    if (is_ows(c[0])) {
        refuse(p, 400, "a %s line starts with whitespace (obs-fold, RFC 9112 5.2): send each field on one line",
               what);
        return 0;
    }
    size_t i = 0;
    while (i < len && (CLS[c[i]] & T))
        i++;
    if (i < len && is_ows(c[i]) && i > 0) {
        refuse(p, 400, "whitespace between the %s name '%.*s' and its colon (RFC 9112 5.1)", what,
               (int)(i < 40 ? i : 40), (const char *)c);
        return 0;
    }
    if (i == 0 || i == len || c[i] != ':') {
        if (i < len && c[i] != ':' && !(CLS[c[i]] & V) && !is_ows(c[i]))
            refuse(p, 400, "a %s name contains the control byte 0x%02x", what, c[i]);
        else
            refuse(p, 400, "malformed %s line (expected 'name: value')", what);
        return 0;
    }
    for (size_t k = value_plain_end(c, i + 1, len); k < len; k++) {
        if (!(CLS[c[k]] & V) && !is_ows(c[k])) {
            refuse(p, 400, "the %s '%.*s' contains the control byte 0x%02x (NUL, CR and LF are not allowed in a value)",
                   what, (int)(i < 40 ? i : 40), (const char *)c, c[k]);
            return 0;
        }
    }
    return i;
}

static void head_field(struct tiled_h1 *p, const unsigned char *c, size_t len)
{
    if (!count_fields(p, 1))
        return;
    size_t name = field_line(p, c, len, "header");
    if (!name)
        return;
    size_t vs = name + 1, ve = len;
    while (vs < len && is_ows(c[vs]))
        vs++;
    while (ve > vs && is_ows(c[ve - 1]))
        ve--;
    const unsigned char *v = c + vs;
    size_t n = ve - vs;
    if (name == 4 && strncasecmp((const char *)c, "host", 4) == 0) {
        p->host_lines++;
        if (!host_valid(v, n))
            refuse(p, 400, "invalid Host header '%.*s' (expected host[:port])", (int)(n < 60 ? n : 60),
                   (const char *)v);
    } else if (name == 14 && strncasecmp((const char *)c, "content-length", 14) == 0) {
        p->cl_lines++;
        size_t d = 0;
        uint64_t value = 0;
        while (d < n && v[d] >= '0' && v[d] <= '9') {
            if (value > (UINT64_C(1) << 62) / 10) {
                refuse(p, 413, "Content-Length %.*s is too large", (int)(n < 40 ? n : 40), (const char *)v);
                return;
            }
            value = value * 10 + (uint64_t)(v[d++] - '0');
        }
        if (d == 0 || d != n || ve != len)
            refuse(p, 400, "Content-Length '%.*s' is not a number of bytes (one value, digits only)",
                   (int)(len - vs < 40 ? len - vs : 40), (const char *)v);
        p->content_length = value;
    } else if (name == 17 && strncasecmp((const char *)c, "transfer-encoding", 17) == 0) {
        transfer_encoding(p, v, n, ve != len);
    }
}

/* The empty line: the head is complete; its framing decides what follows. */
static void head_end(struct tiled_h1 *p, uint64_t at)
{
    if (p->host_lines > 1)
        refuse(p, 400, "the request has %u Host headers (RFC 9112 3.2: exactly one)", p->host_lines);
    else if (p->host_lines == 0 && !p->http10)
        refuse(p, 400, "the Host header is missing (required since HTTP/1.1)");
    else if (p->cl_lines && p->te_lines)
        refuse(p, 400, "both Content-Length and Transfer-Encoding: the body's length is ambiguous (RFC 9112 6.1)");
    else if (p->te_lines && p->http10)
        refuse(p, 400, "Transfer-Encoding in an HTTP/1.0 request (RFC 9112 6.1)");
    else if (p->te_lines && p->te_bad_syntax)
        refuse(p, 400, "malformed Transfer-Encoding (send exactly 'Transfer-Encoding: chunked')");
    else if (p->te_lines && (p->te_chunked_not_last || !p->te_seen_chunked))
        refuse(p, 400, "chunked is not the final transfer coding, so the body's length is unknown (RFC 9112 6.3)");
    else if (p->te_chunked_twice)
        refuse(p, 400, "the chunked transfer coding is applied more than once");
    else if (p->te_unknown[0])
        refuse(p, 501, "unsupported transfer coding '%s' (only chunked is supported)", p->te_unknown);
    else if (p->te_lines && !p->te_chunked_only)
        refuse(p, 400, "Transfer-Encoding over several lines (send one 'Transfer-Encoding: chunked')");
    else if (p->cl_lines > 1)
        refuse(p, 400, "the request has %u Content-Length headers; send one", p->cl_lines);
    if (p->status)
        return;
    p->accepted++;
    tell(p, TILED_H1_EV_HEAD, p->line_start, at);
    if (p->te_lines) {
        p->state = S_CHUNK_LINE;
        p->unit = TILED_H1_UNIT_CHUNK;
        p->unit_start = at;
    } else if (p->content_length) {
        p->state = S_BODY;
        p->remaining = p->content_length;
        p->unit = TILED_H1_UNIT_NONE;
        p->unit_start = at;
    } else {
        tell(p, TILED_H1_EV_END, p->line_start, at);
        new_head(p, at);
    }
}

/* chunk-ext = *( ";" name [ "=" ( token / quoted-string ) ] ) (RFC 9112
 * 7.1.1) from c[i], without the optional whitespace (BWS) the RFC allows
 * around ';' and '=': llhttp refuses it, and an extension is never needed.
 * Returns whether c[i..len) is that. */
static bool chunk_ext(const unsigned char *c, size_t i, size_t len)
{
    while (i < len) {
        if (c[i++] != ';' || i == len || !(CLS[c[i]] & T))
            return false;
        while (i < len && (CLS[c[i]] & T))
            i++;
        if (i == len || c[i] == ';')
            continue;
        if (c[i++] != '=' || i == len)
            return false;
        if (CLS[c[i]] & T) {
            while (i < len && (CLS[c[i]] & T))
                i++;
            continue;
        }
        if (c[i++] != '"')
            return false;
        for (;; i++) { /* qdtext or a quoted-pair; CTLs are refused before */
            if (i == len)
                return false;
            if (c[i] == '"')
                break;
            if (c[i] == '\\' && ++i == len)
                return false;
        }
        i++;
    }
    return true;
}

/* chunk = chunk-size [ chunk-ext ] CRLF (RFC 9112 7.1); no whitespace before
 * ';', which some parsers do not read as the size's end (libmicrohttpd
 * 0.9.75 among them). */
static void chunk_line(struct tiled_h1 *p, const unsigned char *c, size_t len, uint64_t at)
{
    size_t i = 0, sig = 0;
    uint64_t size = 0;
    while (i < len && (CLS[c[i]] & X)) {
        unsigned d = c[i] <= '9' ? (unsigned)(c[i] - '0') : (unsigned)((c[i] | 0x20) - 'a' + 10);
        if (sig || d)
            sig++;
        size = size << 4 | d;
        i++;
    }
    if (sig > 15) {
        refuse(p, 400, "chunk size %.*s is too large", (int)(i < 40 ? i : 40), (const char *)c);
        return;
    }
    if (i == 0 || (i < len && c[i] != ';')) {
        refuse(p, 400, "malformed chunk size line (expected hex digits, then ';' extensions or CRLF)");
        return;
    }
    for (size_t k = i; k < len; k++) {
        if (!(CLS[c[k]] & V) && !is_ows(c[k])) {
            refuse(p, 400, "a chunk extension contains the control byte 0x%02x", c[k]);
            return;
        }
    }
    if (!chunk_ext(c, i, len)) {
        refuse(p, 400, "malformed chunk extension (expected ';name' or ';name=value' without spaces, RFC 9112 7.1.1)");
        return;
    }
    if (size == 0) {
        p->state = S_TRAILERS; /* the unit goes on to the trailers' end */
        p->trailers = true;
        return;
    }
    p->state = S_CHUNK_DATA;
    p->remaining = size;
    p->unit = TILED_H1_UNIT_NONE;
    p->unit_start = at;
}

/* A line of `have` bytes (with its LF when it is complete) starting at `at`:
 * refused once it can no longer fit. Limits count every byte. */
static void check_partial(struct tiled_h1 *p, size_t have, uint64_t at)
{
    uint64_t unit_len = at + have - p->unit_start;
    switch (p->state) {
    case S_HEAD:
        /* Whichever limit the line passes first as it grows, so that the
         * verdict does not depend on how much of it has arrived: empty
         * lines before a request count towards its head. */
        if (have > TILED_H1_LINE_MAX && at - p->unit_start + TILED_H1_LINE_MAX <= TILED_H1_HEAD_MAX)
            refuse(p, 414, "the request line is over %d bytes", TILED_H1_LINE_MAX);
        else if (unit_len > TILED_H1_HEAD_MAX)
            refuse(p, 431, "the request head is over %d bytes", TILED_H1_HEAD_MAX);
        break;
    case S_FIELDS:
        if (unit_len > TILED_H1_HEAD_MAX)
            refuse(p, 431, "the request head is over %d bytes", TILED_H1_HEAD_MAX);
        break;
    case S_CHUNK_LINE:
    case S_CHUNK_END:
        if (have > TILED_H1_CHUNK_LINE_MAX)
            refuse(p, 400, "a chunk size line is over %d bytes (chunk extensions are bounded)",
                   TILED_H1_CHUNK_LINE_MAX);
        break;
    case S_TRAILERS:
        if (unit_len > TILED_H1_TRAILER_MAX)
            refuse(p, 431, "the trailer section is over %d bytes", TILED_H1_TRAILER_MAX);
        break;
    default:
        break;
    }
}

size_t tiled_h1_feed(struct tiled_h1 *p, const unsigned char *data, size_t n)
{
    const uint64_t base = p->pos;
    size_t i = 0;
    while (i < n && !p->status) {
        if (p->state == S_BODY || p->state == S_CHUNK_DATA) {
            size_t take = p->remaining < n - i ? (size_t)p->remaining : n - i;
            if (take)
                tell(p, TILED_H1_EV_DATA, base + i, base + i + take);
            i += take;
            p->remaining -= take;
            if (p->remaining)
                continue;
            if (p->state == S_BODY) {
                tell(p, TILED_H1_EV_END, p->line_start, base + i);
                new_head(p, base + i);
            } else {
                p->state = S_CHUNK_END;
                p->unit = TILED_H1_UNIT_CHUNK_NEXT;
                p->unit_start = base + i;
            }
            continue;
        }
        const unsigned char *lf = memchr(data + i, '\n', n - i);
        if (!lf) {
            check_partial(p, n - i, base + i);
            break;
        }
        size_t end = (size_t)(lf - data);
        const unsigned char *line = data + i;
        size_t len = end - i;
        uint64_t line_at = base + i;
        check_partial(p, len + 1, line_at); /* the limits, on a complete line (with its LF) too */
        if (p->status)
            break;
        if (len == 0 || line[len - 1] != '\r') {
            refuse(p, 400, "a line ends in a bare LF (HTTP/1.1 lines end in CRLF)");
            break;
        }
        len--;
        i = end + 1;
        switch (p->state) {
        case S_HEAD:
            if (len == 0) /* an empty line before a request is ignored (RFC 9112 2.2) */
                break;
            p->line_start = line_at;
            request_line(p, line, len, (size_t)(line_at - p->unit_start));
            p->state = S_FIELDS;
            break;
        case S_FIELDS:
            if (len == 0)
                head_end(p, base + i);
            else
                head_field(p, line, len);
            break;
        case S_CHUNK_LINE:
            chunk_line(p, line, len, base + i);
            break;
        case S_CHUNK_END:
            if (len)
                refuse(p, 400, "a chunk's data is longer than its size (no CRLF after it)");
            else
                p->state = S_CHUNK_LINE;
            break;
        case S_TRAILERS:
            if (len == 0) {
                tell(p, TILED_H1_EV_END, p->line_start, base + i);
                new_head(p, base + i);
            } else if (count_fields(p, 1)) {
                field_line(p, line, len, "trailer");
            }
            break;
        default:
            break;
        }
    }
    if (p->status)
        p->state = S_DEAD;
    p->pos = base + i;
    return i;
}
