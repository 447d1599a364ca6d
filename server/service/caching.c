/* caching.c - validators, conditional requests and Cache-Control (see
 * caching.h). */
#include "caching.h"

#include <stdio.h>
#include <string.h>

#include "server.h"

uint64_t tiled_etag_hash(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3u;
    }
    return h;
}

void tiled_etag_format(uint64_t hash, enum tiled_coding c, char out[TILED_ETAG_MAX])
{
    const char *coding = tiled_coding_name(c);
    snprintf(out, TILED_ETAG_MAX, "\"%016llx%s%s\"", (unsigned long long)hash, coding ? "-" : "",
             coding ? coding : "");
}

static const char *skip_separators(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == ',')
        p++;
    return p;
}

bool tiled_etag_listed(const char *list, const char *etag, bool weak)
{
    size_t n = strlen(etag);
    for (const char *p = skip_separators(list); *p; p = skip_separators(p)) {
        if (*p == '*')
            return true;
        bool is_weak = strncmp(p, "W/", 2) == 0;
        p += is_weak ? 2 : 0;
        /* entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE; etagc has no '"' */
        const char *end = *p == '"' ? strchr(p + 1, '"') : NULL;
        if (!end)
            return false;
        if ((weak || !is_weak) && (size_t)(end + 1 - p) == n && memcmp(p, etag, n) == 0)
            return true;
        p = end + 1;
    }
    return false;
}

void tiled_cache_tag(struct tiled_reply *r, uint64_t hash, enum tiled_coding c)
{
    char etag[TILED_ETAG_MAX];
    tiled_etag_format(hash, c, etag);
    tiled_reply_header(r, "ETag", etag);
    tiled_reply_header(r, "Cache-Control", "no-cache");
}

/* 304: the representation the client holds is the current one. Only what
 * would update a cache's stored copy is sent (RFC 9110 15.4.5): the tag,
 * Cache-Control and Vary, no body and no body type; its Content-Length is
 * the stored body's. */
static void not_modified(struct tiled_reply *r, uint64_t hash, enum tiled_coding c, uint64_t len)
{
    tiled_reply_set_body(r, NULL, 0, NULL);
    r->status = TILED_NOT_MODIFIED;
    r->validated_len = len;
    r->content_type = NULL;
    tiled_cache_tag(r, hash, c);
}

bool tiled_cache_preconditions(struct tiled_req *req, uint64_t hash, enum tiled_coding c, uint64_t len)
{
    char etag[TILED_ETAG_MAX];
    tiled_etag_format(hash, c, etag);
    /* If-Match first, by the strong comparison; then If-None-Match, by the
     * weak one. tiled has no Last-Modified, so the date preconditions
     * (If-Unmodified-Since, If-Modified-Since) have nothing to compare. */
    if (req->if_match && !tiled_etag_listed(req->if_match, etag, false)) {
        tiled_reply_error(&req->reply, TILED_PRECONDITION_FAILED,
                          "If-Match names no current representation of %s (its entity tag is %s)", req->path, etag);
        return true;
    }
    if (req->if_none_match && tiled_etag_listed(req->if_none_match, etag, true)) {
        not_modified(&req->reply, hash, c, len);
        return true;
    }
    return false;
}

void tiled_cache_fixed(struct tiled_req *req)
{
    struct tiled_reply *r = &req->reply;
    if (r->status != TILED_OK || !r->body)
        return;
    uint64_t hash = tiled_etag_hash(r->body, (size_t)r->body_len);
    if (!tiled_cache_preconditions(req, hash, TILED_CODING_IDENTITY, r->body_len))
        tiled_cache_tag(r, hash, TILED_CODING_IDENTITY);
}

void tiled_cache_no_store(struct tiled_reply *r)
{
    tiled_reply_header(r, "Cache-Control", "no-store");
}
