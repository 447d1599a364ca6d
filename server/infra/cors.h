/* cors.h - browsers: the Origin check and Cross-Origin Resource Sharing.
 *
 * Two rules, applied from the request head alone (before any body byte is
 * read, so a refused request does no work):
 *
 * - A request with an Origin that is neither the request's own origin nor
 *   let in by --cors-origins is refused with 403. Browsers send Origin on
 *   every cross-origin request and on same-origin POSTs; curl, the SDKs and
 *   perf_analyzer send none and are never refused. The request's own origin
 *   is the listener's scheme (https with --tls-cert) and the Host header's
 *   host and port (the scheme's default when it names none): a page served
 *   from the same host and port, directly or through a reverse proxy that
 *   passes Host on, is at home. X-Forwarded-* are not trusted. "null" (a
 *   sandboxed frame, a file: page) is nobody's own origin.
 *
 * - CORS is opt-in with --cors-origins (a comma-separated list of origins,
 *   or "*"). Then a browser's preflight (OPTIONS with
 *   Access-Control-Request-Method) is answered 204 with the methods and
 *   headers tiled takes, Authorization among them when API keys are on;
 *   every answer carries Vary: Origin; an answer to a listed origin names it
 *   in Access-Control-Allow-Origin and Timing-Allow-Origin and exposes
 *   tiled's own response headers.
 *
 * This module is the policy; the answers the two rules write are the
 * service's, steps of its head sequence (cors_reply.h).
 *
 * Origins compare by parts: scheme and host case-insensitively, the port
 * with the scheme's default filled in (http://h:80 is http://h), IPv6
 * literals by address.
 */
#ifndef TILED_CORS_H
#define TILED_CORS_H

#include <stdbool.h>

#include "error.h"

/* 0 when every entry of `origins` (the --cors-origins value) is "*" or an
 * origin (scheme://host[:port], nothing after it); else -1 naming the entry
 * in `e`. */
int tiled_cors_check(const char *origins, struct tile_error *e);

/* True when `origins` lets `origin` in. */
bool tiled_cors_allows(const char *origins, const char *origin);

/* True when `origin` is the request's own: the scheme (https when `tls`),
 * host and port of the Host header `host`. */
bool tiled_cors_same_origin(const char *origin, const char *host, bool tls);

/* The Origin check: true when the request has an Origin (`origin` not
 * NULL) that is neither its own nor let in by `origins`. The service
 * answers it (cors_reply.h). */
bool tiled_cors_refused(const char *origins, const char *origin, const char *host, bool tls);

/* True for a preflight request (OPTIONS with Access-Control-Request-Method). */
bool tiled_cors_is_preflight(const char *method, const char *request_method);

/* Headers for any answer while CORS is on (NULL when it is off): name/value
 * pairs, NULL-terminated; valid until the thread's next call. */
const char *const *tiled_cors_answer_headers(const char *origins, const char *origin);

#endif
