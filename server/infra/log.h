/* log.h - one line per event on stderr, JSON or text (--log-format). */
#ifndef TILED_LOG_H
#define TILED_LOG_H

#include <stdbool.h>

#include "config.h"

struct tiled_exchange; /* exchange.h */

void tiled_log_init(const struct tiled_config *cfg);
/* From here on access lines are gathered and written together: by an event
 * loop's tiled_log_flush() once enough have gathered, else by a flusher
 * thread at most `flush_ms` after the first (0: each line as it is made); other lines
 * are written at once, after the gathered ones. -1 if no thread could start
 * (lines are then written as they are made). */
int tiled_log_start(unsigned flush_ms);
/* Called by an event loop before it waits (epoll_wait): writes the
 * gathered lines once there are LOG_EAGER bytes of them (log.c), leaving
 * fewer to the flusher (at most the interval). One relaxed load when there
 * are none. */
void tiled_log_flush(void);
/* Writes the gathered lines, if any (a loop that ends). */
void tiled_log_flush_now(void);
/* Writes what is gathered and stops gathering (the flusher is joined). */
void tiled_log_stop(void);
/* Logs `event` with the fields jansson's json_pack() builds from `fmt` and
 * the arguments (an object format: "{s:i, s:s}"; NULL for no fields). */
void tiled_log_event(enum tiled_log_level level, const char *event, const char *fmt, ...);
bool tiled_log_enabled(enum tiled_log_level level);
/* The access line of a finished request (level info): an observer of
 * finished requests (exchange.h; CTX unused). */
void tiled_log_access(const struct tiled_exchange *x, void *ctx);
/* An error event carrying `message`. */
void tiled_log_error(const char *event, const char *message);

#endif
