/* encode.c - streamed response bodies (see encode.h).
 *
 * DESIGN. Every output element is a copy of some input element, so any
 * per-element encoding (JSON text, the length-prefixed string form) only has
 * to be computed once per *input* element. The encoder builds these "pieces"
 * for the input, then tiles the input's element indices with the same plan
 * (resized to index width) and concatenates pieces in output order. This
 * makes a large JSON body cost a memcpy per element rather than a float
 * formatting per element, and gives its exact length up front:
 * sum(piece lengths) x repeat product, plus separators. Fixed-width data
 * (numbers in raw and .npy, strings in .npy) needs no pieces: the kernel
 * produces its bytes directly from any offset.
 */
#include "encode.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "grow.h"
#include "npy.h"
#include "numfmt.h"
#include "spare.h"

#define TILE_INDEX_BATCH 4096
/* Inputs of at most this many elements (and index batches of at most this
 * many outputs) are held in the encoder itself (struct tile_encoder). */
#define TILE_ENCODE_SMALL 32
#define TILE_METRIC_WIDTH 10
/* Pieces up to this long are copied as a block of this size (read_pieces). */
#define PIECE_SHORT 16

/* The encoder's state. Everything it reads is its own (see encode.h). */
struct tile_encoder {
    enum tile_format fmt;
    struct tile_timings metrics; /* what the JSON tail reports */
    uint64_t size, pos;
    uint64_t out_elems;       /* of the plan: all the encoder keeps of it besides the copies below */
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
    bool framed;              /* a caller's head and tail instead of the format's */
    uint64_t tail_fixed_len;
    char tail[TILE_ENCODE_TAIL_MAX];
    /* Data as fixed-width elements (raw numbers, .npy strings). */
    const void *fixed_in;
    void *fixed_owned;        /* converted .npy strings */
    /* The large members come last: tile_encoder_new zeroes only what
     * precedes them (they are always written before use), which keeps
     * small requests from clearing kilobytes they never read. */
    struct tile_request req;     /* owned: the input and its .npy string kind */
    struct tile_plan index_plan; /* the plan applied to element indices */
    struct tile_plan fixed_plan;
    char head[4096 + TILE_MAX_RANK * 24];
    /* A small tensor's pieces, their offsets and its indices live here, not
     * in four blocks of their own: malloc and free were a tenth of a small
     * JSON request's instructions. The pointers above point here or to
     * the heap (owned: see owned()). */
    uint64_t small_off[TILE_ENCODE_SMALL + 1];
    uint64_t small_index[TILE_ENCODE_SMALL];
    uint64_t small_batch[TILE_ENCODE_SMALL];
    char small_blob[TILE_ENCODE_SMALL * 32];
};

static const char *const tile_media_types[TILE_FMT_COUNT] = {
    [TILE_FMT_JSON] = "application/json",
    [TILE_FMT_RAW] = "application/octet-stream",
    [TILE_FMT_NPY] = "application/x-npy",
};

const char *tile_format_media_type(enum tile_format f)
{
    return (unsigned)f < TILE_FMT_COUNT ? tile_media_types[f] : "application/octet-stream";
}

int tile_format_from_media_type(const char *s, size_t len, enum tile_format *out)
{
    size_t n = 0;
    while (n < len && s[n] != ';')
        n++;
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    while (n > 0 && (*s == ' ' || *s == '\t')) {
        s++;
        n--;
    }
    for (int f = 0; f < TILE_FMT_COUNT; f++) {
        if (strlen(tile_media_types[f]) == n && strncasecmp(tile_media_types[f], s, n) == 0) {
            *out = (enum tile_format)f;
            return 0;
        }
    }
    return -1;
}

/* ---- pieces: one encoded text per input element ------------------------ */

struct piece_builder {
    char *blob;
    size_t len, cap;
    size_t first; /* the first capacity */
    char *fixed;  /* blob starts as this buffer of cap bytes (not the heap's) */
};

/* Makes room for n more bytes. */
static int builder_reserve(struct piece_builder *b, uint64_t n, struct tile_error *e)
{
    if (b->blob == b->fixed && b->fixed && n <= b->cap - b->len)
        return 0;
    char *grown = b->blob == b->fixed ? NULL : b->blob; /* the fixed buffer is moved, never realloc'd */
    size_t cap = b->blob == b->fixed ? 0 : b->cap, first = b->first > b->cap ? b->first : 2 * b->cap;
    char *nb = n <= SIZE_MAX ? tile_grow(grown, &cap, b->len, (size_t)n, 1, first, SIZE_MAX) : NULL;
    if (!nb)
        return tile_error_set(e, TILE_ENOMEM, "cannot allocate %llu more bytes for the response", (unsigned long long)n);
    if (b->blob == b->fixed && b->len)
        memcpy(nb, b->fixed, b->len);
    b->blob = nb;
    b->cap = cap;
    return 0;
}

static int builder_append(struct piece_builder *b, const void *p, uint64_t n, struct tile_error *e)
{
    if (builder_reserve(b, n, e) < 0)
        return -1;
    memcpy(b->blob + b->len, p, n);
    b->len += n;
    return 0;
}

/* Appends input element i encoded for `fmt`. */
static int append_piece(struct piece_builder *b, enum tile_format fmt, bool complex_flat,
                        const struct tile_tensor *in, uint64_t i, struct tile_error *e)
{
    if (in->dtype != TILE_STRING) {
        char text[TILE_NUMFMT_MAX];
        size_t n = tile_json_format_element(in->dtype, (const char *)in->data + i * tile_dtype_size(in->dtype), text);
        bool strip = complex_flat && tile_dtype_traits(in->dtype)->cls == TILE_CLASS_COMPLEX;
        return builder_append(b, text + strip, n - 2 * strip, e); /* "[re,im]" -> "re,im" */
    }
    const struct tile_str *s = (const struct tile_str *)in->data + i;
    if (fmt == TILE_FMT_RAW) {
        if (s->len > UINT32_MAX)
            return tile_error_set(e, TILE_ENOTACCEPT, "string element %llu is longer than 4 GiB",
                                  (unsigned long long)i);
        uint32_t n32 = (uint32_t)s->len;
        if (builder_append(b, &n32, 4, e) < 0)
            return -1;
        return builder_append(b, s->ptr, s->len, e);
    }
    long need = tile_json_escape_string(s->ptr, s->len, NULL, 0);
    if (need < 0)
        return tile_error_set(e, TILE_ENOTACCEPT,
                              "string element %llu is not valid UTF-8 and cannot be sent as JSON; "
                              "ask for application/octet-stream",
                              (unsigned long long)i);
    if (builder_reserve(b, (uint64_t)need, e) < 0)
        return -1;
    tile_json_escape_string(s->ptr, s->len, b->blob + b->len, (size_t)need);
    b->len += (uint64_t)need;
    return 0;
}

static void fill_iota(void *dst, uint64_t n, uint64_t width)
{
    for (uint64_t i = 0; i < n; i++) {
        if (width == 4)
            ((uint32_t *)dst)[i] = (uint32_t)i;
        else
            ((uint64_t *)dst)[i] = i;
    }
}

/* Whether `p` points into the encoder's own small areas. */
static bool inside(const struct tile_encoder *enc, const void *p)
{
    const char *c = p, *lo = (const char *)enc->small_off, *hi = enc->small_blob + sizeof(enc->small_blob);
    return c >= lo && c < hi;
}

static void free_owned(const struct tile_encoder *enc, void *p)
{
    if (!inside(enc, p))
        free(p);
}

static int init_pieces(struct tile_encoder *enc, const struct tile_plan *p, struct tile_error *e)
{
    const struct tile_tensor *in = &enc->req.input;
    uint64_t n = p->in_elems;
    bool small = n <= TILE_ENCODE_SMALL;
    /* Sized for the input, at most 4 KiB to start: a small request's
     * pieces then fit in a block glibc serves from its per-thread cache. */
    struct piece_builder b = {.first = n < 4096 / 16 ? 64 + (size_t)n * 16 : 4096};
    if (small) {
        b.blob = b.fixed = enc->small_blob;
        b.cap = sizeof(enc->small_blob) - PIECE_SHORT;
    }
    enc->piece_off = small ? enc->small_off : malloc((n + 1) * sizeof(uint64_t));
    if (!enc->piece_off)
        return tile_error_set(e, TILE_ENOMEM, "cannot allocate the response index");
    for (uint64_t i = 0; i < n; i++) {
        enc->piece_off[i] = b.len;
        if (append_piece(&b, enc->fmt, enc->complex_flat, in, i, e) < 0) {
            if (b.blob != b.fixed)
                free(b.blob);
            return -1;
        }
    }
    enc->piece_off[n] = b.len;
    /* read_pieces reads up to PIECE_SHORT bytes past a piece's start: the
     * small buffer keeps them spare (above), a heap blob makes room. */
    if (b.blob != b.fixed && builder_reserve(&b, PIECE_SHORT, e) < 0) {
        free(b.blob);
        return -1;
    }
    enc->blob = b.blob;
    enc->separators = enc->fmt == TILE_FMT_JSON;
    uint64_t data;
    if (__builtin_mul_overflow(b.len, p->repeat_product, &data) ||
        __builtin_add_overflow(data, enc->separators && p->out_elems ? p->out_elems - 1 : 0, &data))
        return tile_error_set(e, TILE_ETOOBIG, "response size overflows 64 bits");
    enc->data_len = data;
    enc->index_width = n <= UINT32_MAX ? 4 : 8;
    enc->index_in = small ? (void *)enc->small_index : malloc(n ? n * enc->index_width : 1);
    /* One batch of output indices, or all of them when fewer. */
    uint64_t batch = p->out_elems < TILE_INDEX_BATCH ? (p->out_elems ? p->out_elems : 1) : TILE_INDEX_BATCH;
    enc->index_buf = batch <= TILE_ENCODE_SMALL ? (void *)enc->small_batch : malloc(batch * enc->index_width);
    if (!enc->index_in || !enc->index_buf)
        return tile_error_set(e, TILE_ENOMEM, "cannot allocate the response index");
    fill_iota(enc->index_in, n, enc->index_width);
    tile_plan_with_elem_size(p, enc->index_width, &enc->index_plan);
    return 0;
}

/* .npy strings become fixed-width elements, tiled like numbers. */
static int init_npy_strings(struct tile_encoder *enc, const struct tile_plan *p, uint64_t *width,
                            enum tile_npy_strkind *kind, struct tile_error *e)
{
    const struct tile_str *s = enc->req.input.data;
    *kind = enc->req.npy_strkind;
    for (int attempt = 0; attempt < 2; attempt++) {
        uint64_t item = tile_npy_string_itemsize(s, p->in_elems, *kind, width), bytes;
        if (__builtin_mul_overflow(item, p->in_elems ? p->in_elems : 1, &bytes))
            return tile_error_set(e, TILE_ETOOBIG, "string output size overflows 64 bits");
        free(enc->fixed_owned);
        enc->fixed_owned = calloc(1, bytes);
        if (!enc->fixed_owned)
            return tile_error_set(e, TILE_ENOMEM, "cannot allocate %llu bytes", (unsigned long long)bytes);
        struct tile_error local = {0};
        if (tile_npy_encode_strings(s, p->in_elems, *kind, *width, enc->fixed_owned, &local) == 0) {
            enc->fixed_in = enc->fixed_owned;
            tile_plan_with_elem_size(p, item, &enc->fixed_plan);
            return 0;
        }
        if (*kind == TILE_NPY_STR_BYTES)
            return tile_error_set(e, local.code, "%s", local.text);
        *kind = TILE_NPY_STR_BYTES; /* not UTF-8: keep the bytes as they are */
    }
    return -1;
}

static int init_head(struct tile_encoder *enc, const struct tile_plan *p, struct tile_error *e)
{
    if (enc->fmt == TILE_FMT_JSON) {
        /* {"output":{"dtype":"D","shape":[S],"data":[ put together by hand
         * (snprintf was a thousand instructions of every small request);
         * head holds the longest name and shape with room to spare. */
        static const char pre[] = "{\"output\":{\"dtype\":\"", mid[] = "\",\"shape\":", data[] = ",\"data\":[";
        const char *name = tile_dtype_name(p->dtype);
        size_t o = 0, len = strlen(name);
        memcpy(enc->head, pre, sizeof(pre) - 1);
        o += sizeof(pre) - 1;
        memcpy(enc->head + o, name, len);
        o += len;
        memcpy(enc->head + o, mid, sizeof(mid) - 1);
        o += sizeof(mid) - 1;
        o += tile_format_shape(p->out_shape, p->out_rank, true, enc->head + o, sizeof(enc->head) - o);
        memcpy(enc->head + o, data, sizeof(data)); /* with its NUL */
        enc->head_len = o + sizeof(data) - 1;
        return 0;
    }
    if (enc->fmt == TILE_FMT_NPY) {
        uint64_t width = 0;
        enum tile_npy_strkind kind = TILE_NPY_STR_UNICODE;
        if (p->dtype == TILE_STRING && init_npy_strings(enc, p, &width, &kind, e) < 0)
            return -1;
        long n = tile_npy_write_header(enc->head, sizeof(enc->head), p->dtype, p->out_rank, p->out_shape, kind,
                                       width, e);
        if (n < 0)
            return -1;
        enc->head_len = (uint64_t)n;
    }
    return 0;
}

static uint64_t tail_len(const struct tile_encoder *enc)
{
    if (enc->framed)
        return enc->tail_fixed_len;
    /* ]},"metrics":{"queue_us":N,"decode_us":N,"tile_us":N,"encode_us":N,"total_us":N}} */
    return enc->fmt == TILE_FMT_JSON ? strlen("]},\"metrics\":{\"queue_us\":,\"decode_us\":,\"tile_us\":,"
                                              "\"encode_us\":,\"total_us\":}}") +
                                           5 * TILE_METRIC_WIDTH
                                     : 0;
}

/* Installs a caller's frame in place of the format's head and tail. */
static int apply_frame(struct tile_encoder *enc, const struct tile_encode_frame *f, struct tile_error *e)
{
    size_t tail_len = f->tail ? f->tail_len : 0;
    if (f->head_len > TILE_ENCODE_HEAD_MAX || tail_len > TILE_ENCODE_TAIL_MAX)
        return tile_error_set(e, TILE_EINVAL, "response frame of %zu + %zu bytes is too long", f->head_len,
                              tail_len);
    memcpy(enc->head, f->head, f->head_len);
    enc->head_len = f->head_len;
    memcpy(enc->tail, f->tail ? f->tail : "", tail_len);
    enc->tail_fixed_len = tail_len;
    enc->framed = true;
    enc->complex_flat = f->complex_flat;
    return 0;
}

/* The last freed encoder, for the next (spare.h): an encoder is about
 * 15 KB, past glibc's per-thread caches. */
static struct tile_spare spare_enc;

struct tile_encoder *tile_encoder_new(enum tile_format fmt, const struct tile_plan *plan, struct tile_request *req,
                                      const struct tile_encode_frame *frame, uint64_t max_bytes,
                                      struct tile_error *e)
{
    struct tile_encoder *enc = tile_spare_take(&spare_enc, sizeof(*enc));
    if (!enc) {
        tile_request_free(req);
        tile_error_set(e, TILE_ENOMEM, "cannot allocate the response encoder");
        return NULL;
    }
    memset(enc, 0, offsetof(struct tile_encoder, req));
    enc->fmt = fmt;
    tile_request_move(&enc->req, req);
    enc->out_elems = plan->out_elems;
    if (frame ? apply_frame(enc, frame, e) < 0 : init_head(enc, plan, e) < 0)
        goto fail;
    if (fmt == TILE_FMT_JSON || (fmt == TILE_FMT_RAW && plan->dtype == TILE_STRING)) {
        if (init_pieces(enc, plan, e) < 0)
            goto fail;
    } else if (!enc->fixed_in) {
        enc->fixed_in = enc->req.input.data;
        tile_plan_copy(plan, &enc->fixed_plan);
    }
    if (!enc->piece_off)
        enc->data_len = enc->fixed_plan.out_bytes;
    enc->size = enc->head_len + enc->data_len + tail_len(enc);
    if (max_bytes && enc->size > max_bytes) {
        tile_error_set(e, TILE_ETOOBIG, "response would be %llu bytes, above the limit of %llu bytes",
                       (unsigned long long)enc->size, (unsigned long long)max_bytes);
        goto fail;
    }
    return enc;
fail:
    tile_encoder_free(enc);
    return NULL;
}

void tile_encoder_free(struct tile_encoder *enc)
{
    if (!enc)
        return;
    free_owned(enc, enc->blob);
    free_owned(enc, enc->piece_off);
    free_owned(enc, enc->index_in);
    free_owned(enc, enc->index_buf);
    free(enc->fixed_owned);
    tile_tensor_free(&enc->req.input);
    tile_spare_give(&spare_enc, enc);
}

uint64_t tile_encoder_size(const struct tile_encoder *enc)
{
    return enc->size;
}

uint64_t tile_encoder_remaining(const struct tile_encoder *enc)
{
    return enc->size - enc->pos;
}

void tile_encoder_sections(const struct tile_encoder *enc, uint64_t *head_len, uint64_t *data_len)
{
    *head_len = enc->head_len;
    *data_len = enc->data_len;
}

void tile_encoder_set_timings(struct tile_encoder *enc, const struct tile_timings *tm)
{
    enc->metrics = *tm;
}

/* The input index of each of the plan's first n output elements, counted
 * with an odometer over the output's coordinates: out[k] is the linear
 * index of the input element that output element k copies (the input's
 * coordinates are the output's modulo the input's shape). What tiling an
 * iota with the kernel gives, without the kernel's set-up, which was most
 * of a small reply's index batch. */
static void count_indices(const struct tile_plan *p, uint32_t *out, uint64_t n)
{
    int r = p->out_rank;
    if (r == 0) {
        if (n)
            out[0] = 0;
        return;
    }
    uint64_t stride[TILE_MAX_RANK], o[TILE_MAX_RANK], in[TILE_MAX_RANK], src = 0, s = 1;
    for (int d = r - 1; d >= 0; d--) {
        stride[d] = s;
        s *= (uint64_t)p->in_shape[d];
        o[d] = in[d] = 0;
    }
    /* A row of the output at a time: the input's last axis, repeated. */
    uint64_t row_in = (uint64_t)p->in_shape[r - 1], row_out = (uint64_t)p->out_shape[r - 1];
    for (uint64_t k = 0; k < n;) {
        uint64_t m = row_out < n - k ? row_out : n - k;
        for (uint64_t j = 0, c = 0; j < m; j++) {
            out[k + j] = (uint32_t)(src + c);
            if (++c == row_in)
                c = 0;
        }
        k += m;
        for (int d = r - 2; d >= 0; d--) {
            src += stride[d];
            if (++in[d] == (uint64_t)p->in_shape[d]) {
                in[d] = 0;
                src -= stride[d] * (uint64_t)p->in_shape[d];
            }
            if (++o[d] < (uint64_t)p->out_shape[d])
                break;
            o[d] = 0; /* and in[d] is 0 too: out_shape is in_shape times repeats */
        }
    }
}

/* Input index of output element k (refills the index batch as needed). */
static uint64_t source_index(struct tile_encoder *enc, uint64_t k)
{
    if (k < enc->index_first || k >= enc->index_first + enc->index_count) {
        uint64_t n = enc->out_elems - k < TILE_INDEX_BATCH ? enc->out_elems - k : TILE_INDEX_BATCH;
        if (k == 0 && n == enc->out_elems && enc->index_width == 4)
            count_indices(&enc->index_plan, enc->index_buf, n); /* the whole output in one batch */
        else
            tile_read(&enc->index_plan, enc->index_in, k * enc->index_width, n * enc->index_width, enc->index_buf);
        enc->index_first = k;
        enc->index_count = n;
    }
    uint64_t j = k - enc->index_first;
    return enc->index_width == 4 ? enc->index_buf[j] : ((uint64_t *)(void *)enc->index_buf)[j];
}

/* Copies data bytes from the pieces, continuing at the cursor. The cursor
 * and the pieces are kept in locals, stored back at the end: a store into
 * buf (a char pointer) may alias the encoder as far as the compiler knows. */
static size_t read_pieces(struct tile_encoder *enc, char *buf, size_t cap)
{
    size_t n = 0;
    const uint64_t total = enc->out_elems;
    const uint64_t *const off = enc->piece_off;
    const char *const blob = enc->blob;
    const bool separators = enc->separators, wide = enc->index_width != 4;
    uint64_t elem = enc->elem, elem_off = enc->elem_off;
    uint64_t first = enc->index_first, count = enc->index_count;
    if (separators && elem_off == 0 && !wide && elem + 1 < total) {
        if (elem < first || elem >= first + count) {
            source_index(enc, elem); /* loads the batch from elem */
            first = enc->index_first;
            count = enc->index_count;
        }
        /* Short pieces each followed by its comma, while the index batch,
         * the buffer and the elements before the last last: the loop below
         * with its cases taken out (about a third of the instructions of a
         * small JSON reply's data). It stops at the first piece it does not
         * take, which the loop below takes up. */
        const uint32_t *idx = enc->index_buf;
        uint64_t stop = first + count < total - 1 ? first + count : total - 1;
        while (elem < stop && cap - n > PIECE_SHORT + 1) {
            uint64_t src = idx[elem - first];
            uint64_t start = off[src], plen = off[src + 1] - start;
            if (plen > PIECE_SHORT)
                break;
            memcpy(buf + n, blob + start, PIECE_SHORT); /* room: see below */
            buf[n + plen] = ',';
            n += plen + 1;
            elem++;
        }
    }
    while (n < cap && elem < total) {
        if (elem < first || elem >= first + count) {
            source_index(enc, elem); /* refills the batch */
            first = enc->index_first;
            count = enc->index_count;
        }
        uint64_t j = elem - first;
        uint64_t src = wide ? ((const uint64_t *)(const void *)enc->index_buf)[j] : enc->index_buf[j];
        uint64_t start = off[src], plen = off[src + 1] - start;
        bool sep = separators && elem + 1 < total;
        if (elem_off == 0 && plen <= PIECE_SHORT && cap - n > PIECE_SHORT) {
            /* A short piece whole (a number's text, mostly): one fixed-size
             * copy, not a call. The blob has PIECE_SHORT bytes to spare past
             * its last piece (init_pieces), and what lands past the piece
             * here is inside [n, cap), which this call writes in full. */
            memcpy(buf + n, blob + start, PIECE_SHORT);
            n += plen;
            if (sep)
                buf[n++] = ',';
            elem++;
            continue;
        }
        uint64_t with_sep = plen + sep;
        if (elem_off == 0 && plen <= PIECE_SHORT && with_sep <= cap - n) {
            /* The last few short pieces, within PIECE_SHORT of the end:
             * byte by byte, not a call per piece. */
            for (uint64_t b = 0; b < plen; b++)
                buf[n + b] = blob[start + b];
            n += plen;
            if (sep)
                buf[n++] = ',';
            elem++;
            continue;
        }
        if (elem_off < plen) {
            uint64_t take = plen - elem_off < cap - n ? plen - elem_off : cap - n;
            memcpy(buf + n, blob + start + elem_off, take);
            n += take;
            elem_off += take;
        }
        if (elem_off == plen && with_sep > plen && n < cap) {
            buf[n++] = ',';
            elem_off++;
        }
        if (elem_off == with_sep) {
            elem++;
            elem_off = 0;
        }
    }
    enc->elem = elem;
    enc->elem_off = elem_off;
    return n;
}

/* Writes the closing text with the metrics, padded to a fixed width when
 * `width` is non-zero. */
/* Appends `label` and `v` in decimal, left-padded with spaces to `width`;
 * returns the new end. Per-request JSON bodies call this on every reply,
 * where snprintf's generality showed up in profiles. */
static char *put_metric(char *p, const char *label, size_t l, uint64_t v, int width)
{
    char digits[20];
    int n = (int)tile_format_u64(digits, v);
    memcpy(p, label, l);
    p += l;
    for (int i = n; i < width; i++)
        *p++ = ' ';
    memcpy(p, digits, (size_t)n);
    return p + n;
}
#define PUT_METRIC(p, lit, ...) put_metric(p, lit, sizeof(lit) - 1, __VA_ARGS__)

static size_t write_tail(const struct tile_encoder *enc, int width, char *out)
{
    const struct tile_timings *m = &enc->metrics;
    char *p = out;
    p = PUT_METRIC(p, "]},\"metrics\":{\"queue_us\":", m->queue_us, width);
    p = PUT_METRIC(p, ",\"decode_us\":", m->decode_us, width);
    p = PUT_METRIC(p, ",\"tile_us\":", m->tile_us, width);
    p = PUT_METRIC(p, ",\"encode_us\":", m->encode_us, width);
    p = PUT_METRIC(p, ",\"total_us\":", m->total_us, width);
    memcpy(p, "}}", 3);
    return (size_t)(p + 2 - out);
}

uint64_t tile_encoder_rewrite_metrics(const struct tile_encoder *enc, char *body)
{
    char tail[256];
    if (enc->fmt != TILE_FMT_JSON || enc->framed)
        return enc->size;
    uint64_t start = enc->size - tail_len(enc);
    size_t n = write_tail(enc, 0, tail);
    memcpy(body + start, tail, n);
    return start + n;
}

size_t tile_encoder_read(struct tile_encoder *enc, void *out, size_t cap)
{
    char *buf = out;
    size_t n = 0;
    while (n < cap && enc->pos < enc->size) {
        uint64_t pos = enc->pos, want = cap - n, got;
        if (pos < enc->head_len) {
            got = enc->head_len - pos < want ? enc->head_len - pos : want;
            memcpy(buf + n, enc->head + pos, got);
        } else if (pos < enc->head_len + enc->data_len) {
            uint64_t off = pos - enc->head_len, left = enc->data_len - off;
            if (enc->piece_off) {
                got = read_pieces(enc, buf + n, left < want ? left : want);
            } else {
                got = left < want ? left : want;
                tile_read(&enc->fixed_plan, enc->fixed_in, off, got, buf + n);
            }
        } else {
            char metrics[256];
            const char *t = enc->framed ? enc->tail : metrics;
            size_t tl = enc->framed ? enc->tail_fixed_len : write_tail(enc, TILE_METRIC_WIDTH, metrics);
            uint64_t off = pos - enc->head_len - enc->data_len;
            got = tl - off < want ? tl - off : want;
            memcpy(buf + n, t + off, got);
        }
        n += got;
        enc->pos += got;
    }
    return n;
}

/* Fixed-width data in the format's own frame (no pieces, no converted
 * copy, no tail): the kernel can write it straight into the body, with
 * the pool's help for large outputs, instead of range by range. */
bool tile_encoder_tiles_directly(const struct tile_encoder *enc)
{
    return !enc->piece_off && enc->fixed_in == enc->req.input.data && enc->tail_fixed_len == 0 &&
           enc->fmt != TILE_FMT_JSON;
}

bool tile_encoder_fill(struct tile_encoder *enc, void *buf, struct tile_pool *pool)
{
    enc->pos = 0;
    enc->elem = enc->elem_off = 0;
    if (!tile_encoder_tiles_directly(enc)) {
        tile_encoder_read(enc, buf, enc->size);
        return false;
    }
    memcpy(buf, enc->head, enc->head_len);
    tile_execute(&enc->fixed_plan, enc->fixed_in, (char *)buf + enc->head_len, pool);
    enc->pos = enc->size;
    return true;
}
