/* reply.c - building replies (see reply.h) and the Server-Timing value. */
#include "reply.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

void tiled_reply_header(struct tiled_reply *r, const char *name, const char *value)
{
    if (r->nheaders >= (int)(sizeof(r->headers) / sizeof(r->headers[0])))
        return;
    r->headers[r->nheaders][0] = strdup(name);
    r->headers[r->nheaders][1] = strdup(value);
    r->nheaders++;
}

void tiled_reply_set_body(struct tiled_reply *r, char *body, uint64_t len, void (*release)(void *body))
{
    if (r->release_body)
        r->release_body(r->body);
    else
        free(r->body);
    r->body = body;
    r->body_len = body ? len : 0;
    r->release_body = release;
}

void tiled_reply_json(struct tiled_reply *r, int status, const char *json)
{
    r->status = status;
    tiled_copy_str(r->content_type, sizeof(r->content_type), "application/json");
    size_t len = strlen(json);
    char *body = malloc(len + 1);
    if (body)
        memcpy(body, json, len + 1);
    tiled_reply_set_body(r, body, len, NULL);
}

/* Length of the valid UTF-8 sequence at p (0 if invalid). */
static size_t utf8_seq(const unsigned char *p)
{
    size_t n = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 && p[0] < 0xe0 ? 2 : 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    }
    if ((n == 3 && p[0] == 0xe0 && p[1] < 0xa0) || (n == 3 && p[0] == 0xed && p[1] >= 0xa0) ||
        (n == 4 && p[0] == 0xf0 && p[1] < 0x90) || (n == 4 && p[0] == 0xf4 && p[1] >= 0x90))
        return 0; /* overlong, surrogate or above U+10FFFF */
    return n;
}

/* Appends s to out as JSON string content (quotes not included). Messages
 * quote request text, which may be cut mid-character or not be UTF-8 at
 * all: such bytes become U+FFFD so the body is always valid JSON. */
static size_t json_escape_into(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && n + 7 < cap;) {
        size_t seq = *p >= 0x80 ? utf8_seq(p) : 1;
        if (*p == '"' || *p == '\\') {
            out[n++] = '\\';
            out[n++] = (char)*p++;
        } else if (*p < 0x20 || seq == 0) {
            n += (size_t)snprintf(out + n, cap - n, *p < 0x20 ? "\\u%04x" : "\\ufffd", *p);
            p++;
        } else {
            memcpy(out + n, p, seq);
            n += seq;
            p += seq;
        }
    }
    out[n] = '\0';
    return n;
}

void tiled_reply_error(struct tiled_reply *r, int status, const char *fmt, ...)
{
    char msg[512], esc[1100], json[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_escape_into(msg, esc, sizeof(esc));
    snprintf(json, sizeof(json), "{\"error\":\"%s\"}", esc);
    tiled_reply_json(r, status, json);
}

void tiled_reply_tile_error(struct tiled_reply *r, const struct tile_error *e)
{
    static const int status_of[TILE_ERRCODE_COUNT] = {
        [TILE_OK] = 500,          [TILE_EINVAL] = 400, [TILE_ETOOBIG] = 413,       [TILE_ENOMEM] = 503,
        [TILE_EIO] = 500,         [TILE_EUNSUPPORTED] = 400, [TILE_ENOTACCEPT] = 406,
    };
    int status = (unsigned)e->code < TILE_ERRCODE_COUNT ? status_of[e->code] : 500;
    tiled_reply_error(r, status, "%s", e->text[0] ? e->text : "internal error");
}

void tiled_reply_free(struct tiled_reply *r)
{
    for (int i = 0; i < r->nheaders; i++) {
        free(r->headers[i][0]);
        free(r->headers[i][1]);
    }
    r->nheaders = 0;
    tiled_reply_set_body(r, NULL, 0, NULL);
    if (r->stream)
        r->release_stream(r->stream);
    r->stream = NULL;
}

/* Writes us/1000 with three decimals ("12.345"); returns its length. */
static size_t format_ms(char *p, uint64_t us)
{
    char digits[24];
    int n = 0;
    uint64_t ms = us / 1000, frac = us % 1000;
    do {
        digits[n++] = (char)('0' + ms % 10);
        ms /= 10;
    } while (ms);
    size_t len = 0;
    while (n)
        p[len++] = digits[--n];
    p[len++] = '.';
    p[len++] = (char)('0' + frac / 100);
    p[len++] = (char)('0' + frac / 10 % 10);
    p[len++] = (char)('0' + frac % 10);
    return len;
}

/* "name;dur=1.234" with the microseconds printed as milliseconds. */
static char *put_duration(char *p, const char *name, uint64_t us)
{
    size_t n = strlen(name);
    memcpy(p, name, n);
    p += n;
    return p + format_ms(p, us);
}

void tiled_server_timing(const struct tile_timings *tm, char *buf, size_t cap)
{
    if (cap < 160) {
        buf[0] = '\0';
        return;
    }
    char *p = buf;
    p = put_duration(p, "queue;dur=", tm->queue_us);
    p = put_duration(p, ", decode;dur=", tm->decode_us);
    p = put_duration(p, ", tile;dur=", tm->tile_us);
    p = put_duration(p, ", encode;dur=", tm->encode_us);
    p = put_duration(p, ", total;dur=", tm->total_us);
    *p = '\0';
}

