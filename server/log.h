/* log.h - one line per event on stderr, JSON or text (--log-format). */
#ifndef TILED_LOG_H
#define TILED_LOG_H

#include <stdbool.h>

#include "config.h"

struct tiled_req;

void tiled_log_init(const struct tiled_config *cfg);
void tiled_log_event(enum tiled_log_level level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
bool tiled_log_enabled(enum tiled_log_level level);
/* The access line of a finished request (level info); req->remote must be set. */
void tiled_log_access(const struct tiled_req *req, int status);
/* An error event with its message escaped for JSON. */
void tiled_log_error(const char *event, const char *message);

#endif
