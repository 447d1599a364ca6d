/* stream.c - streamed response bodies, produced on workers, read by the
 * transport as it sends them.
 *
 * DESIGN. A streamed body is produced chunk by chunk by a pool
 * continuation into two buffers while the transport sends from the other,
 * so memory stays at two chunks whatever the output size and the
 * transport's thread only copies ready bytes. When the transport asks for
 * bytes that are not ready yet, the reader suspends the connection
 * (through the request's struct tiled_conn_ops) and the producer resumes
 * it after the next chunk; the stream lock orders suspend before resume.
 * The stream owns the encoder (taken from the request; the encoder owns
 * the input and plan it reads), because the transport may release the
 * body after the request state is gone; it is freed by whichever of the
 * transport and the producer lets go last. With
 * Content-Encoding the producer deflates as it goes; the length is then
 * unknown up front and the body is sent chunked.
 *
 * The request takes the stream's timings when the body's last bytes are
 * handed to the transport (the request is alive until then), so statistics and
 * metrics count the tiling and formatting done while the body was sent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "stream.h"

#include "clock.h"
#include "compress.h"
#include "list.h"
#include "server.h"

#define NSLOTS 2

struct tiled_stream {
    pthread_mutex_t lock;
    struct tile_pool *pool;
    void *conn;
    const struct tiled_conn_ops *ops;
    void *response; /* the transport's handle of the body being sent */
    struct tile_timings tm;
    bool tiles_directly;    /* producing is tiling (tile_us), not formatting (encode_us) */
    struct tiled_req *req;  /* until the body's end is handed to the transport, then NULL */
    struct tile_encoder *enc;
    uint64_t size, chunk, produced, t_start;
    char *buf[NSLOTS];
    uint64_t buf_pos[NSLOTS], buf_len[NSLOTS];
    bool ready[NSLOTS];
    bool producing, suspended, released, chunked, finished;
    /* Compression (coding != identity): raw bytes pass through `raw`. */
    enum tiled_coding coding;
    z_stream z;
    char *raw;
    struct tile_pool_task task;
    struct tiled_server *srv;
    struct tiled_stream *prev, *next; /* the server's list of live streams */
};

/* Live streams, so a shutdown can wake the suspended ones (a transport must not be
 * stopped while a connection is suspended). */
static pthread_mutex_t streams_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tiled_stream *streams;

static void streams_add(struct tiled_stream *s)
{
    pthread_mutex_lock(&streams_lock);
    TILE_LIST_PUSH(streams, s);
    pthread_mutex_unlock(&streams_lock);
}

static void streams_remove(struct tiled_stream *s)
{
    pthread_mutex_lock(&streams_lock);
    TILE_LIST_UNLINK(streams, s);
    pthread_mutex_unlock(&streams_lock);
}

void tiled_streams_abort(void)
{
    pthread_mutex_lock(&streams_lock);
    for (struct tiled_stream *s = streams; s; s = s->next) {
        pthread_mutex_lock(&s->lock);
        if (s->suspended) {
            s->suspended = false;
            s->ops->resume(s->conn);
        }
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_unlock(&streams_lock);
}

static void stream_destroy(struct tiled_stream *s)
{
    streams_remove(s);
    if (s->coding != TILED_CODING_IDENTITY)
        deflateEnd(&s->z);
    free(s->raw);
    tile_encoder_free(s->enc);
    for (int i = 0; i < NSLOTS; i++)
        free(s->buf[i]);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static int free_slot(const struct tiled_stream *s)
{
    for (int i = 0; i < NSLOTS; i++) {
        if (!s->ready[i])
            return i;
    }
    return -1;
}

/* Fills `out` (chunk bytes) with the next body bytes; returns the count
 * and sets *last after the last. Runs without the lock (only the producer
 * touches the encoder and the deflate state), so it must not publish
 * anything: the caller does, under the lock. */
static uint64_t fill(struct tiled_stream *s, char *out, bool *last)
{
    uint64_t raw_left = tile_encoder_remaining(s->enc);
    if (s->coding == TILED_CODING_IDENTITY) {
        uint64_t n = raw_left < s->chunk ? raw_left : s->chunk;
        tile_encoder_read(s->enc, out, (size_t)n);
        *last = n == raw_left;
        return n;
    }
    s->z.next_out = (Bytef *)out;
    s->z.avail_out = (uInt)s->chunk;
    while (s->z.avail_out > 0) {
        if (s->z.avail_in == 0 && raw_left > 0) {
            uint64_t n = raw_left < s->chunk ? raw_left : s->chunk;
            tile_encoder_read(s->enc, s->raw, (size_t)n);
            raw_left -= n;
            s->z.next_in = (Bytef *)s->raw;
            s->z.avail_in = (uInt)n;
        }
        int rc = deflate(&s->z, raw_left == 0 ? Z_FINISH : Z_NO_FLUSH);
        if (rc == Z_STREAM_END) {
            *last = true;
            break;
        }
        if (rc != Z_OK && rc != Z_BUF_ERROR)
            break;
    }
    return s->chunk - s->z.avail_out;
}

/* Producer: fills free slots in order until the body is done or both are
 * full, then returns its worker to the pool. */
static void produce(void *arg)
{
    struct tiled_stream *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        int slot = free_slot(s);
        if (s->released || slot < 0 || s->finished)
            break;
        pthread_mutex_unlock(&s->lock);
        uint64_t t0 = tiled_now_us();
        /* The JSON tail with the metrics may be written in this chunk: the
         * total so far is the best figure it can carry. */
        s->tm.total_us = t0 - s->t_start;
        tile_encoder_set_timings(s->enc, &s->tm);
        bool last = false;
        uint64_t n = fill(s, s->buf[slot], &last);
        uint64_t dt = tiled_now_us() - t0;
        pthread_mutex_lock(&s->lock);
        *(s->tiles_directly ? &s->tm.tile_us : &s->tm.encode_us) += dt;
        s->buf_pos[slot] = s->produced;
        s->buf_len[slot] = n;
        s->ready[slot] = n > 0;
        s->produced += n;
        s->finished = last;
        if (s->suspended) {
            s->suspended = false;
            s->ops->resume(s->conn);
        }
    }
    s->producing = false;
    bool destroy = s->released;
    pthread_mutex_unlock(&s->lock);
    if (destroy)
        stream_destroy(s);
}

static void kick_producer(struct tiled_stream *s)
{
    if (s->producing || s->released || s->finished || free_slot(s) < 0)
        return;
    s->producing = true;
    tile_pool_continue(s->pool, &s->task);
}

struct tiled_stream *tiled_stream_init(struct tiled_req *req, struct tile_encoder **enc, uint64_t chunk)
{
    struct tiled_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    for (int i = 0; i < NSLOTS; i++) {
        s->buf[i] = malloc(chunk);
        if (!s->buf[i]) {
            for (int j = 0; j < i; j++)
                free(s->buf[j]);
            free(s);
            return NULL;
        }
    }
    pthread_mutex_init(&s->lock, NULL);
    s->pool = req->srv->pool;
    s->srv = req->srv;
    s->conn = req->conn;
    s->ops = req->ops;
    s->chunk = chunk;
    s->chunked = req->want_trailers;
    s->t_start = req->t_start;
    s->tm = req->tm;
    s->req = req;
    s->tiles_directly = tile_encoder_tiles_directly(*enc);
    s->enc = *enc; /* taken over, with everything it reads */
    *enc = NULL;
    s->size = tile_encoder_size(s->enc);
    s->coding = tiled_coding_negotiate(req->accept_encoding);
    if (s->coding != TILED_CODING_IDENTITY) {
        s->raw = malloc(chunk);
        int bits = tiled_coding_window_bits(s->coding);
        if (!s->raw || deflateInit2(&s->z, Z_BEST_SPEED, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
            s->coding = TILED_CODING_IDENTITY; /* identity is always acceptable */
            free(s->raw);
            s->raw = NULL;
        }
        s->chunked = true; /* the compressed length is known only at the end */
    }
    s->task = (struct tile_pool_task){.fn = produce, .arg = s};
    streams_add(s);
    pthread_mutex_lock(&s->lock);
    kick_producer(s);
    pthread_mutex_unlock(&s->lock);
    return s;
}

uint64_t tiled_stream_size(const struct tiled_stream *s)
{
    return s->chunked ? UINT64_MAX : s->size;
}

const char *tiled_stream_coding(const struct tiled_stream *s)
{
    return tiled_coding_name(s->coding);
}

void tiled_stream_set_response(struct tiled_stream *s, void *response)
{
    s->response = response;
}

void *tiled_stream_response(const struct tiled_stream *s)
{
    return s->response;
}

bool tiled_stream_trailer(const struct tiled_stream *s, char *timing, size_t cap)
{
    if (!s->chunked)
        return false;
    snprintf(timing, cap, "total;dur=%.3f", (double)(tiled_now_us() - s->t_start) / 1e3);
    return true;
}

/* The whole body is produced and handed over: the request's timings become
 * the stream's (called with the lock held). */
static void hand_back_timings(struct tiled_stream *s)
{
    if (!s->req)
        return;
    s->tm.total_us = tiled_now_us() - s->t_start;
    s->req->tm = s->tm;
    s->req->timings_final = true;
    s->req = NULL;
}

long tiled_stream_peek(void *cls, uint64_t pos, const char **data, size_t max)
{
    struct tiled_stream *s = cls;
    long n = 0;
    pthread_mutex_lock(&s->lock);
    if (s->finished && pos >= s->produced) {
        hand_back_timings(s);
        pthread_mutex_unlock(&s->lock);
        return TILED_STREAM_END;
    }
    if (atomic_load(&s->srv->stopping)) { /* past the drain timeout */
        pthread_mutex_unlock(&s->lock);
        return TILED_STREAM_ERROR;
    }
    for (int i = 0; i < NSLOTS; i++) {
        if (!s->ready[i] || pos < s->buf_pos[i] || pos >= s->buf_pos[i] + s->buf_len[i])
            continue;
        uint64_t off = pos - s->buf_pos[i], left = s->buf_len[i] - off;
        n = (long)(left < max ? left : max);
        *data = s->buf[i] + off; /* a ready slot is not written until it is consumed */
        break;
    }
    if (n == 0) {
        s->suspended = true;
        s->ops->suspend(s->conn);
        kick_producer(s);
    }
    pthread_mutex_unlock(&s->lock);
    return n;
}

void tiled_stream_consume(void *cls, uint64_t pos, size_t n)
{
    struct tiled_stream *s = cls;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < NSLOTS; i++) {
        if (s->ready[i] && pos >= s->buf_pos[i] && pos + n == s->buf_pos[i] + s->buf_len[i])
            s->ready[i] = false; /* consumed: let the producer refill it */
    }
    if (s->finished && pos + n >= s->produced)
        hand_back_timings(s); /* a transport that knows the length asks no more */
    kick_producer(s);
    pthread_mutex_unlock(&s->lock);
}

long tiled_stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
    const char *data;
    long n = tiled_stream_peek(cls, pos, &data, max);
    if (n > 0) {
        memcpy(out, data, (size_t)n);
        tiled_stream_consume(cls, pos, (size_t)n);
    }
    return n;
}

void tiled_stream_free(void *cls)
{
    struct tiled_stream *s = cls;
    pthread_mutex_lock(&s->lock);
    s->released = true;
    /* No resume after this: the transport may free its connection (or
     * reuse it for another request) as soon as it lets go of the body. */
    s->suspended = false;
    bool destroy = !s->producing;
    pthread_mutex_unlock(&s->lock);
    if (destroy)
        stream_destroy(s);
}
