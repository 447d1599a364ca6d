/* cors_reply.c - the answers of the browser rules (see cors_reply.h). */
#include "cors_reply.h"

#include <stddef.h>

#include "cors.h"

/* What a page may send: the body's type and coding, the binary extension's
 * header and a request id; Authorization only when keys are on. */
#define ALLOW_HEADERS "Content-Type, Content-Encoding, Inference-Header-Content-Length, X-Request-Id"

bool tiled_cors_refuse(struct tiled_reply *r, const char *origins, const char *origin, const char *host, bool tls)
{
    if (!tiled_cors_refused(origins, origin, host, tls))
        return false;
    tiled_reply_error(r, TILED_FORBIDDEN,
                      "origin '%.100s' may not call this server: it is not the server's own (%s://%.100s) and "
                      "--cors-origins does not list it",
                      origin, tls ? "https" : "http", host ? host : "(no Host header)");
    /* With CORS on every answer says so already (tiled_cors_answer_headers). */
    if (!origins || !origins[0])
        tiled_reply_vary(r, TILED_VARY_ORIGIN);
    return true;
}

void tiled_cors_preflight(struct tiled_reply *r, bool auth)
{
    r->status = TILED_NO_CONTENT;
    tiled_reply_header(r, "Access-Control-Allow-Methods", "GET, HEAD, POST");
    tiled_reply_header(r, "Access-Control-Allow-Headers", auth ? ALLOW_HEADERS ", Authorization" : ALLOW_HEADERS);
    tiled_reply_header(r, "Access-Control-Max-Age", "600");
}
