/* cors_reply.h - what the service answers for the browser rules of
 * cors.h, first steps of its head sequence (tiled_service_browser,
 * service.h): the Origin refusal and the CORS preflight. The rules
 * themselves (which origin is let in, what a preflight is, the headers of
 * every answer) are infra's cors.h; only the replies are written here.
 */
#ifndef TILED_CORS_REPLY_H
#define TILED_CORS_REPLY_H

#include <stdbool.h>

#include "reply.h"

/* The Origin check: true, with a 403 in `r`, when the request has an Origin
 * (`origin` not NULL) that is neither its own nor let in by `origins`. */
bool tiled_cors_refuse(struct tiled_reply *r, const char *origins, const char *origin, const char *host, bool tls);

/* The preflight's answer, for an origin the check above let through: 204
 * with the allowed methods and headers. */
void tiled_cors_preflight(struct tiled_reply *r, bool auth);

#endif
