/* h1_replies.h - the client's side of an HTTP/1.1 connection, for
 * fuzz_h1_transport.c: what it sent, read by the framer (server/http/h1wire.h,
 * which fuzz_h1wire.c checks against a reading of its own) into the
 * requests the server owes replies to, and what the server wrote, read by
 * a strict response parser of its own, each reply matched to its request:
 *   - a status line "HTTP/1.1 NNN reason"; header fields "name: value",
 *     CRLF line ends, a token name, no control byte in a value (a request's
 *     bytes echoed into a field must not break it), no folding;
 *   - framing: at most one Content-Length, of digits, and one
 *     Transfer-Encoding, "chunked", never both and never chunked to an
 *     HTTP/1.0 request; no body after a HEAD request, a 204 or a 304; a
 *     chunked body of hex sizes and CRLFs that ends with a zero chunk and
 *     trailer fields; a body without either read to the connection's end,
 *     which it must announce (Connection: close);
 *   - interim replies: only 100 Continue, only to a request that asked for
 *     it (Expect: 100-continue, HTTP/1.1), once;
 *   - Connection: close on the reply to every request that asked for the
 *     close (any Connection field listing "close"; HTTP/1.0 without
 *     "keep-alive"), to a request whose message the client had not sent
 *     whole (the server cannot know where the next one starts), and to the
 *     stream the framer refused (whose status the reply must carry); no
 *     byte after a reply that announced the close;
 *   - a reply of type application/json, not encoded, is one JSON document.
 * A break of any rule calls fuzz_fail(). Whether every request was
 * answered is the harness's to judge (h1_replies_account).
 */
#ifndef TILED_FUZZ_H1_REPLIES_H
#define TILED_FUZZ_H1_REPLIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A new connection; with `verbose`, each request and reply is printed to
 * stderr (FUZZ_VERBOSE: what an input does). */
void h1_replies_begin(bool verbose);
/* The client sent more: `stream` is everything it sent on the connection
 * so far, `len` bytes (the bytes before are the same as at the last call). */
void h1_replies_sent(const uint8_t *stream, size_t len);
/* Bytes the server wrote, in order. */
void h1_replies_read(const uint8_t *p, size_t n);
/* The server's side ended (shut for writing, or closed): nothing more
 * comes. A reply read to the end is complete then. */
void h1_replies_eof(void);

struct h1_account {
    size_t requests;  /* messages the framer read whole before any refusal */
    bool refused;     /* the framer refused the stream (the reply to it closes) */
    size_t replies;   /* final replies read whole */
    bool closing;     /* the last of them announced Connection: close */
    bool partial;     /* a reply is begun and not read whole */
    bool eof;         /* the server's side ended */
};
void h1_replies_account(struct h1_account *a);
/* The connection is over: what was kept of it is freed (an input's
 * allocations end with it, as libFuzzer's leak check expects). */
void h1_replies_end(void);

#endif
