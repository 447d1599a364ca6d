/* h1wire.h - a strict HTTP/1.1 request framer over the raw bytes of a
 * connection (RFC 9112): the HTTP transport (h1conn.c) feeds it every byte
 * it reads, and nothing it has not accepted reaches a parser.
 *
 * It follows the stream the client sends: each request head, checked line
 * by line against the rules that let two parties read one message two
 * ways (docs/security.md, "HTTP framing"), then its body by Content-Length
 * or chunked coding, to where the next head starts. It accepts only what has
 * one reading (one Content-Length of digits; one Transfer-Encoding line
 * that is exactly "chunked"; CRLF line ends), so that on every accepted
 * stream any other party on the path (a proxy in front) agrees byte for
 * byte on where each message ends. The first
 * violation ends the stream: `status` and `message` say what was wrong.
 *
 * Bytes are released in units: a head, and a chunk-size line (with the CRLF
 * ending the chunk before it, and the trailer section after the last one),
 * are judged whole before any of their bytes may go on; body data goes on
 * as it comes. `unit_start` is the stream offset up to which every byte is
 * judged good. The framer reads whole lines only: feed() leaves an
 * unfinished line unconsumed, and the caller presents it again, followed by
 * more bytes. No allocation; pure, so it is unit-tested and fuzzed alone.
 *
 * An optional observer (NULL in the transport) is told where each message's
 * parts are, as stream offsets: the unit test, the fuzzer and the
 * differential harness compare these boundaries across ways of feeding the
 * same bytes, and with another parser's.
 */
#ifndef TILED_H1WIRE_H
#define TILED_H1WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Limits, so that what one connection holds is bounded whatever a client
 * sends: a head is held whole until it is judged (h1conn.c keeps it in the
 * connection's input buffer), and header lines, query arguments ("a=1&b=2"
 * is two) and trailer lines are counted together. The values are those
 * the daemon had when libmicrohttpd served HTTP (they fitted its 16 KiB
 * connection pool), kept so that what a client may send did not change
 * with the transport. */
#define TILED_H1_LINE_MAX 4096        /* request line: 414 above */
#define TILED_H1_HEAD_MAX 8192        /* whole head: 431 above */
#define TILED_H1_FIELDS_MAX 64        /* header lines + query arguments + trailer lines: 431 above */
#define TILED_H1_CHUNK_LINE_MAX 1024  /* chunk size plus extensions: 400 above */
#define TILED_H1_TRAILER_MAX 1024     /* trailer section: 431 above */

/* What the stream's unit in progress is (what a refusal interrupted). */
enum tiled_h1_unit {
    TILED_H1_UNIT_NONE,       /* body data: nothing held */
    TILED_H1_UNIT_HEAD,       /* a request head */
    TILED_H1_UNIT_CHUNK,      /* a chunk-size line (the body's first) */
    TILED_H1_UNIT_CHUNK_NEXT, /* the CRLF after a chunk's data, then a size line */
};

/* What the observer is told, with a range [from, to) of stream offsets. */
enum tiled_h1_event {
    TILED_H1_EV_HEAD, /* a head accepted: from its request line to its end (the body's start) */
    TILED_H1_EV_DATA, /* body bytes (chunk data, without sizes or CRLFs), in order, maybe in pieces */
    TILED_H1_EV_END,  /* a message complete: from its request line to the next message's start */
};
struct tiled_h1;
typedef void tiled_h1_observer(void *arg, const struct tiled_h1 *p, enum tiled_h1_event ev, uint64_t from,
                               uint64_t to);

struct tiled_h1 {
    uint64_t pos;         /* stream offset of the first byte not consumed */
    uint64_t unit_start;  /* every byte before it is judged good */
    enum tiled_h1_unit unit;
    int state;            /* h1wire.c */
    uint32_t accepted;    /* heads accepted so far */
    uint64_t remaining;   /* body bytes left: Content-Length or this chunk */
    /* The head in progress. */
    uint32_t fields, host_lines, cl_lines, te_lines;
    bool http10, te_chunked_only, te_bad_syntax, te_chunked_not_last, te_chunked_twice;
    bool te_seen_chunked;
    char te_unknown[32];  /* the first transfer coding other than chunked */
    uint64_t content_length;
    uint32_t method_len, target_off, target_len; /* in the head, for the log */
    uint64_t line_start;  /* stream offset of the head's request line */
    bool trailers;        /* in the trailer section (last chunk seen) */
    /* The verdict: 0 while the stream is good. */
    int status;
    bool in_body;         /* the refused unit is part of a body, not a head */
    char message[200];
    /* Optional, set after init: told of each message's boundaries. */
    tiled_h1_observer *observer;
    void *observer_arg;
};

void tiled_h1_init(struct tiled_h1 *p);
/* Reads data[0..n), which starts at offset p->pos; returns how many bytes
 * it consumed (the rest is an unfinished line, or follows a violation). */
size_t tiled_h1_feed(struct tiled_h1 *p, const unsigned char *data, size_t n);

#endif
