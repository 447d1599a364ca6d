/* cors.h - Cross-Origin Resource Sharing, opt-in with --cors-origins.
 *
 * Off by default (no origin may call tiled from a browser page). With a
 * comma-separated list of origins, or "*", a browser's preflight (OPTIONS
 * with Origin and Access-Control-Request-Method) is answered 204 with the
 * methods and headers tiled takes, Authorization among them when API keys
 * are on, and every answer to an allowed origin names it in
 * Access-Control-Allow-Origin and exposes tiled's own response headers.
 */
#ifndef TILED_CORS_H
#define TILED_CORS_H

#include <stdbool.h>

#include "reply.h"

/* True when `origins` (the --cors-origins value) lets `origin` in. */
bool tiled_cors_allows(const char *origins, const char *origin);

/* True for a preflight request (OPTIONS with Access-Control-Request-Method). */
bool tiled_cors_is_preflight(const char *method, const char *request_method);

/* The preflight's answer: 204 with the allowed methods and headers, or 403
 * when the origin is not let in. */
void tiled_cors_preflight(struct tiled_reply *r, const char *origins, const char *origin, bool auth);

/* Headers for an answer to `origin` (NULL when none are due): name/value
 * pairs, NULL-terminated. */
const char *const *tiled_cors_answer_headers(const char *origins, const char *origin);

#endif
