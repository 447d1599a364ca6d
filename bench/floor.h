/* floor.h - what the transport floors share (bench/mhd_floor.c,
 * relay_floor.c, own_floor.c): the one answer they all send, so that their
 * bytes are the same and only the way to them differs, and the pieces the
 * two floors that read their own sockets both need.
 *
 * Header-only: each floor is one program built from its own file.
 */
#ifndef TILED_BENCH_FLOOR_H
#define TILED_BENCH_FLOOR_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <unistd.h>

/* The 64-byte body of every floor's answer. */
static const char floor_body[64] = "{\"output\":{\"dtype\":\"float32\",\"shape\":[2,4],\"data\":[1,2]}}     ";
/* What a floor that frames with h1wire sends for a refused stream. */
static const char floor_refusal[] = "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";

#ifdef MHD_VERSION
/* libmicrohttpd's access handler of the floors that use it: the body
 * copied into a response built per request, with four headers. */
static enum MHD_Result floor_answer(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                    const char *version, const char *upload, size_t *upload_size, void **state)
{
    (void)cls;
    (void)url;
    (void)method;
    (void)version;
    (void)upload;
    if (!*state) { /* the head: the body, if any, comes next */
        *state = (void *)1;
        return MHD_YES;
    }
    if (*upload_size) { /* a body piece, dropped */
        *upload_size = 0;
        return MHD_YES;
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer(sizeof(floor_body), (void *)floor_body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "application/json");
    MHD_add_response_header(r, "X-Request-Id", "0123456789abcdef0123456789abcdef");
    MHD_add_response_header(r, "Server-Timing", "queue;dur=0.000, decode;dur=0.001, tile;dur=0.001, total;dur=0.003");
    MHD_add_response_header(r, "Vary", "Accept-Encoding");
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}
#endif

#ifdef TILED_H1WIRE_H
/* The stream offset up to which the framer has judged every byte good:
 * no byte before it is needed again. */
static inline uint64_t floor_judged(const struct tiled_h1 *p)
{
    return p->unit == TILED_H1_UNIT_NONE ? p->pos : p->unit_start;
}
#endif

/* Writes out[*off, len) to fd as far as it takes it; false on an error
 * other than a full socket. */
static inline bool floor_write(int fd, const char *out, size_t *off, size_t len)
{
    while (*off < len) {
        ssize_t w = write(fd, out + *off, len - *off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN;
        }
        *off += (size_t)w;
    }
    return true;
}

#endif
