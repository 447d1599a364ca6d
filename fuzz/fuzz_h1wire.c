/* fuzz_h1wire.c - the HTTP/1.1 request framer (server/http/h1wire.h) over
 * any byte stream.
 *
 * The input is the stream a client sends. It is fed whole, then in cuts
 * chosen from the input's hash (and byte by byte when short): every way must
 * give the same verdict and the same boundaries (harness/h1drive.h), as the
 * receive hook sees the stream in whatever pieces recv() returns. Each
 * message the framer accepts is then checked to be unambiguous, from the raw
 * bytes and independently of h1wire.c: a head of CRLF lines ending in an
 * empty line, no obs-fold, NUL or bare CR/LF, at most one of Content-Length
 * and Transfer-Encoding, on one line; a Content-Length body exactly that
 * long; a chunked body that a plain chunk decoder here ends at the same
 * byte, with the same data; and nothing but empty lines between messages.
 * A mismatch aborts, so libFuzzer records the input. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "harness/h1drive.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct h1drive whole, piecewise;

#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "fuzz_h1wire: " __VA_ARGS__);                                                             \
            fputc('\n', stderr);                                                                                       \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

static uint64_t fnv(const uint8_t *d, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ d[i]) * 1099511628211ull;
    return h;
}

static void same_as_whole(const char *how)
{
    CHECK(h1drive_same(&whole, &piecewise), "%s: status %d '%s' pos %llu %zu events; whole: status %d '%s' pos %llu %zu events",
          how, piecewise.p.status, piecewise.p.message, (unsigned long long)piecewise.p.pos, piecewise.n_ev,
          whole.p.status, whole.p.message, (unsigned long long)whole.p.pos, whole.n_ev);
}

/* The value of a field line s[0..n) named `name` (case-insensitive, the
 * colon right after it), trimmed of OWS; NULL when it is another field. */
static const uint8_t *field_value(const uint8_t *s, size_t n, const char *name, size_t *vlen)
{
    size_t k = strlen(name);
    if (n <= k || s[k] != ':' || strncasecmp((const char *)s, name, k) != 0)
        return NULL;
    size_t a = k + 1, b = n;
    while (a < b && (s[a] == ' ' || s[a] == '\t'))
        a++;
    while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t'))
        b--;
    *vlen = b - a;
    return s + a;
}

/* One accepted message: head [h0, h1), body events ev[0..nd), end e. */
static void check_message(const uint8_t *s, uint64_t h0, uint64_t h1, const struct h1drive_event *ev, size_t nd,
                          uint64_t e)
{
    CHECK(h0 < h1 && h1 <= e, "message bounds %llu %llu %llu", (unsigned long long)h0, (unsigned long long)h1,
          (unsigned long long)e);
    size_t hl = (size_t)(h1 - h0);
    const uint8_t *h = s + h0;
    CHECK(hl >= 4 && memcmp(h + hl - 4, "\r\n\r\n", 4) == 0, "a head not ending in an empty line");
    unsigned cl = 0, te = 0, host = 0;
    uint64_t cl_value = 0;
    bool chunked = false, http10 = false;
    size_t line = 0;
    for (size_t i = 0; i + 2 < hl; line++) {
        const uint8_t *lf = memchr(h + i, '\n', hl - i);
        CHECK(lf, "a head line without LF");
        size_t end = (size_t)(lf - h);
        CHECK(end > i && h[end - 1] == '\r', "a bare LF in an accepted head");
        const uint8_t *l = h + i;
        size_t n = end - 1 - i;
        CHECK(!memchr(l, '\r', n) && !memchr(l, '\0', n), "CR or NUL inside an accepted head line");
        if (line == 0) {
            const uint8_t *sp = memchr(l, ' ', n);
            CHECK(sp && sp > l, "an accepted request line without a method");
            CHECK(n >= 8 && memcmp(l + n - 8, "HTTP/1.", 7) == 0, "an accepted request line without HTTP/1.x");
            http10 = l[n - 1] == '0';
        } else {
            CHECK(n > 0 && l[0] != ' ' && l[0] != '\t', "obs-fold in an accepted head");
            const uint8_t *colon = memchr(l, ':', n);
            CHECK(colon && colon > l && colon[-1] != ' ' && colon[-1] != '\t', "an accepted field without name:");
            size_t vl;
            const uint8_t *v;
            if ((v = field_value(l, n, "content-length", &vl))) {
                cl++;
                CHECK(vl > 0, "an accepted empty Content-Length");
                cl_value = 0;
                for (size_t k = 0; k < vl; k++) { /* leading zeros: any number */
                    CHECK(v[k] >= '0' && v[k] <= '9', "an accepted Content-Length with a non-digit");
                    CHECK(cl_value < UINT64_MAX / 16, "an accepted Content-Length past 64 bits");
                    cl_value = cl_value * 10 + (uint64_t)(v[k] - '0');
                }
            } else if ((v = field_value(l, n, "transfer-encoding", &vl))) {
                te++;
                chunked = vl == 7 && strncasecmp((const char *)v, "chunked", 7) == 0;
                CHECK(chunked, "an accepted Transfer-Encoding other than chunked");
            } else if (field_value(l, n, "host", &vl)) {
                host++;
            }
        }
        i = end + 1;
    }
    CHECK(cl + te <= 1, "an accepted head with %u Content-Length and %u Transfer-Encoding lines", cl, te);
    CHECK(host == 1 || (http10 && host == 0), "an accepted head with %u Host lines", host);
    CHECK(!(http10 && te), "Transfer-Encoding accepted in HTTP/1.0");
    if (!cl && !te) {
        CHECK(h1 == e && nd == 0, "a body without framing");
        return;
    }
    if (cl) {
        CHECK(e - h1 == cl_value, "a Content-Length body of %llu bytes for %llu", (unsigned long long)(e - h1),
              (unsigned long long)cl_value);
        CHECK(nd == (cl_value != 0), "%zu body pieces", nd);
        if (nd)
            CHECK(ev[0].from == h1 && ev[0].to == e, "the body's bytes");
        return;
    }
    /* A plain chunk decoder: hex size, extensions to CRLF, data, CRLF; the
     * last chunk, trailer lines, an empty line. */
    uint64_t i = h1;
    size_t k = 0;
    for (;;) {
        uint64_t size = 0;
        int digits = 0;
        for (; i < e; i++, digits++) {
            uint8_t c = s[i];
            int d = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
            if (d < 0)
                break;
            CHECK(size >> 60 == 0, "an accepted chunk size past 60 bits");
            size = size << 4 | (uint64_t)d;
        }
        CHECK(digits > 0, "a chunk without a size");
        while (i < e && s[i] != '\n')
            i++;
        CHECK(i < e && s[i - 1] == '\r', "a chunk-size line without CRLF");
        i++;
        if (size == 0)
            break;
        CHECK(k < nd && ev[k].from == i && ev[k].to == i + size, "chunk data where the decoder has none");
        k++;
        i += size;
        CHECK(i + 2 <= e && s[i] == '\r' && s[i + 1] == '\n', "no CRLF after a chunk's data");
        i += 2;
    }
    CHECK(k == nd, "%zu body pieces for %zu chunks", nd, k);
    for (;;) {
        const uint8_t *lf = memchr(s + i, '\n', (size_t)(e - i));
        CHECK(lf, "a trailer line past the message's end");
        uint64_t end = (uint64_t)(lf - s);
        CHECK(end > i && s[end - 1] == '\r', "a bare LF in a trailer");
        CHECK(s[i] != ' ' && s[i] != '\t', "obs-fold in a trailer");
        bool empty = end == i + 1;
        i = end + 1;
        if (empty)
            break;
    }
    CHECK(i == e, "the chunked body ends at %llu, the framer says %llu", (unsigned long long)i, (unsigned long long)e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size copy, so that reads past the stream are caught. */
    uint8_t *s = malloc(size ? size : 1);
    if (!s)
        return 0;
    memcpy(s, data, size);

    h1drive_steps(&whole, s, size, 0);
    CHECK(!whole.overflow, "more events than recorded");
    uint64_t h = fnv(s, size);
    if (size <= 1024) {
        h1drive_steps(&piecewise, s, size, 1);
        same_as_whole("byte by byte");
    }
    h1drive_steps(&piecewise, s, size, 1 + (size_t)(h % 97));
    same_as_whole("in steps");
    size_t cuts[64], nc = 0;
    uint64_t x = h | 1;
    for (size_t at = 0; nc < 64 && size;) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        at += 1 + (size_t)(x % (size / 16 + 8));
        if (at >= size)
            break;
        cuts[nc++] = at;
    }
    h1drive_cuts(&piecewise, s, size, cuts, nc);
    same_as_whole("in cuts");

    const struct tiled_h1 *p = &whole.p;
    CHECK(p->unit_start <= p->pos && p->pos <= size, "unit_start %llu pos %llu", (unsigned long long)p->unit_start,
          (unsigned long long)p->pos);
    if (p->status) {
        CHECK(p->status == 400 || p->status == 413 || p->status == 414 || p->status == 431 || p->status == 501 ||
                  p->status == 505,
              "status %d", p->status);
        CHECK(p->message[0], "a refusal without a message");
    }
    /* The messages: H, D..., E, with only empty lines before each. */
    uint64_t prev_end = 0;
    uint32_t messages = 0;
    for (size_t k = 0; k < whole.n_ev;) {
        CHECK(whole.ev[k].kind == 'H', "event %zu is %c, not a head", k, whole.ev[k].kind);
        uint64_t h0 = whole.ev[k].from, h1 = whole.ev[k].to;
        CHECK(h0 >= prev_end && (h0 - prev_end) % 2 == 0, "a message at %llu after %llu", (unsigned long long)h0,
              (unsigned long long)prev_end);
        for (uint64_t i = prev_end; i < h0; i += 2)
            CHECK(s[i] == '\r' && s[i + 1] == '\n', "bytes other than empty lines between messages");
        size_t d0 = ++k;
        while (k < whole.n_ev && whole.ev[k].kind == 'D')
            k++;
        messages++;
        if (k == whole.n_ev)
            break; /* its body is still arriving, or was refused */
        CHECK(whole.ev[k].kind == 'E' && whole.ev[k].from == h0, "a message without its end");
        check_message(s, h0, h1, whole.ev + d0, k - d0, whole.ev[k].to);
        prev_end = whole.ev[k].to;
        k++;
    }
    CHECK(messages == p->accepted, "%u heads seen, %u accepted", messages, p->accepted);
    free(s);
    return 0;
}
