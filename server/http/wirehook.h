/* wirehook.h - the raw bytes of every HTTP/1.1 connection, judged before
 * libmicrohttpd reads them (wirehook.c says how and why).
 *
 * Each connection's bytes go through a strict framer (h1wire.h) on their way
 * into libmicrohttpd. Heads and chunk-size lines reach the library only once
 * judged good. The first one that is not ends the connection's input: in its
 * place the library gets a minimal well-formed stand-in (a bodiless head, or
 * the end of the chunked body), and then nothing more, ever; the adapter
 * answers that request with the verdict (tiled_wire_head/_body) and closes.
 *
 * Every hook runs on the connection's own libmicrohttpd thread.
 */
#ifndef TILED_WIREHOOK_H
#define TILED_WIREHOOK_H

#include <stdbool.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>

#include "error.h"

/* Why a connection's input ended, and what is known of the request. */
struct tiled_wire_verdict {
    int status;           /* 400, 413, 414, 431, 501 or 505 */
    const char *message;  /* what was wrong, for the JSON error */
    const char *method;   /* as sent, "" when not read */
    const char *target;   /* as sent (printable, truncated), "" when not read */
};

/* Before the daemon starts: the library's own receive functions, and room
 * for every descriptor the process may open. */
int tiled_wire_start(struct tile_error *e);
/* A connection opened (libmicrohttpd's STARTED notification); false when it
 * cannot be watched (then it must not be served). `tls` says whether its
 * bytes come through a TLS session; idle_s is its idle timeout (0: none),
 * restarted while bytes come that are held back. */
bool tiled_wire_open(int fd, bool tls, struct MHD_Connection *conn, unsigned idle_s);
/* Whether the hook watches the connection's bytes: one it does not (its
 * tiled_wire_open failed) is never served, even if bytes it had queued
 * before the refusal reach the library. */
bool tiled_wire_watched(int fd);
/* The connection is closing (the CLOSED notification, before close()). */
void tiled_wire_close(int fd);
/* A request head reached the access handler: the verdict when it is the
 * stand-in for a refused head, else NULL. Call once per request. */
const struct tiled_wire_verdict *tiled_wire_head(int fd);
/* The request's body ended: the verdict when its chunked framing was
 * refused (the end was the stand-in's), else NULL. */
const struct tiled_wire_verdict *tiled_wire_body(int fd);

#endif
