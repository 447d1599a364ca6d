/* cors.c - Cross-Origin Resource Sharing (see cors.h). */
#include "cors.h"

#include <string.h>

/* What a page may send: the body's type and coding, the binary extension's
 * header and a request id; Authorization only when keys are on. */
#define ALLOW_HEADERS "Content-Type, Content-Encoding, Inference-Header-Content-Length, X-Request-Id"

bool tiled_cors_allows(const char *origins, const char *origin)
{
    if (!origins || !origins[0] || !origin || !origin[0])
        return false;
    size_t n = strlen(origin);
    for (const char *p = origins; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        size_t len = strcspn(p, ", ");
        if ((len == 1 && *p == '*') || (len == n && strncmp(p, origin, n) == 0))
            return true;
        p += len;
    }
    return false;
}

bool tiled_cors_is_preflight(const char *method, const char *request_method)
{
    return strcmp(method, "OPTIONS") == 0 && request_method && request_method[0];
}

void tiled_cors_preflight(struct tiled_reply *r, const char *origins, const char *origin, bool auth)
{
    if (!tiled_cors_allows(origins, origin)) {
        tiled_reply_error(r, TILED_FORBIDDEN, "origin '%.100s' is not allowed (--cors-origins)", origin ? origin : "");
        return;
    }
    r->status = TILED_NO_CONTENT;
    tiled_reply_header(r, "Access-Control-Allow-Methods", "GET, HEAD, POST");
    tiled_reply_header(r, "Access-Control-Allow-Headers", auth ? ALLOW_HEADERS ", Authorization" : ALLOW_HEADERS);
    tiled_reply_header(r, "Access-Control-Max-Age", "600");
}

const char *const *tiled_cors_answer_headers(const char *origins, const char *origin)
{
    /* The origin is echoed rather than "*", so the answer is right with
     * credentials too; Vary tells caches the answer depends on it. */
    static _Thread_local const char *h[7];
    if (!tiled_cors_allows(origins, origin))
        return NULL;
    h[0] = "Access-Control-Allow-Origin";
    h[1] = origin;
    h[2] = "Access-Control-Expose-Headers";
    h[3] = "X-Request-Id, Server-Timing, Inference-Header-Content-Length, X-Tensor-Dtype, X-Tensor-Shape";
    h[4] = "Vary";
    h[5] = "Origin";
    h[6] = NULL;
    return h;
}
