/* encode.h - response bodies for /v1/tile, produced as a sequential stream.
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
 * Ownership: the encoder borrows `plan`, `in` and `metrics`, which must
 * outlive it; it owns its scratch (freed by tile_encoder_free()).
 * Thread-safety: one encoder is used by one thread at a time.
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

struct tile_encoder {
    enum tile_format fmt;
    const struct tile_plan *plan;
    const struct tile_tensor *in;
    const struct tile_timings *metrics;
    uint64_t size, pos;
    /* Sections: head text (below), data, tail text (JSON metrics). */
    uint64_t head_len, data_len;
    /* Data from per-input-element pieces (JSON text, string wire form). */
    char *blob;
    uint64_t *piece_off;      /* in_elems + 1 offsets into blob */
    void *index_in;           /* iota of input indices */
    uint32_t *index_buf;      /* or uint64_t, by index_width */
    uint64_t index_width, index_first, index_count; /* buffered output elements */
    uint64_t elem, elem_off;  /* cursor: output element, byte within its piece (+separator) */
    bool separators;          /* JSON: ',' between pieces */
    bool complex_flat;        /* JSON complex as "re,im" without brackets */
    const char *tail;         /* a caller's closing text instead of the metrics */
    uint64_t tail_fixed_len;
    /* Data as fixed-width elements (raw numbers, .npy strings). */
    const void *fixed_in;
    void *fixed_owned;        /* converted .npy strings */
    /* The large members come last: init zeroes only what precedes them
     * (they are always written before use), which keeps small requests
     * from clearing kilobytes they never read. */
    struct tile_plan index_plan; /* the plan applied to element indices */
    struct tile_plan fixed_plan;
    char head[4096 + TILE_MAX_RANK * 24];
};

/* A caller-supplied frame around the data, for protocols with their own
 * envelope (the Open Inference Protocol): `head` (copied; at most
 * TILE_ENCODE_HEAD_MAX bytes) and `tail` (borrowed) replace the format's
 * own head and metrics tail. */
#define TILE_ENCODE_HEAD_MAX 4096
struct tile_encode_frame {
    const char *head;
    size_t head_len;
    const char *tail;
    size_t tail_len;
    bool complex_flat; /* JSON complex elements as two flat numbers */
};

/* Prepares the body. Fails with TILE_ENOTACCEPT when the format cannot
 * carry the tensor (bfloat16 as .npy, non-UTF-8 strings as JSON), or
 * TILE_ETOOBIG when the body would exceed `max_bytes` (0 = none). */
int tile_encoder_init(struct tile_encoder *enc, enum tile_format fmt, const struct tile_plan *plan,
                      const struct tile_tensor *in, const struct tile_request *req,
                      const struct tile_timings *metrics, uint64_t max_bytes, struct tile_error *e);
/* The same with a caller's frame (see struct tile_encode_frame). */
int tile_encoder_init_framed(struct tile_encoder *enc, enum tile_format fmt, const struct tile_plan *plan,
                             const struct tile_tensor *in, const struct tile_request *req,
                             const struct tile_encode_frame *frame, uint64_t max_bytes, struct tile_error *e);

/* Total body length. */
static inline uint64_t tile_encoder_size(const struct tile_encoder *enc)
{
    return enc->size;
}

/* Writes the next min(cap, remaining) bytes into buf; returns the count
 * (0 at the end). */
size_t tile_encoder_read(struct tile_encoder *enc, void *buf, size_t cap);

void tile_encoder_free(struct tile_encoder *enc);

/* For a complete JSON body held in memory (`body`, tile_encoder_size()
 * bytes): rewrites its metrics object from the current timings without the
 * padding a streamed body needs, and returns the body's new (never larger)
 * length. Other formats: returns the size unchanged. */
uint64_t tile_encoder_rewrite_metrics(const struct tile_encoder *enc, char *body);

#endif
