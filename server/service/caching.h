/* caching.h - what a cache may do with a reply (RFC 9111), and the
 * conditional requests that make keeping one cheap (RFC 9110 13).
 *
 * Two kinds of GET answer. A fixed document (the OpenAPI description, the
 * server's and the model's metadata, the model's configuration) is the
 * same bytes for the life of the process: it carries a strong ETag and
 * Cache-Control: no-cache, so a cache may keep it but asks again before
 * each use, and the question is cheap: If-None-Match naming the current
 * tag (or "*") is answered 304 Not Modified without a body. An answer that
 * changes from one request to the next (health, readiness, statistics,
 * metrics, shared-memory status) carries Cache-Control: no-store.
 *
 * The tag is a hash of the document's bytes as sent without a content
 * coding, so it changes whenever they do (another build, another
 * --shared-memory), followed by the coding when the body is compressed
 * ("-gzip"): a compressed body is another representation with its own
 * strong tag (RFC 9110 8.8.3.3).
 */
#ifndef TILED_CACHING_H
#define TILED_CACHING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compress.h"

struct tiled_req;
struct tiled_reply;

/* "\"" 16 hex digits, "-deflate" at most, "\"" and the NUL. */
#define TILED_ETAG_MAX 32

/* The hash a fixed document's tag is made of (64-bit FNV-1a). */
uint64_t tiled_etag_hash(const void *data, size_t len);
/* The entity tag, quotes included, of a document whose hash is `hash`
 * sent with the coding `c`. */
void tiled_etag_format(uint64_t hash, enum tiled_coding c, char out[TILED_ETAG_MAX]);
/* True when an If-Match or If-None-Match value ("*", or entity tags
 * separated by commas) matches `etag`: "*" matches, and so does the same
 * tag; a weak one (W/"...") only when `weak` is set, the weak comparison
 * If-None-Match uses (RFC 9110 8.8.3.2). Reading stops at what is not an
 * entity tag. */
bool tiled_etag_listed(const char *list, const char *etag, bool weak);

/* Answers a GET (or HEAD) for the fixed document of hash `hash` that would
 * be sent with the coding `c` in `len` bytes, from the request's If-Match
 * and If-None-Match (RFC 9110 13.2.2): true when they decide the reply,
 * then 412 Precondition Failed (an If-Match that names no current tag) or
 * 304 Not Modified with the tag and Cache-Control (headers the reply
 * already has, such as Vary, stay); false when the document is to be
 * sent. */
bool tiled_cache_preconditions(struct tiled_req *req, uint64_t hash, enum tiled_coding c, uint64_t len);
/* Tags a reply that sends the fixed document: ETag and
 * Cache-Control: no-cache. */
void tiled_cache_tag(struct tiled_reply *r, uint64_t hash, enum tiled_coding c);
/* A reply that holds a fixed document (a 200 with its body in memory,
 * uncompressed): tagged, or made a 304 or 412 by the request's
 * preconditions. Any other reply is left as it is. */
void tiled_cache_fixed(struct tiled_req *req);
/* A reply that must not be stored: Cache-Control: no-store. */
void tiled_cache_no_store(struct tiled_reply *r);

#endif
