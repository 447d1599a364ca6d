/* h2_replies.c - see h2_replies.h. */
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "h2_replies.h"

#define FRAME_HEAD 9
#define GRPC_PREFIX 5

/* What one stream's reply has been so far. */
struct reply {
    int32_t id;
    bool headers; /* the response headers came */
    bool grpc;    /* they said :status 200, content-type application/grpc */
    bool ended, reset;
    uint64_t data; /* DATA payload bytes */
    uint8_t prefix[GRPC_PREFIX];
    uint64_t msg_len;
};

/* The fields of one header block that the rules look at. */
struct fields {
    bool status, status_200, grpc_type, grpc_status;
};

static struct {
    bool verbose;
    nghttp2_hd_inflater *hd;
    uint8_t *buf; /* bytes of a frame not complete yet */
    size_t len, cap;
    struct reply *replies;
    size_t nreplies, replies_cap;
    /* The header block being read: HEADERS, then CONTINUATION frames up to
     * END_HEADERS. */
    bool block_open, block_ends_stream;
    int32_t block_id;
    uint8_t *block;
    size_t block_len, block_cap;
} rd;

static void reserve(uint8_t **buf, size_t *cap, size_t need)
{
    if (*cap >= need)
        return;
    size_t c = *cap ? *cap : 4096;
    while (c < need)
        c *= 2;
    uint8_t *nb = realloc(*buf, c);
    FUZZ_CHECK(nb != NULL, "out of memory");
    *buf = nb;
    *cap = c;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void h2_replies_begin(bool verbose)
{
    FUZZ_CHECK(nghttp2_hd_inflate_new(&rd.hd) == 0, "out of memory");
    rd.verbose = verbose;
    rd.len = rd.nreplies = rd.block_len = 0;
    rd.block_open = false;
}

void h2_replies_end(void)
{
    nghttp2_hd_inflate_del(rd.hd);
    free(rd.buf);
    free(rd.replies);
    free(rd.block);
    memset(&rd, 0, sizeof(rd));
}

static struct reply *reply_of(int32_t id)
{
    for (size_t i = 0; i < rd.nreplies; i++) {
        if (rd.replies[i].id == id)
            return &rd.replies[i];
    }
    if (rd.nreplies == rd.replies_cap) {
        rd.replies_cap = rd.replies_cap ? rd.replies_cap * 2 : 16;
        rd.replies = realloc(rd.replies, rd.replies_cap * sizeof(*rd.replies));
        FUZZ_CHECK(rd.replies != NULL, "out of memory");
    }
    struct reply *r = &rd.replies[rd.nreplies++];
    memset(r, 0, sizeof(*r));
    r->id = id;
    return r;
}

static bool is(const nghttp2_nv *nv, const char *name)
{
    return nv->namelen == strlen(name) && memcmp(nv->name, name, nv->namelen) == 0;
}

static void note_field(struct fields *f, const nghttp2_nv *nv, int32_t id)
{
    static const char grpc_type[] = "application/grpc";
    if (rd.verbose)
        fprintf(stderr, "      %.*s: %.*s\n", (int)nv->namelen, nv->name, (int)nv->valuelen, nv->value);
    if (is(nv, ":status")) {
        f->status = true;
        f->status_200 = nv->valuelen == 3 && memcmp(nv->value, "200", 3) == 0;
    } else if (is(nv, "content-type")) {
        f->grpc_type = nv->valuelen >= sizeof(grpc_type) - 1 && memcmp(nv->value, grpc_type, sizeof(grpc_type) - 1) == 0;
    } else if (is(nv, "grpc-status")) {
        unsigned code = 0;
        FUZZ_CHECK(nv->valuelen > 0 && nv->valuelen <= 2, "stream %d: grpc-status '%.*s'", (int)id, (int)nv->valuelen,
                   nv->value);
        for (size_t i = 0; i < nv->valuelen; i++) {
            FUZZ_CHECK(nv->value[i] >= '0' && nv->value[i] <= '9', "stream %d: grpc-status '%.*s'", (int)id,
                       (int)nv->valuelen, nv->value);
            code = code * 10 + (unsigned)(nv->value[i] - '0');
        }
        FUZZ_CHECK(code <= 16, "stream %d: grpc-status %u is no gRPC code", (int)id, code);
        f->grpc_status = true;
    }
}

static void decode_block(struct fields *f, int32_t id)
{
    const uint8_t *p = rd.block;
    size_t n = rd.block_len;
    for (;;) {
        nghttp2_nv nv;
        int flags = 0;
        ssize_t used = nghttp2_hd_inflate_hd2(rd.hd, &nv, &flags, p, n, 1);
        FUZZ_CHECK(used >= 0, "stream %d: the server's header block does not decode: %s", (int)id,
                   nghttp2_strerror((int)used));
        p += used;
        n -= (size_t)used;
        if (flags & NGHTTP2_HD_INFLATE_EMIT)
            note_field(f, &nv, id);
        if (flags & NGHTTP2_HD_INFLATE_FINAL) {
            nghttp2_hd_inflate_end_headers(rd.hd);
            return;
        }
        FUZZ_CHECK(used > 0 || (flags & NGHTTP2_HD_INFLATE_EMIT), "stream %d: a header block that does not end",
                   (int)id);
    }
}

/* A complete header block: the response headers, or the trailers. */
static void headers_read(int32_t id, bool end_stream)
{
    struct fields f = {0};
    decode_block(&f, id);
    struct reply *r = reply_of(id);
    FUZZ_CHECK(!r->ended && !r->reset, "stream %d: HEADERS after the stream %s", (int)id,
               r->reset ? "was reset" : "ended");
    if (!r->headers) {
        FUZZ_CHECK(f.status, "stream %d: response headers without :status", (int)id);
        r->headers = true;
        r->grpc = f.status_200 && f.grpc_type;
        FUZZ_CHECK(r->grpc || end_stream, "stream %d: an HTTP refusal that does not end the stream", (int)id);
        FUZZ_CHECK(!r->grpc || !end_stream || f.grpc_status, "stream %d: Trailers-Only without grpc-status", (int)id);
    } else {
        FUZZ_CHECK(end_stream && !f.status && f.grpc_status,
                   "stream %d: trailers need END_STREAM and grpc-status, and no :status", (int)id);
        FUZZ_CHECK(r->data >= GRPC_PREFIX && r->data == GRPC_PREFIX + r->msg_len,
                   "stream %d: trailers after %llu bytes of a message (its prefix says %llu)", (int)id,
                   (unsigned long long)r->data, (unsigned long long)(GRPC_PREFIX + r->msg_len));
    }
    r->ended = end_stream;
}

static void data_read(int32_t id, uint8_t flags, const uint8_t *p, size_t n)
{
    struct reply *r = reply_of(id);
    FUZZ_CHECK(r->headers && !r->ended && !r->reset, "stream %d: DATA %s", (int)id,
               !r->headers ? "before the response headers" : "after the stream ended");
    FUZZ_CHECK(r->grpc, "stream %d: DATA in a response that is not gRPC", (int)id);
    FUZZ_CHECK(!(flags & (NGHTTP2_FLAG_PADDED | NGHTTP2_FLAG_END_STREAM)),
               "stream %d: DATA with padding or END_STREAM (a gRPC reply ends with its trailers)", (int)id);
    /* A message, or (a streaming call: ModelStreamInfer) messages one
     * after another: bytes after a complete message begin the next. */
    while (n > 0) {
        if (r->data >= GRPC_PREFIX && r->data == GRPC_PREFIX + r->msg_len)
            r->data = 0;
        size_t take;
        if (r->data < GRPC_PREFIX) {
            take = GRPC_PREFIX - r->data < n ? GRPC_PREFIX - r->data : n;
            memcpy(r->prefix + r->data, p, take);
            r->data += take;
            if (r->data == GRPC_PREFIX) {
                FUZZ_CHECK(r->prefix[0] == 0, "stream %d: a reply message flagged compressed", (int)id);
                r->msg_len = be32(r->prefix + 1);
            }
        } else {
            uint64_t left = GRPC_PREFIX + r->msg_len - r->data;
            take = left < n ? (size_t)left : n;
            r->data += take;
        }
        p += take;
        n -= take;
    }
}

static void show_frame(uint8_t type, uint8_t flags, int32_t id, const uint8_t *p, size_t len)
{
    static const char *const names[] = {"DATA", "HEADERS", "PRIORITY", "RST_STREAM",    "SETTINGS",
                                        "PUSH", "PING",    "GOAWAY",   "WINDOW_UPDATE", "CONTINUATION"};
    fprintf(stderr, "  server: %s stream %d flags 0x%02x, %zu bytes\n", type < 10 ? names[type] : "?", (int)id, flags,
            len);
    size_t code_at = type == NGHTTP2_RST_STREAM ? 0 : type == NGHTTP2_GOAWAY ? 4 : len;
    if (code_at + 4 <= len)
        fprintf(stderr, "      error %s: %.*s\n", nghttp2_http2_strerror(be32(p + code_at)), (int)(len - code_at - 4),
                (const char *)p + code_at + 4);
}

static void block_add(const uint8_t *p, size_t n, bool end_headers)
{
    reserve(&rd.block, &rd.block_cap, rd.block_len + n);
    memcpy(rd.block + rd.block_len, p, n);
    rd.block_len += n;
    if (end_headers) {
        rd.block_open = false;
        headers_read(rd.block_id, rd.block_ends_stream);
    }
}

static void frame_read(const uint8_t *f, size_t len)
{
    uint8_t type = f[3], flags = f[4];
    int32_t id = (int32_t)(be32(f + 5) & 0x7fffffffu);
    const uint8_t *p = f + FRAME_HEAD;
    if (rd.verbose)
        show_frame(type, flags, id, p, len);
    FUZZ_CHECK(!rd.block_open || (type == NGHTTP2_CONTINUATION && id == rd.block_id),
               "a header block of stream %d interrupted by a frame of type %u", (int)rd.block_id, type);
    if (type == NGHTTP2_DATA || type == NGHTTP2_HEADERS)
        FUZZ_CHECK(id % 2 == 1, "%s on stream %d, which no client opened", type ? "HEADERS" : "DATA", (int)id);
    if (type == NGHTTP2_DATA) {
        data_read(id, flags, p, len);
    } else if (type == NGHTTP2_HEADERS) {
        FUZZ_CHECK(!(flags & (NGHTTP2_FLAG_PADDED | NGHTTP2_FLAG_PRIORITY)), "HEADERS with padding or priority");
        rd.block_open = true;
        rd.block_id = id;
        rd.block_ends_stream = flags & NGHTTP2_FLAG_END_STREAM;
        rd.block_len = 0;
        block_add(p, len, flags & NGHTTP2_FLAG_END_HEADERS);
    } else if (type == NGHTTP2_CONTINUATION) {
        FUZZ_CHECK(rd.block_open, "CONTINUATION without a header block, on stream %d", (int)id);
        block_add(p, len, flags & NGHTTP2_FLAG_END_HEADERS);
    } else if (type == NGHTTP2_RST_STREAM && id != 0) {
        reply_of(id)->reset = true;
    }
}

void h2_replies_read(const uint8_t *p, size_t n)
{
    reserve(&rd.buf, &rd.cap, rd.len + n);
    memcpy(rd.buf + rd.len, p, n);
    rd.len += n;
    size_t at = 0;
    while (rd.len - at >= FRAME_HEAD) {
        const uint8_t *f = rd.buf + at;
        size_t len = (size_t)f[0] << 16 | (size_t)f[1] << 8 | f[2];
        if (rd.len - at < FRAME_HEAD + len)
            break;
        frame_read(f, len);
        at += FRAME_HEAD + len;
    }
    memmove(rd.buf, rd.buf + at, rd.len - at);
    rd.len -= at;
}
