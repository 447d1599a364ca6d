/* route.c - what every route shares: methods and their checks (see
 * route.h; the table itself is router.c's). */
#include "route.h"

#include <string.h>

#include "reply.h"

const char *tiled_allow_value(const char *method)
{
    return strcmp(method, "GET") == 0 ? "GET, HEAD" : method;
}

bool tiled_method_known(const char *method)
{
    static const char *const known[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"};
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        if (strcmp(method, known[i]) == 0)
            return true;
    }
    return false;
}

bool tiled_method_serves(const char *method, const char *want)
{
    return strcmp(method, want) == 0 || (strcmp(want, "GET") == 0 && strcmp(method, "HEAD") == 0);
}

bool tiled_method_check(const char *method, const char *path, const char *want, struct tiled_reply *reply)
{
    if (tiled_method_serves(method, want))
        return true;
    tiled_reply_error(reply, TILED_METHOD_NOT_ALLOWED, "method %s is not allowed on %s (allowed: %s)", method, path,
                      tiled_allow_value(want));
    tiled_reply_header(reply, "Allow", tiled_allow_value(want));
    return false;
}
