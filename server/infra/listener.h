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

/* How long a held listener still takes the connections whose handshake was
 * under way (a SYN let in before the filter, its last ACK not yet back). A
 * round trip to a proxy beside its replicas is well under a millisecond; a
 * handshake whose SYN-ACK was lost (retransmitted after a second) may still
 * be reset. Short, as a client that connects meanwhile waits a second for
 * its SYN's retransmission. */
#define TILED_LISTEN_SETTLE_US (5u * 1000u)

/* Drops every new connection's first segment (SYN without ACK) from now on;
 * the rest (a handshake's last ACK, accepted connections' traffic: they
 * inherit the filter) passes. 0, or -1 with errno when it cannot. */
int tiled_listener_hold(int fd);
/* Connections completed and waiting to be accepted (0 when unknown). */
unsigned tiled_listener_queued(int fd);

#endif
