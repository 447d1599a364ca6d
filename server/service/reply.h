/* reply.h - what a handler answers: status, headers, and a body held in
 * memory or produced while it is sent (a stream, see stream.h).
 *
 * The reply knows nothing of the transport that sends it; it owns every
 * string and buffer it points to, but its content type (a constant), and
 * frees them in tiled_reply_free().
 */
#ifndef TILED_REPLY_H
#define TILED_REPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "encode.h" /* struct tile_timings */
#include "error.h"
#include "status.h" /* enum tiled_status */

struct tiled_stream;


/* A reply's own headers: more than the names the code sets (a name set
 * again replaces its value), which tests/layering/test_layering.sh counts,
 * so none is ever turned away. */
#define TILED_REPLY_HEADERS 24

struct tiled_reply {
    int status;
    /* gRPC's status for this reply when it is not the one the HTTP status
     * maps to (tiled_reply_grpc_status); has_grpc_status says it is set. */
    int grpc_status;
    bool has_grpc_status;
    char *message;            /* owned: an error reply's text, for transports that send it bare */
    const char *content_type; /* a constant (never freed); NULL: application/json */
    char *headers[TILED_REPLY_HEADERS][2]; /* extra headers (name, value), owned; one per name */
    int nheaders;
    unsigned vary; /* enum tiled_vary bits: the transports send them as one Vary header */
    char *body;               /* owned: malloc'd, or let go with release_body */
    uint64_t body_len;
    /* A 304's: the length of the body it stands for, the one a 200 would
     * carry, sent as its Content-Length (RFC 9110 8.6); it has no body. */
    uint64_t validated_len;
    void (*release_body)(void *body); /* NULL: free() */
    /* Owned; a streamed body instead of `body`, let go with release_stream. */
    struct tiled_stream *stream;
    void (*release_stream)(void *stream);
};

/* Sets an error reply {"error": msg} with `status`. */
void tiled_reply_error(struct tiled_reply *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sets a JSON body (copied). */
void tiled_reply_json(struct tiled_reply *r, int status, const char *json);
/* Sets the JSON body `doc` (released; NULL, from a failed json_pack, makes
 * the reply an empty 503). */
void tiled_reply_doc(struct tiled_reply *r, int status, json_t *doc);
void tiled_reply_header(struct tiled_reply *r, const char *name, const char *value);
/* The request fields a reply can depend on (RFC 9110 12.5.5), a bit each:
 * a set the transports send as one Vary header ("Vary: Accept,
 * Accept-Encoding" from two calls), where a header built by joining
 * names took two allocations and a reallocation of every small request. */
enum tiled_vary {
    TILED_VARY_ACCEPT = 1u << 0,
    TILED_VARY_ACCEPT_ENCODING = 1u << 1,
    TILED_VARY_ORIGIN = 1u << 2,
};
void tiled_reply_vary(struct tiled_reply *r, enum tiled_vary field);
/* The Vary header's value for the bits `vary` into buf, in the order of
 * enum tiled_vary; returns its length ("" and 0 for none). */
#define TILED_VARY_TEXT_MAX 40
size_t tiled_vary_text(unsigned vary, char buf[TILED_VARY_TEXT_MAX]);
/* Replaces the body (the old one is let go); `release` NULL means free(). */
void tiled_reply_set_body(struct tiled_reply *r, char *body, uint64_t len, void (*release)(void *body));
void tiled_reply_free(struct tiled_reply *r);

/* gRPC's status codes (grpc/status.h), by the names the protocol uses. */
enum tiled_grpc_code {
    TILED_GRPC_OK = 0,
    TILED_GRPC_CANCELLED = 1,
    TILED_GRPC_UNKNOWN = 2,
    TILED_GRPC_INVALID_ARGUMENT = 3,
    TILED_GRPC_DEADLINE_EXCEEDED = 4,
    TILED_GRPC_NOT_FOUND = 5,
    TILED_GRPC_PERMISSION_DENIED = 7,
    TILED_GRPC_RESOURCE_EXHAUSTED = 8,
    TILED_GRPC_UNIMPLEMENTED = 12,
    TILED_GRPC_INTERNAL = 13,
    TILED_GRPC_UNAVAILABLE = 14,
    TILED_GRPC_UNAUTHENTICATED = 16,
};

/* What went wrong, as far as the answer depends on it: each kind has one
 * HTTP status and one gRPC code (tiled_fault_status), whatever transport
 * sends it. The first kinds are tile_error's codes, with their values, so a
 * tile_error's code is its kind; the rest name failures whose answer is
 * set by where they happen, not by a tile_error code. */
enum tiled_fault {
    TILED_FAULT_UNSET = TILE_OK,                     /* an error without a code: 500, INTERNAL */
    TILED_FAULT_INVALID = TILE_EINVAL,               /* 400, INVALID_ARGUMENT (Triton's INVALID_ARG) */
    TILED_FAULT_TOO_BIG = TILE_ETOOBIG,              /* 413, RESOURCE_EXHAUSTED (gRPC's message limit) */
    TILED_FAULT_UNAVAILABLE = TILE_ENOMEM,           /* out of memory, or draining: 503, UNAVAILABLE */
    TILED_FAULT_IO = TILE_EIO,                       /* 500, INTERNAL */
    TILED_FAULT_UNSUPPORTED = TILE_EUNSUPPORTED,     /* 400, INVALID_ARGUMENT */
    TILED_FAULT_NOT_ACCEPTABLE = TILE_ENOTACCEPT,    /* 406, INVALID_ARGUMENT */
    /* A gRPC message or head the protocol cannot read (cut short, a second
     * one in a unary call, a bad grpc-timeout, a message that does not
     * inflate): 400, INTERNAL, the code gRPC's own libraries give it. */
    TILED_FAULT_GRPC_WIRE = TILE_ERRCODE_COUNT,
    TILED_FAULT_CODING,  /* a content coding the server does not take: 415, UNIMPLEMENTED */
    TILED_FAULT_TIMEOUT, /* the request did not arrive, or the reply was not ready, in time: 408, DEADLINE_EXCEEDED */
    TILED_FAULT_COUNT
};

struct tiled_fault_status {
    int http; /* enum tiled_status */
    int grpc; /* enum tiled_grpc_code */
};

/* The table: the answer to each kind, on each transport. */
extern const struct tiled_fault_status tiled_fault_status[TILED_FAULT_COUNT];

/* The kind of a tile_error (its code; an unknown code is TILED_FAULT_UNSET). */
enum tiled_fault tiled_fault_of(const struct tile_error *e);

/* The kind of a gRPC request message that could not be read (deframed or
 * inflated): too large and out of memory keep their kind, anything else
 * is the wire's fault. */
enum tiled_fault tiled_fault_of_message(const struct tile_error *e);

/* Sets an error reply {"error": msg} with the statuses of kind `f`. */
void tiled_reply_fault(struct tiled_reply *r, enum tiled_fault f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sets an error reply from a tile_error, its statuses those of its code's
 * kind, its message the error's text. */
void tiled_reply_tile_error(struct tiled_reply *r, const struct tile_error *e);

/* The gRPC status a reply is sent with: its own when set, else the one
 * its HTTP status maps to, the way Triton maps its errors to both. */
int tiled_reply_grpc_status(const struct tiled_reply *r);
/* Sets a reply's gRPC status (its HTTP status stays for logs and metrics). */
void tiled_reply_set_grpc_status(struct tiled_reply *r, int code);

/* Server-Timing value for the request's timings ("" when cap is below
 * TILED_SERVER_TIMING_MAX: the five names, each figure's 17 digits of
 * milliseconds and 3 decimals at most, the NUL). */
#define TILED_SERVER_TIMING_MAX 168
void tiled_server_timing(const struct tile_timings *tm, char *buf, size_t cap);

#endif
