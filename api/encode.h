/* encode.h - response bodies of a tile, produced as a sequential stream
 * (/v1/tile's own formats; v2 and gRPC replies through a caller's frame).
 *
 * An encoder turns (plan, input) into the bytes of one response body in a
 * given format, with its exact length known before the first byte, and
 * produces them on demand in caller-sized pieces. So a server can send a
 * 4 GiB output with a Content-Length and a memory footprint of one piece,
 * and a small output is one read into one buffer.
 *
 * Formats:
 *   TILE_FMT_JSON  {"output":{"dtype":..,"shape":[..],"data":[..]},"metrics":{..}}
 *                  data flat; the metrics object is written last, from the
 *                  timings in `metrics` at the moment it is produced (numbers
 *                  padded to a fixed width so the length is known up front).
 *   TILE_FMT_RAW   the element bytes, little-endian; strings as u32 length + bytes.
 *   TILE_FMT_NPY   a .npy file (strings keep the input's .npy kind, default 'U').
 *
 * Ownership: an encoder owns everything it reads. It takes over the
 * decoded request (its input tensor and .npy string kind), copies what it
 * needs of the plan (the plans it reads data and element indices with)
 * and the caller's frame, and keeps its own copy of the timings its JSON
 * tail reports (tile_encoder_set_timings), so it can outlive the request
 * state that made it (a streamed body does). Its layout is private to
 * encode.c. Thread-safety: one encoder is used by one thread at a time.
 */
#ifndef TILE_ENCODE_H
#define TILE_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "request.h"
#include "tile.h"

enum tile_format { TILE_FMT_JSON, TILE_FMT_RAW, TILE_FMT_NPY, TILE_FMT_COUNT };

const char *tile_format_media_type(enum tile_format f);
/* Media type (parameters after ';' ignored, case-insensitive) to format;
 * -1 when unknown. */
int tile_format_from_media_type(const char *s, size_t len, enum tile_format *out);

/* Phase timings in microseconds, filled by the server as it goes. */
struct tile_timings {
    uint64_t queue_us, decode_us, tile_us, encode_us, total_us;
};

struct tile_encoder; /* opaque: see encode.c */

/* A caller-supplied frame around the data, for protocols with their own
 * envelope (the Open Inference Protocol): `head` and `tail` (both copied;
 * at most TILE_ENCODE_HEAD_MAX and TILE_ENCODE_TAIL_MAX bytes) replace the
 * format's own head and metrics tail. */
#define TILE_ENCODE_HEAD_MAX 4096
#define TILE_ENCODE_TAIL_MAX 64
struct tile_encode_frame {
    const char *head;
    size_t head_len;
    const char *tail;
    size_t tail_len;
    bool complex_flat; /* JSON complex elements as two flat numbers */
};

/* Prepares the body of `plan` applied to req->input. Takes over the
 * request's input (req is left without it, still freeable, whether or not
 * this succeeds: tile_request_move); `frame` is NULL
 * for the format's own head and metrics tail. Returns NULL with `e` set:
 * TILE_ENOTACCEPT when the format cannot carry the tensor (bfloat16 as
 * .npy, non-UTF-8 strings as JSON), TILE_ETOOBIG when the body would exceed
 * `max_bytes` (0 = none), TILE_ENOMEM. */
struct tile_encoder *tile_encoder_new(enum tile_format fmt, const struct tile_plan *plan, struct tile_request *req,
                                      const struct tile_encode_frame *frame, uint64_t max_bytes,
                                      struct tile_error *e);
void tile_encoder_free(struct tile_encoder *enc); /* NULL is fine */

/* Total body length, and what is left to read. */
uint64_t tile_encoder_size(const struct tile_encoder *enc);
uint64_t tile_encoder_remaining(const struct tile_encoder *enc);
/* Lengths of the head and data sections (the tail is the rest). */
void tile_encoder_sections(const struct tile_encoder *enc, uint64_t *head_len, uint64_t *data_len);

/* The timings the JSON metrics tail reports from now on (copied). */
void tile_encoder_set_timings(struct tile_encoder *enc, const struct tile_timings *tm);

/* Writes the next min(cap, remaining) bytes into buf; returns the count
 * (0 at the end). */
size_t tile_encoder_read(struct tile_encoder *enc, void *buf, size_t cap);

/* True when the body's data is fixed-width elements in the format's own
 * frame: producing it is tiling, with no formatting (see fill, below). */
bool tile_encoder_tiles_directly(const struct tile_encoder *enc);

/* Writes the whole body (tile_encoder_size() bytes) into buf, from the
 * start. Fixed-width data with the format's own frame is tiled straight
 * into buf, by the pool's workers when it is large (pool may be NULL):
 * then it returns true, and the time it took is tiling, not encoding.
 * Anything else is read as by tile_encoder_read() and it returns false. */
bool tile_encoder_fill(struct tile_encoder *enc, void *buf, struct tile_pool *pool);

/* For a complete JSON body held in memory (`body`, tile_encoder_size()
 * bytes): rewrites its metrics object from the current timings without the
 * padding a streamed body needs, and returns the body's new (never larger)
 * length. Other formats: returns the size unchanged. */
uint64_t tile_encoder_rewrite_metrics(const struct tile_encoder *enc, char *body);

#endif
