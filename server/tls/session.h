/* session.h - a TLS connection's session on a non-blocking socket (GnuTLS,
 * session.c), for both transports: the HTTP/1.1 loops (server/http/) and
 * the gRPC loops (server/grpc/). The policy and certificate are the
 * daemon's (tls.h). A session is touched by its connection's loop thread
 * only.
 */
#ifndef TILED_TLS_SESSION_H
#define TILED_TLS_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tiled_tls;
struct tiled_tls_conn;

/* A server session on socket fd, with the daemon's policy and current
 * certificate; h2 for the gRPC port (ALPN "h2", HTTP/2's policy). Free it
 * before closing fd. NULL when GnuTLS refused a setting or memory ran out. */
struct tiled_tls_conn *tiled_tls_conn_new(struct tiled_tls *tls, int fd, bool h2);
void tiled_tls_conn_free(struct tiled_tls_conn *tc);
/* 1: handshake done, 0: call again when the socket is ready for the
 * direction *want_write says, -1: failed (the connection is dropped). */
int tiled_tls_conn_handshake(struct tiled_tls_conn *tc, bool *want_write);
/* Like recv/send: bytes, 0 at EOF (recv), -1 with errno EAGAIN, -2 on an
 * error. After -1 from send, the next send must repeat the same bytes. */
long tiled_tls_conn_recv(struct tiled_tls_conn *tc, uint8_t *buf, size_t cap);
long tiled_tls_conn_send(struct tiled_tls_conn *tc, const uint8_t *p, size_t n, bool again);
/* Decrypted bytes already buffered (epoll cannot see them). */
bool tiled_tls_conn_pending(struct tiled_tls_conn *tc);
/* Before the socket closes: close_notify, so the client sees the end of
 * the stream, not a truncation (once, best effort; nothing on a session
 * that failed or never finished its handshake). NULL is ignored. */
void tiled_tls_conn_bye(struct tiled_tls_conn *tc);

#endif
