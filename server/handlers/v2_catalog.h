/* v2_catalog.h - the rules of the model `tile` that every transport of the
 * Open Inference Protocol shares (v2_catalog.c): which model and version a request
 * addresses, the extensions the server lists, and the statistics it keeps,
 * so HTTP and gRPC answer alike. */
#ifndef TILED_V2_CATALOG_H
#define TILED_V2_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#include "grpc_msgs.h" /* struct tile_grpc_model_stats */

struct tiled_req;
struct tiled_server;

/* What a request for `model` (len bytes) at `version` (vlen bytes, as
 * tile_v2_version_parse() reads it; "": the newest) addresses. A version
 * that is no number is found out first, as Triton parses it first. */
enum tiled_v2_found {
    TILED_V2_FOUND,           /* *v: the version */
    TILED_V2_BAD_VERSION,     /* not a version number */
    TILED_V2_UNKNOWN_MODEL,
    TILED_V2_UNKNOWN_VERSION, /* a number the model does not have */
};
enum tiled_v2_found tiled_v2_model_find(const char *model, size_t len, const char *version, size_t vlen, int *v);

/* The same, as an answer: the version, or 0 with the error reply set: an
 * unknown model or version is a 404, NOT_FOUND over gRPC, on both
 * transports as in Triton (whose unknown model is NOT_FOUND unless it
 * namespaces models); a malformed version a 400, INVALID_ARGUMENT. */
int tiled_v2_model_version(struct tiled_req *req, const char *model, size_t len, const char *version, size_t vlen);

/* The protocol extensions the server supports (server metadata). */
#define TILED_V2_MAX_EXTENSIONS 8
size_t tiled_v2_extensions(const struct tiled_server *srv, const char *ext[TILED_V2_MAX_EXTENSIONS]);

/* The statistics of the version in slot `slot` of tile_v2_versions[]; its
 * version string is written into `version`. */
void tiled_v2_stats_read(const struct tiled_server *srv, int slot, struct tile_grpc_model_stats *out,
                         char version[16]);

struct tiled_exchange;
/* Adds a finished v2 infer request (one that named a model version) to
 * its version's statistics: an observer of finished requests (exchange.h)
 * whose CTX is the struct tiled_server. */
void tiled_v2_record(const struct tiled_exchange *x, void *srv);

#endif
