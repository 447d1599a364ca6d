/* listener.h - a listening socket's drain, shared by both transports.
 *
 * Shutting a listener resets every connection the kernel completed but the
 * process has not accepted yet, and a client (or a proxy such as nginx) may
 * already have sent its request on it. So a draining transport first drops
 * new SYNs (tiled_listener_hold), keeps accepting what is queued, and shuts
 * the listener once TILED_LISTEN_SETTLE_US have passed and its queue is
 * empty (tiled_listener_queued): nothing that reached the queue is lost,
 * and a client connecting meanwhile is refused after its SYN's
 * retransmission (a second), then fails over. */
#ifndef TILED_LISTENER_H
#define TILED_LISTENER_H

#include <errno.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "error.h"

/* How long a held listener still takes the connections whose handshake was
 * under way (a SYN let in before the filter, its last ACK not yet back). A
 * round trip to a proxy beside its replicas is well under a millisecond; a
 * handshake whose SYN-ACK was lost (retransmitted after a second) may still
 * be reset. Short, as a client that connects meanwhile waits a second for
 * its SYN's retransmission. */
#define TILED_LISTEN_SETTLE_US (5u * 1000u)

/* A listening TCP socket on HOST:PORT for both transports: HOST is an IPv4
 * or IPv6 literal ("::" takes IPv4 too: dual stack) or a name, resolved
 * (the first of its addresses that binds is used); PORT 0 lets the kernel
 * choose. Nonblocking, close-on-exec, SO_REUSEADDR, BACKLOG waiting.
 * Returns the descriptor, or -1 with `e` saying why in words a user acts
 * on, naming PORT_FLAG ("--port", "--grpc-port") or --host as the fix. */
int tiled_listener_open(const char *host, long long port, const char *port_flag, int backlog, struct tile_error *e);
/* The port a listener is bound to (0 when unknown). */
unsigned tiled_listener_port(int fd);
/* The address of an accepted connection's peer, as the socket has it
 * (IPv4-mapped on a dual-stack listener) into dst[cap]; "" when unknown. */
void tiled_listener_peer(int fd, char *dst, size_t cap);
/* HOST as it goes in a URL: an IPv6 literal in brackets. */
void tiled_listener_url_host(const char *host, char *dst, size_t cap);

/* Drops every new connection's first segment (SYN without ACK) from now on;
 * the rest (a handshake's last ACK, accepted connections' traffic: they
 * inherit the filter) passes. 0, or -1 with errno when it cannot. */
int tiled_listener_hold(int fd);
/* Connections completed and waiting to be accepted (0 when unknown). */
unsigned tiled_listener_queued(int fd);

/* How a plain connection's bytes move, in both transports (h1conn.c,
 * h1reply.c, grpc/conn.c): each member behaves as the system call it is
 * named after, on the connection's fd. The daemon's are the socket calls
 * themselves (tiled_socket_system_io); a driver that turns a loop by hand
 * may keep a connection's bytes in memory instead (fuzz/fuzz_h1_transport.c,
 * fuzz/fuzz_grpc_transport.c). A TLS connection's bytes go through GnuTLS,
 * which reads and writes the socket itself. */
struct tiled_socket_io {
    ssize_t (*recv)(int fd, void *buf, size_t len, int flags);
    ssize_t (*sendmsg)(int fd, const struct msghdr *msg, int flags);
    int (*shutdown)(int fd, int how);
};
extern const struct tiled_socket_io tiled_socket_system_io;

/* A socket call's result as both transports read it: the bytes (0 at the
 * end), -1 when nothing can move now (EAGAIN, EINTR: try at the next
 * readiness), -2 on an error (the connection is gone). */
static inline long tiled_socket_result(ssize_t r)
{
    if (r >= 0)
        return r;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -1 : -2;
}

#endif
