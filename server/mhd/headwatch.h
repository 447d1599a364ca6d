/* headwatch.h - a deadline for request heads: a client must send a complete
 * request head within --header-timeout seconds of the connection opening or
 * of its previous request ending (then plus the idle timeout, the keep-alive
 * gap a client may rightly leave), or its connection is cut (headwatch.c
 * says why libmicrohttpd's idle timeout is not enough).
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
 * connection cut adds one to *cut_total. Stop it after the daemon is
 * stopped. */
struct tiled_headwatch *tiled_headwatch_start(unsigned timeout_s, unsigned idle_timeout_s,
                                              atomic_uint_fast64_t *cut_total, struct tile_error *e);
void tiled_headwatch_stop(struct tiled_headwatch *hw);

/* MHD_OPTION_NOTIFY_CONNECTION callback; `cls` is the watcher. */
void tiled_headwatch_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                            enum MHD_ConnectionNotificationCode code);
/* The head of a request on c has arrived: false when it came too late (the
 * connection was cut just before) and must not be served. */
bool tiled_headwatch_head_done(struct tiled_headwatch *hw, struct MHD_Connection *c);
/* A request on c has ended. */
void tiled_headwatch_request_done(struct tiled_headwatch *hw, struct MHD_Connection *c);

#endif
