/* headwatch.h - deadlines for receiving requests. A client must send a
 * complete request head within --header-timeout seconds of the connection
 * opening or of its previous request ending (then plus the idle timeout,
 * the keep-alive gap a client may rightly leave), or its connection is cut.
 * Then, when the request has a body, it has --header-timeout from the end
 * of its head, plus a second per 500 bytes of body it has sent
 * (recv_deadline.h), to send the whole body: a piece that comes later is
 * refused (the caller answers 408), and a body that stops coming is cut.
 * Once the body is in, nothing here bounds the request: the work and the
 * reply take what they take. headwatch.c says why libmicrohttpd's idle
 * timeout is not enough.
 *
 * The hooks take the watcher as their first argument and do nothing when it
 * is NULL (the timeout is off). Thread-safe: libmicrohttpd may call them
 * from any of its threads.
 */
#ifndef TILED_HEADWATCH_H
#define TILED_HEADWATCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>

#include "error.h"

struct tiled_headwatch;

/* Starts the sweeper thread; NULL when timeout_s is 0 (off) or, with `e`
 * filled, on failure. idle_timeout_s is the daemon's idle timeout; each
 * connection cut for a late head adds one to *head_cuts, each body refused
 * or cut as late one to *body_late. Stop it after the daemon is stopped. */
struct tiled_headwatch *tiled_headwatch_start(unsigned timeout_s, unsigned idle_timeout_s,
                                              atomic_uint_fast64_t *head_cuts, atomic_uint_fast64_t *body_late,
                                              struct tile_error *e);
void tiled_headwatch_stop(struct tiled_headwatch *hw);

/* Called from the transport's MHD_OPTION_NOTIFY_CONNECTION callback; `cls`
 * is the watcher, `slot` where the connection's watch is kept: the first
 * member of the struct the connection's socket_context points to (the
 * hooks below find it there). */
void tiled_headwatch_notify(void *cls, struct MHD_Connection *c, void **slot,
                            enum MHD_ConnectionNotificationCode code);
/* The head of a request on c has arrived: false when it came too late (the
 * connection was cut just before) and must not be served. */
bool tiled_headwatch_head_done(struct tiled_headwatch *hw, struct MHD_Connection *c);
/* The head of the request on c is accepted: its body's deadline starts
 * now (a request without a body ends it at once with body_done). */
void tiled_headwatch_body_start(struct tiled_headwatch *hw, struct MHD_Connection *c);
/* A piece of n body bytes came on c: false when it came after the body's
 * deadline (counted once; the request must be refused). Cheap: a clock
 * read and two relaxed atomic stores, no lock, unless late. */
bool tiled_headwatch_body_piece(struct tiled_headwatch *hw, struct MHD_Connection *c, size_t n);
/* The body of the request on c is complete: no deadline until its end. */
void tiled_headwatch_body_done(struct tiled_headwatch *hw, struct MHD_Connection *c);
/* A request on c has ended: true when its body was cut as late (its
 * connection was shut down by the sweeper). */
bool tiled_headwatch_request_done(struct tiled_headwatch *hw, struct MHD_Connection *c);

#endif
