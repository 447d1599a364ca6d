/* cors.c - the Origin check and CORS (see cors.h). */
#include "cors.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <string.h>
#include <strings.h>

/* What a page may read besides the CORS-safelisted headers: tiled's own,
 * the API key challenge of a 401, Allow of a 405, Retry-After of a 503. */
#define EXPOSE_HEADERS                                                                                                 \
    "X-Request-Id, Server-Timing, Inference-Header-Content-Length, X-Tensor-Dtype, X-Tensor-Shape, "                   \
    "WWW-Authenticate, Allow, Retry-After"

/* An origin's parts; host points into the parsed text. */
struct origin {
    const char *scheme, *host;
    size_t scheme_len, host_len;
    long port; /* -1: none given and the scheme has no default */
};

static long default_port(const char *scheme, size_t len)
{
    if (len == 4 && strncasecmp(scheme, "http", 4) == 0)
        return 80;
    if (len == 5 && strncasecmp(scheme, "https", 5) == 0)
        return 443;
    return -1;
}

/* host[:port] (RFC 3986 authority without userinfo; an IPv6 literal in
 * brackets), the whole of s[0..len). The port is `port` when none is named. */
static bool parse_authority(const char *s, size_t len, long port, struct origin *o)
{
    size_t h;
    if (len && s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (!close)
            return false;
        h = (size_t)(close - s) + 1;
    } else {
        h = strcspn(s, ":/?#@[] \t");
        if (h > len)
            h = len;
    }
    if (h == 0)
        return false;
    o->host = s;
    o->host_len = h;
    o->port = port;
    if (h == len)
        return true;
    if (s[h] != ':')
        return false;
    if (h + 1 < len) { /* "h:" names no port: the default */
        long n = 0;
        for (size_t i = h + 1; i < len; i++) {
            if (!isdigit((unsigned char)s[i]) || (n = n * 10 + (s[i] - '0')) > 65535)
                return false;
        }
        o->port = n;
    }
    return true;
}

/* scheme://host[:port] and nothing more (RFC 6454's serialisation, as
 * browsers send it, with any case and an explicit default port allowed). */
static bool parse_origin(const char *s, size_t len, struct origin *o)
{
    size_t i = 0;
    while (i < len && (isalnum((unsigned char)s[i]) || strchr("+-.", s[i])))
        i++;
    if (i == 0 || !isalpha((unsigned char)s[0]) || len - i < 3 || memcmp(s + i, "://", 3) != 0)
        return false;
    o->scheme = s;
    o->scheme_len = i;
    return parse_authority(s + i + 3, len - i - 3, default_port(s, i), o);
}

/* Host names case-insensitively; IPv6 literals by address ([::1] is
 * [0:0::1]). */
static bool same_host(const struct origin *a, const struct origin *b)
{
    if (a->host_len == b->host_len && strncasecmp(a->host, b->host, a->host_len) == 0)
        return true;
    if (a->host[0] != '[' || b->host[0] != '[' || a->host_len > 64 || b->host_len > 64)
        return false;
    char sa[64], sb[64];
    unsigned char na[16], nb[16];
    memcpy(sa, a->host + 1, a->host_len - 2);
    sa[a->host_len - 2] = '\0';
    memcpy(sb, b->host + 1, b->host_len - 2);
    sb[b->host_len - 2] = '\0';
    return inet_pton(AF_INET6, sa, na) == 1 && inet_pton(AF_INET6, sb, nb) == 1 && memcmp(na, nb, 16) == 0;
}

static bool same_origin(const struct origin *a, const struct origin *b)
{
    return a->scheme_len == b->scheme_len && strncasecmp(a->scheme, b->scheme, a->scheme_len) == 0 &&
           a->port == b->port && same_host(a, b);
}

/* Calls fn for each entry of a comma-separated list until it returns true. */
static bool any_entry(const char *list, bool (*fn)(const char *entry, size_t len, const void *arg), const void *arg)
{
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        size_t len = strcspn(p, ", ");
        if (len && fn(p, len, arg))
            return true;
        p += len;
    }
    return false;
}

static bool entry_is_star(const char *entry, size_t len, const void *arg)
{
    (void)arg;
    return len == 1 && entry[0] == '*';
}

static bool entry_invalid(const char *entry, size_t len, const void *arg)
{
    struct origin o;
    const char **bad = (const char **)arg;
    if (entry_is_star(entry, len, NULL) || parse_origin(entry, len, &o))
        return false;
    *bad = entry;
    return true;
}

int tiled_cors_check(const char *origins, struct tile_error *e)
{
    const char *bad = NULL;
    if (!any_entry(origins, entry_invalid, (const void *)&bad))
        return 0;
    return tile_error_set(e, TILE_EINVAL,
                          "--cors-origins: '%.*s' is not an origin (scheme://host[:port], no path, e.g. "
                          "https://app.example) nor *",
                          (int)strcspn(bad, ", "), bad);
}

static bool entry_matches(const char *entry, size_t len, const void *arg)
{
    struct origin o;
    return entry_is_star(entry, len, NULL) || (parse_origin(entry, len, &o) && same_origin(&o, arg));
}

bool tiled_cors_allows(const char *origins, const char *origin)
{
    if (!origins || !origins[0] || !origin)
        return false;
    struct origin o;
    if (parse_origin(origin, strlen(origin), &o))
        return any_entry(origins, entry_matches, &o);
    /* "null" and the malformed: only "*" lets them in, as it lets in any page. */
    return origin[0] && any_entry(origins, entry_is_star, NULL);
}

bool tiled_cors_same_origin(const char *origin, const char *host, bool tls)
{
    const char *scheme = tls ? "https" : "http";
    struct origin mine = {.scheme = scheme, .scheme_len = strlen(scheme)}, theirs;
    return origin && host && parse_origin(origin, strlen(origin), &theirs) &&
           parse_authority(host, strlen(host), tls ? 443 : 80, &mine) && same_origin(&theirs, &mine);
}

bool tiled_cors_refused(const char *origins, const char *origin, const char *host, bool tls)
{
    return origin && !tiled_cors_same_origin(origin, host, tls) && !tiled_cors_allows(origins, origin);
}

bool tiled_cors_is_preflight(const char *method, const char *request_method)
{
    return strcmp(method, "OPTIONS") == 0 && request_method && request_method[0];
}

const char *const *tiled_cors_answer_headers(const char *origins, const char *origin)
{
    /* The origin is echoed rather than "*", so the answer is right with
     * credentials too; Vary tells caches that answers depend on it, on
     * every answer, since one without Origin could be cached and served
     * to a page. Timing-Allow-Origin lets the page's Resource Timing show
     * Server-Timing (serverTiming is empty cross-origin without it). */
    static _Thread_local const char *h[9];
    if (!origins || !origins[0])
        return NULL;
    h[0] = "Vary";
    h[1] = "Origin";
    h[2] = NULL;
    if (!tiled_cors_allows(origins, origin))
        return h;
    h[2] = "Access-Control-Allow-Origin";
    h[3] = origin;
    h[4] = "Access-Control-Expose-Headers";
    h[5] = EXPOSE_HEADERS;
    h[6] = "Timing-Allow-Origin";
    h[7] = origin;
    h[8] = NULL;
    return h;
}
