/* npy.c - NumPy .npy files: header parsing, decoding, writing (see npy.h).
 *
 * DESIGN. The header is a Python dict literal. Instead of matching the exact
 * text numpy happens to write, a small recursive-descent parser reads the
 * literal grammar (quoted strings, True/False, integer tuples, whitespace,
 * trailing commas), so headers from other writers or written by hand load,
 * and anything else is refused with a message saying what and where. What
 * it reads, numpy reads alike (tests/api/test_npy_differential.py). The
 * descr maps to a dtype through the trait table (npy_kind and width), never
 * a per-dtype switch. Decoding visits the file's elements in C order with one
 * strided walk that also covers Fortran order (any rank), converting each
 * element with one routine that byte-swaps per scalar unit (so a complex
 * swaps its two halves); the common case, C order and little-endian, is one
 * memcpy. Strings are measured, then copied into one blob: a decoded string
 * tensor costs two allocations whatever its size.
 */
#include "npy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "numfmt.h"
#include "utf8.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tiled assumes a little-endian host: .npy data is copied without conversion"
#endif

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_ALIGN 64
/* Longest shape tuple text: 64 dims of up to 19 digits plus ", ". */
#define NPY_TUPLE_CAP (TILE_MAX_RANK * 21 + 4)
/* Longest header the writer produces (the dict is ASCII and < 1.5 KiB). */
#define NPY_HEAD_CAP 4096
/* String elements are converted for writing in buffers of about this size. */
#define NPY_WRITE_CHUNK (256u << 10)

/* ---- small helpers ------------------------------------------------------ */

/* Appends a shape as a Python tuple: "()", "(3,)", "(2, 3)". */
static void npy_format_tuple(struct tile_text *t, const int64_t *shape, int rank)
{
    tile_text_put(t, "(", 1);
    for (int i = 0; i < rank; i++) {
        if (i)
            tile_text_put(t, ", ", 2);
        tile_text_i64(t, shape[i]);
    }
    tile_text_str(t, rank == 1 ? ",)" : ")");
}

/* Appends the descr text of a dtype as the file states it: "<f4", "|b1", ">U5". */
static void npy_format_descr(struct tile_text *t, const struct tile_npy_header *h)
{
    const struct tile_dtype_traits *tr = tile_dtype_traits(h->dtype);
    bool str = tr->cls == TILE_CLASS_STRING, u = str && h->strkind == TILE_NPY_STR_UNICODE;
    char kind[2] = {str ? (u ? (h->big_endian ? '>' : '<') : '|') : tr->size == 1 ? '|' : h->big_endian ? '>' : '<',
                    str ? (u ? 'U' : 'S') : tr->npy_kind};
    tile_text_put(t, kind, 2);
    tile_text_u64(t, str ? h->strwidth : tr->size);
}

/* Bytes per scalar unit to reverse when reading a big-endian file (0: none). */
static size_t npy_swap_unit(const struct tile_npy_header *h)
{
    const struct tile_dtype_traits *t = tile_dtype_traits(h->dtype);
    size_t unit = t->cls == TILE_CLASS_STRING ? (h->strkind == TILE_NPY_STR_UNICODE ? 4 : 1) : t->size / t->parts;
    return h->big_endian && unit > 1 ? unit : 0;
}

/* Copies one element of `size` bytes, reversing each `unit`-byte scalar. */
static void npy_copy_elem(uint8_t *dst, const uint8_t *src, size_t size, size_t unit)
{
    if (!unit) {
        memcpy(dst, src, size);
        return;
    }
    for (size_t base = 0; base < size; base += unit) {
        for (size_t i = 0; i < unit; i++)
            dst[base + i] = src[base + unit - 1 - i];
    }
}

/* ---- header dict parser --------------------------------------------------- */

struct npy_parser {
    const char *start, *p, *end;
    struct tile_npy_header *h;
    struct tile_error *e;
};

/* Python's whitespace between tokens of a bracketed literal: space, tab,
 * form feed and line ends. */
static void npy_skip_ws(struct npy_parser *ps)
{
    while (ps->p < ps->end &&
           (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\f' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

/* Skips whitespace, then consumes `c` if it comes next. */
static bool npy_accept(struct npy_parser *ps, char c)
{
    npy_skip_ws(ps);
    if (ps->p < ps->end && *ps->p == c) {
        ps->p++;
        return true;
    }
    return false;
}

static int npy_expected(struct npy_parser *ps, const char *what)
{
    if (ps->p >= ps->end)
        return tile_error_set(ps->e, TILE_EINVAL, "invalid .npy header: expected %s but the header dict ends", what);
    return tile_error_set(ps->e, TILE_EINVAL, "invalid .npy header: expected %s at byte %zu of the header dict", what,
                          (size_t)(ps->p - ps->start));
}

static int npy_expect(struct npy_parser *ps, char c, const char *what)
{
    return npy_accept(ps, c) ? 0 : npy_expected(ps, what);
}

/* A quoted string literal without escapes: 'abc' or "abc". */
static int npy_string(struct npy_parser *ps, const char **s, size_t *len)
{
    npy_skip_ws(ps);
    if (ps->p >= ps->end || (*ps->p != '\'' && *ps->p != '"'))
        return npy_expected(ps, "a quoted string");
    char quote = *ps->p++;
    const char *begin = ps->p;
    while (ps->p < ps->end && *ps->p != quote) {
        if (*ps->p == '\\')
            return tile_error_set(ps->e, TILE_EINVAL, "invalid .npy header: escape sequences in strings are not supported");
        if (*ps->p == '\n')
            break;
        ps->p++;
    }
    if (ps->p >= ps->end || *ps->p != quote)
        return tile_error_set(ps->e, TILE_EINVAL, "invalid .npy header: unterminated string");
    *s = begin;
    *len = (size_t)(ps->p - begin);
    ps->p++;
    return 0;
}

/* The decimal item size that ends a descr, from s[at] on. */
static int npy_descr_width(const char *s, size_t len, size_t at, uint64_t *width, struct tile_error *e)
{
    uint64_t w = 0;
    if (at >= len)
        return tile_error_set(e, TILE_EINVAL, "descr '%.*s' has no item size", (int)len, s);
    for (size_t i = at; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return tile_error_set(e, TILE_EINVAL, "unsupported descr '%.*s'", (int)len, s);
        if (__builtin_mul_overflow(w, 10, &w) || __builtin_add_overflow(w, (uint64_t)(s[i] - '0'), &w))
            return tile_error_set(e, TILE_ETOOBIG, "descr '%.*s' has an item size beyond 64 bits", (int)len, s);
    }
    *width = w;
    return 0;
}

static const struct {
    char kind;
    const char *why;
} npy_refused[] = {
    {'O', "object arrays (pickled Python objects) are not supported"},
    {'M', "datetime64 arrays are not supported"},
    {'m', "timedelta64 arrays are not supported"},
    {'V', "void (raw record) arrays are not supported"},
};

static int npy_string_descr(const char *s, size_t len, char kind, uint64_t width, struct tile_npy_header *h,
                            struct tile_error *e)
{
    h->dtype = TILE_STRING;
    h->strkind = kind == 'U' ? TILE_NPY_STR_UNICODE : TILE_NPY_STR_BYTES;
    h->strwidth = width;
    if (__builtin_mul_overflow(width, kind == 'U' ? 4 : 1, &h->item_size))
        return tile_error_set(e, TILE_ETOOBIG, "descr '%.*s' has an item size beyond 64 bits", (int)len, s);
    return 0;
}

/* Maps a descr string ("<f4", ">c16", "|S3", "<U5") to the header fields. */
static int npy_parse_descr(const char *s, size_t len, struct tile_npy_header *h, struct tile_error *e)
{
    size_t at = 0;
    if (len && memchr("<>|=", s[0], 4))
        h->big_endian = s[at++] == '>';
    if (at >= len)
        return tile_error_set(e, TILE_EINVAL, "descr '%.*s' names no type", (int)len, s);
    char kind = s[at++];
    for (size_t i = 0; i < sizeof(npy_refused) / sizeof(npy_refused[0]); i++) {
        if (kind == npy_refused[i].kind)
            return tile_error_set(e, TILE_EUNSUPPORTED, "descr '%.*s': %s", (int)len, s, npy_refused[i].why);
    }
    uint64_t width = 0;
    if (npy_descr_width(s, len, at, &width, e) < 0)
        return -1;
    if (kind == 'U' || kind == 'S')
        return npy_string_descr(s, len, kind, width, h, e);
    for (int d = 0; d < TILE_DTYPE_COUNT; d++) {
        const struct tile_dtype_traits *t = tile_dtype_traits((enum tile_dtype)d);
        if (t->npy_kind && t->npy_kind == kind && t->wire_size == width) {
            h->dtype = (enum tile_dtype)d;
            h->item_size = width;
            return 0;
        }
    }
    return tile_error_set(e, TILE_EUNSUPPORTED, "unsupported descr '%.*s'", (int)len, s);
}

static int npy_value_descr(struct npy_parser *ps)
{
    npy_skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '[')
        return tile_error_set(ps->e, TILE_EUNSUPPORTED, "structured dtypes (a list descr) are not supported");
    const char *s;
    size_t len;
    if (npy_string(ps, &s, &len) < 0)
        return -1;
    return npy_parse_descr(s, len, ps->h, ps->e);
}

static int npy_value_fortran(struct npy_parser *ps)
{
    npy_skip_ws(ps);
    const char *word = ps->p;
    while (ps->p < ps->end && ((*ps->p >= 'A' && *ps->p <= 'Z') || (*ps->p >= 'a' && *ps->p <= 'z')))
        ps->p++;
    size_t len = (size_t)(ps->p - word);
    if (len == 4 && memcmp(word, "True", 4) == 0)
        ps->h->fortran_order = true;
    else if (len == 5 && memcmp(word, "False", 5) == 0)
        ps->h->fortran_order = false;
    else
        return tile_error_set(ps->e, TILE_EINVAL, "invalid .npy header: 'fortran_order' must be True or False");
    return 0;
}

/* One dimension as Python reads an integer literal (what numpy's reader
 * does): decimal digits without leading zeros ("0" and "00" are zero,
 * "01" is no literal), optionally signed to name a negative dim, and in
 * format versions 1.0 and 2.0, which Python 2 wrote, with its 'L' suffix
 * (numpy strips it there and nowhere else). */
static int npy_dim(struct npy_parser *ps, int i, int64_t *out)
{
    npy_skip_ws(ps);
    bool neg = ps->p < ps->end && *ps->p == '-';
    ps->p += neg;
    const char *digits = ps->p;
    uint64_t v = 0;
    for (; ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9'; ps->p++) {
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(*ps->p - '0'), &v) ||
            v > INT64_MAX)
            return tile_error_set(ps->e, TILE_ETOOBIG, "invalid .npy header: shape[%d] is beyond 64 bits", i);
    }
    if (ps->p == digits)
        return npy_expected(ps, "an integer in 'shape'");
    if (*digits == '0' && v != 0)
        return tile_error_set(ps->e, TILE_EINVAL, "invalid .npy header: shape[%d] has a leading zero", i);
    if (ps->p < ps->end && *ps->p == 'L' && ps->h->major <= 2)
        ps->p++;
    if (neg && v)
        return tile_error_set(ps->e, TILE_EINVAL, "invalid .npy header: shape[%d] is -%llu; dimensions must be >= 0",
                              i, (unsigned long long)v);
    *out = (int64_t)v;
    return 0;
}

static int npy_value_shape(struct npy_parser *ps)
{
    struct tile_npy_header *h = ps->h;
    bool trailing_comma = false;
    if (npy_expect(ps, '(', "a tuple '(' for 'shape'") < 0)
        return -1;
    h->rank = 0;
    while (!npy_accept(ps, ')')) {
        if (h->rank == TILE_MAX_RANK)
            return tile_error_set(ps->e, TILE_EINVAL, "shape has more than %d dimensions", TILE_MAX_RANK);
        if (npy_dim(ps, h->rank, &h->shape[h->rank]) < 0)
            return -1;
        h->rank++;
        trailing_comma = npy_accept(ps, ',');
        if (!trailing_comma && npy_expect(ps, ')', "',' or ')' in 'shape'") < 0)
            return -1;
        if (!trailing_comma)
            break;
    }
    if (h->rank == 1 && !trailing_comma)
        return tile_error_set(ps->e, TILE_EINVAL,
                              "invalid .npy header: 'shape' (%lld) is an integer, not a tuple (write (%lld,))",
                              (long long)h->shape[0], (long long)h->shape[0]);
    return 0;
}

static const struct npy_key {
    const char *name;
    int (*parse)(struct npy_parser *ps);
} npy_keys[] = {
    {"descr", npy_value_descr},
    {"fortran_order", npy_value_fortran},
    {"shape", npy_value_shape},
};
#define NPY_NKEYS (int)(sizeof(npy_keys) / sizeof(npy_keys[0]))

static int npy_item(struct npy_parser *ps, unsigned *seen)
{
    const char *key;
    size_t len;
    if (npy_string(ps, &key, &len) < 0)
        return -1;
    for (int k = 0; k < NPY_NKEYS; k++) {
        if (strlen(npy_keys[k].name) != len || memcmp(npy_keys[k].name, key, len) != 0)
            continue;
        if (*seen & (1u << k))
            return tile_error_set(ps->e, TILE_EINVAL, "invalid .npy header: key '%s' appears twice", npy_keys[k].name);
        *seen |= 1u << k;
        if (npy_expect(ps, ':', "':' after a key") < 0)
            return -1;
        return npy_keys[k].parse(ps);
    }
    return tile_error_set(ps->e, TILE_EINVAL,
                          "invalid .npy header: unknown key '%.*s' (expected 'descr', 'fortran_order' and 'shape')",
                          (int)(len > 40 ? 40 : len), key);
}

/* The text around the dict, which numpy hands to Python as lines of code:
 * spaces, tabs, form feeds and line ends (\n, \r\n), as Python reads them
 * in every format version. Refused: a lone \r (a line end in some places
 * and not in others), the dict's own line starting with a form feed or,
 * after blank lines, with any space (an indented expression), and spaces
 * after the last line end (an indented empty line at the end). */
static int npy_outer_ws(struct npy_parser *ps, bool before)
{
    bool line_end = false, spaced = false, form_feed = false; /* spaced, form_feed: since the last line end */
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == ' ') { /* numpy pads the header with a run of spaces: eight at a time */
            const char *q = ps->p;
            for (uint64_t w; ps->end - q >= 8 && (memcpy(&w, q, 8), w == UINT64_C(0x2020202020202020));)
                q += 8;
            while (q < ps->end && *q == ' ')
                q++;
            ps->p = q;
            spaced = true;
            continue;
        }
        if (c == '\r' && (ps->end - ps->p < 2 || ps->p[1] != '\n'))
            return tile_error_set(ps->e, TILE_EINVAL,
                                  "invalid .npy header: a carriage return without a line feed at byte %zu of the "
                                  "header dict",
                                  (size_t)(ps->p - ps->start));
        if (c == '\r' || c == '\n') {
            ps->p += c == '\r' ? 2 : 1;
            line_end = true;
            spaced = form_feed = false;
        } else if (c == ' ' || c == '\t' || c == '\f') {
            spaced = true;
            form_feed |= c == '\f';
            ps->p++;
        } else {
            break;
        }
    }
    if (before && (form_feed || (line_end && spaced)))
        return tile_error_set(ps->e, TILE_EINVAL, "invalid .npy header: the header dict is indented");
    if (!before && line_end && spaced)
        return tile_error_set(ps->e, TILE_EINVAL, "invalid .npy header: spaces after the header's last line end");
    return 0;
}

/* dict := '{' [item (',' item)* [',']] '}', with only whitespace around. */
static int npy_parse_dict(struct npy_parser *ps)
{
    unsigned seen = 0;
    if (npy_outer_ws(ps, true) < 0 || npy_expect(ps, '{', "'{'") < 0)
        return -1;
    while (!npy_accept(ps, '}')) {
        if (npy_item(ps, &seen) < 0)
            return -1;
        if (!npy_accept(ps, ',')) {
            if (npy_expect(ps, '}', "',' or '}'") < 0)
                return -1;
            break;
        }
    }
    if (npy_outer_ws(ps, false) < 0)
        return -1;
    if (ps->p != ps->end)
        return npy_expected(ps, "only padding after the header dict");
    for (int k = 0; k < NPY_NKEYS; k++) {
        if (!(seen & (1u << k)))
            return tile_error_set(ps->e, TILE_EINVAL, "invalid .npy header: the header dict has no '%s' key",
                                  npy_keys[k].name);
    }
    return 0;
}

/* ---- header ----------------------------------------------------------- */

/* Magic, version and header length: sets major/minor and header_len. */
static int npy_preamble(const uint8_t *b, size_t len, struct tile_npy_header *h, size_t *dict_at, struct tile_error *e)
{
    if (len < NPY_MAGIC_LEN + 2 || memcmp(b, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
        return tile_error_set(e, TILE_EINVAL, "not a .npy file (it does not start with \\x93NUMPY)");
    h->major = b[6];
    h->minor = b[7];
    if (h->minor != 0 || h->major < 1 || h->major > 3)
        return tile_error_set(e, TILE_EUNSUPPORTED, "unsupported .npy format version %d.%d (expected 1.0, 2.0 or 3.0)",
                              h->major, h->minor);
    size_t lenbytes = h->major == 1 ? 2 : 4;
    if (len < 8 + lenbytes)
        return tile_error_set(e, TILE_EINVAL, "truncated .npy header: the file ends inside the header length");
    uint64_t dict_len = 0;
    for (size_t i = 0; i < lenbytes; i++)
        dict_len |= (uint64_t)b[8 + i] << (8 * i);
    *dict_at = 8 + lenbytes;
    if (dict_len > len - *dict_at)
        return tile_error_set(e, TILE_EINVAL,
                              "truncated .npy header: header length %llu goes beyond the end of the file (%zu bytes)",
                              (unsigned long long)dict_len, len);
    h->header_len = *dict_at + (size_t)dict_len;
    return 0;
}

int tile_npy_parse_header(const void *buf, size_t len, int max_rank, struct tile_npy_header *h,
                          struct tile_error *e)
{
    const uint8_t *b = buf;
    size_t dict_at = 0;
    memset(h, 0, sizeof(*h));
    h->dtype = TILE_DTYPE_INVALID;
    if (npy_preamble(b, len, h, &dict_at, e) < 0)
        return -1;
    struct npy_parser ps = {(const char *)b + dict_at, (const char *)b + dict_at, (const char *)b + h->header_len, h, e};
    if (npy_parse_dict(&ps) < 0)
        return -1;
    int limit = max_rank > 0 && max_rank < TILE_MAX_RANK ? max_rank : TILE_MAX_RANK;
    if (h->rank > limit)
        return tile_error_set(e, TILE_EINVAL, "the .npy array has rank %d, above the maximum rank of %d", h->rank,
                              limit);
    if (tile_shape_elems(h->shape, h->rank, &h->nelem, e) < 0)
        return -1;
    /* As numpy: the item size times the non-zero dims, an empty array's too. */
    if (!tile_shape_span_fits(h->shape, h->rank, h->item_size))
        return tile_error_set(e, TILE_ETOOBIG, "the .npy array's byte size overflows 64 bits");
    h->data_bytes = h->nelem * h->item_size; /* within the span */
    return 0;
}

/* ---- decoding ------------------------------------------------------------ */

/* Visits file element offsets in C order, whatever the file's order. */
struct npy_walk {
    int rank;
    const int64_t *shape;
    uint64_t stride[TILE_MAX_RANK]; /* file bytes per step along each axis */
    int64_t idx[TILE_MAX_RANK];
    uint64_t off;
};

/* Only for non-empty arrays: then no stride product exceeds data_bytes. */
static void npy_walk_init(struct npy_walk *w, const struct tile_npy_header *h)
{
    uint64_t s = h->item_size;
    memset(w, 0, sizeof(*w));
    w->rank = h->rank;
    w->shape = h->shape;
    for (int k = 0; k < h->rank; k++) {
        int axis = h->fortran_order ? k : h->rank - 1 - k;
        w->stride[axis] = s;
        s *= (uint64_t)h->shape[axis];
    }
}

/* Returns the current offset and steps to the next element. */
static uint64_t npy_walk_next(struct npy_walk *w)
{
    uint64_t cur = w->off;
    for (int k = w->rank - 1; k >= 0; k--) {
        w->off += w->stride[k];
        if (++w->idx[k] < w->shape[k])
            break;
        w->off -= w->stride[k] * (uint64_t)w->shape[k];
        w->idx[k] = 0;
    }
    return cur;
}

static void npy_decode_fixed(const uint8_t *src, const struct tile_npy_header *h, struct tile_tensor *out)
{
    size_t unit = npy_swap_unit(h), size = (size_t)h->item_size;
    uint8_t *dst = out->data;
    if (!h->fortran_order && !unit) {
        memcpy(dst, src, (size_t)h->data_bytes);
        return;
    }
    struct npy_walk w;
    npy_walk_init(&w, h);
    for (uint64_t i = 0; i < h->nelem; i++)
        npy_copy_elem(dst + i * size, src + npy_walk_next(&w), size, unit);
}

/* UTF-8 form of file string element `index` at src: its length, written to
 * dst unless dst is NULL. Trailing NULs are dropped, as numpy does. */
static int npy_string_elem(const uint8_t *src, const struct tile_npy_header *h, uint64_t index, char *dst,
                           uint64_t *out_len, struct tile_error *e)
{
    uint64_t n = h->strwidth, len = 0;
    if (h->strkind == TILE_NPY_STR_BYTES) {
        while (n && src[n - 1] == 0)
            n--;
        if (dst)
            memcpy(dst, src, (size_t)n);
        *out_len = n;
        return 0;
    }
    size_t unit = npy_swap_unit(h);
    uint32_t cp = 0;
    for (; n; n--) {
        npy_copy_elem((uint8_t *)&cp, src + 4 * (n - 1), 4, unit);
        if (cp)
            break;
    }
    char tmp[4];
    for (uint64_t i = 0; i < n; i++) {
        npy_copy_elem((uint8_t *)&cp, src + 4 * i, 4, unit);
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return tile_error_set(e, TILE_EINVAL,
                                  "string element %llu holds 0x%lX at character %llu, which is not a Unicode scalar value",
                                  (unsigned long long)index, (unsigned long)cp, (unsigned long long)i);
        len += tile_utf8_put(cp, dst ? dst + len : tmp);
    }
    *out_len = len;
    return 0;
}

/* Two passes over the file's strings: measure the UTF-8 total, then copy
 * into one owned blob and point the views into it. */
static int npy_decode_strings(const uint8_t *src, const struct tile_npy_header *h, struct tile_tensor *out,
                              struct tile_error *e)
{
    struct npy_walk w;
    uint64_t total = 0, len = 0;
    npy_walk_init(&w, h);
    for (uint64_t i = 0; i < h->nelem; i++) {
        if (npy_string_elem(src + npy_walk_next(&w), h, i, NULL, &len, e) < 0)
            return -1;
        total += len; /* at most data_bytes */
    }
    out->blob = malloc(total ? (size_t)total : 1);
    if (!out->blob)
        return tile_error_set(e, TILE_ENOMEM, "cannot allocate %llu bytes of strings", (unsigned long long)total);
    out->blob_len = total;
    struct tile_str *views = out->data;
    uint64_t pos = 0;
    npy_walk_init(&w, h);
    for (uint64_t i = 0; i < h->nelem; i++) {
        npy_string_elem(src + npy_walk_next(&w), h, i, out->blob + pos, &len, NULL);
        views[i].ptr = out->blob + pos;
        views[i].len = len;
        pos += len;
    }
    return 0;
}

static int npy_check_data_len(const struct tile_npy_header *h, size_t len, struct tile_error *e)
{
    char tuple[NPY_TUPLE_CAP], descr[32];
    uint64_t have = len - h->header_len;
    if (have == h->data_bytes)
        return 0;
    npy_format_tuple(&(struct tile_text){tuple, sizeof(tuple), 0, false}, h->shape, h->rank);
    npy_format_descr(&(struct tile_text){descr, sizeof(descr), 0, false}, h);
    if (have < h->data_bytes)
        return tile_error_set(e, TILE_EINVAL,
                              "truncated .npy data: shape %s of '%s' needs %llu bytes after the header, the file has %llu",
                              tuple, descr, (unsigned long long)h->data_bytes, (unsigned long long)have);
    return tile_error_set(e, TILE_EINVAL,
                          "the .npy file has %llu bytes after its data (shape %s of '%s' needs exactly %llu)",
                          (unsigned long long)(have - h->data_bytes), tuple, descr, (unsigned long long)h->data_bytes);
}

int tile_npy_decode(const void *buf, size_t len, int max_rank, uint64_t max_bytes, struct tile_tensor *out,
                    struct tile_npy_header *hout, struct tile_error *e)
{
    struct tile_npy_header h;
    memset(out, 0, sizeof(*out));
    out->dtype = TILE_DTYPE_INVALID;
    if (tile_npy_parse_header(buf, len, max_rank, &h, e) < 0)
        return -1;
    if (hout)
        *hout = h;
    if (npy_check_data_len(&h, len, e) < 0)
        return -1;
    if (tile_tensor_init(out, h.dtype, h.rank, h.shape, max_bytes, e) < 0)
        return -1;
    const uint8_t *src = (const uint8_t *)buf + h.header_len;
    if (h.nelem == 0)
        return 0;
    if (h.dtype != TILE_STRING) {
        npy_decode_fixed(src, &h, out);
        return 0;
    }
    if (npy_decode_strings(src, &h, out, e) < 0) {
        tile_tensor_free(out);
        return -1;
    }
    return 0;
}

/* ---- writing ------------------------------------------------------------ */

static uint64_t npy_round_up(uint64_t n)
{
    return (n + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
}

long tile_npy_write_header(char *buf, size_t cap, enum tile_dtype dtype, int rank, const int64_t *shape,
                           enum tile_npy_strkind strkind, uint64_t strwidth, struct tile_error *e)
{
    const struct tile_dtype_traits *t = tile_dtype_traits(dtype);
    if (!t)
        return tile_error_set(e, TILE_EINVAL, "invalid dtype");
    if (t->cls != TILE_CLASS_STRING && !t->npy_kind)
        return tile_error_set(e, TILE_ENOTACCEPT, "%s has no .npy form (use raw binary or JSON)", t->name);
    if (rank < 0 || rank > TILE_MAX_RANK)
        return tile_error_set(e, TILE_EINVAL, "rank %d is outside 0..%d", rank, TILE_MAX_RANK);
    struct tile_npy_header h = {.dtype = dtype, .strkind = strkind, .strwidth = strwidth ? strwidth : 1};
    char dict[NPY_TUPLE_CAP + 96];
    struct tile_text txt = {dict, sizeof(dict), 0, false};
    tile_text_str(&txt, "{'descr': '");
    npy_format_descr(&txt, &h);
    tile_text_str(&txt, "', 'fortran_order': False, 'shape': ");
    npy_format_tuple(&txt, shape, rank);
    tile_text_str(&txt, ", }");
    if (txt.over)
        return tile_error_set(e, TILE_EINVAL, "the .npy header dict does not fit %zu bytes", sizeof(dict));
    size_t n = txt.len;
    /* Version 1.0 has a 16-bit header length; the preamble grows by 2 for 2.0. */
    uint64_t pre = NPY_MAGIC_LEN + 4, total = npy_round_up(pre + (uint64_t)n + 1);
    if (total - pre > UINT16_MAX) {
        pre += 2;
        total = npy_round_up(pre + (uint64_t)n + 1);
    }
    if (total > cap)
        return tile_error_set(e, TILE_EINVAL, "the .npy header needs %llu bytes but the buffer holds %zu",
                              (unsigned long long)total, cap);
    uint64_t hlen = total - pre;
    memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
    buf[6] = pre == NPY_MAGIC_LEN + 4 ? 1 : 2;
    buf[7] = 0;
    for (uint64_t i = 0; i < pre - 8; i++)
        buf[8 + i] = (char)(hlen >> (8 * i));
    memcpy(buf + pre, dict, (size_t)n);
    memset(buf + pre + n, ' ', (size_t)(total - pre - (uint64_t)n - 1));
    buf[total - 1] = '\n';
    return (long)total;
}

uint64_t tile_npy_string_itemsize(const struct tile_str *s, uint64_t n, enum tile_npy_strkind kind,
                                  uint64_t *width)
{
    uint64_t w = 1, item;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len = s[i].len;
        if (kind == TILE_NPY_STR_UNICODE) {
            len = 0; /* code points: every byte that is not a continuation byte */
            for (uint64_t j = 0; j < s[i].len; j++)
                len += ((uint8_t)s[i].ptr[j] & 0xC0) != 0x80;
        }
        if (len > w)
            w = len;
    }
    *width = w;
    if (__builtin_mul_overflow(w, kind == TILE_NPY_STR_UNICODE ? 4 : 1, &item))
        return UINT64_MAX;
    return item;
}

static int npy_encode_unicode(const struct tile_str *s, uint64_t index, uint64_t width, uint8_t *dst,
                              struct tile_error *e)
{
    size_t bad;
    if (!tile_utf8_valid(s->ptr, (size_t)s->len, &bad))
        return tile_error_set(e, TILE_EINVAL, "string element %llu is not valid UTF-8 (byte %zu)",
                              (unsigned long long)index, bad);
    const uint8_t *p = (const uint8_t *)s->ptr, *end = p + s->len;
    uint64_t chars = 0;
    for (; p < end; chars++) {
        uint32_t cp = tile_utf8_next(&p);
        if (chars == width)
            return tile_error_set(e, TILE_EINVAL, "string element %llu is longer than the .npy width of %llu characters",
                                  (unsigned long long)index, (unsigned long long)width);
        memcpy(dst + 4 * chars, &cp, 4);
    }
    memset(dst + 4 * chars, 0, (size_t)(4 * (width - chars)));
    return 0;
}

/* tile_npy_encode_strings() for elements numbered from `first` in messages. */
static int npy_encode_from(const struct tile_str *s, uint64_t first, uint64_t n, enum tile_npy_strkind kind,
                           uint64_t width, uint8_t *dst, struct tile_error *e)
{
    uint64_t item = kind == TILE_NPY_STR_UNICODE ? 4 * width : width; /* caller checked */
    for (uint64_t i = 0; i < n; i++, dst += item) {
        if (kind == TILE_NPY_STR_UNICODE) {
            if (npy_encode_unicode(&s[i], first + i, width, dst, e) < 0)
                return -1;
            continue;
        }
        if (s[i].len > width)
            return tile_error_set(e, TILE_EINVAL, "string element %llu has %llu bytes, more than the .npy width of %llu",
                                  (unsigned long long)(first + i), (unsigned long long)s[i].len,
                                  (unsigned long long)width);
        memcpy(dst, s[i].ptr, (size_t)s[i].len);
        memset(dst + s[i].len, 0, (size_t)(width - s[i].len));
    }
    return 0;
}

int tile_npy_encode_strings(const struct tile_str *s, uint64_t n, enum tile_npy_strkind kind, uint64_t width,
                            void *dst, struct tile_error *e)
{
    if (kind == TILE_NPY_STR_UNICODE && width > UINT64_MAX / 4)
        return tile_error_set(e, TILE_ETOOBIG, ".npy string width %llu is too large", (unsigned long long)width);
    return npy_encode_from(s, 0, n, kind, width, dst, e);
}

static int npy_fwrite(FILE *f, const void *p, size_t n, struct tile_error *e)
{
    errno = 0;
    if (n && fwrite(p, 1, n, f) != n)
        return tile_error_set(e, TILE_EIO, "cannot write the .npy data: %s", strerror(errno ? errno : EIO));
    return 0;
}

/* Converts and writes strings in bounded chunks. */
static int npy_write_strings(FILE *f, const struct tile_tensor *t, enum tile_npy_strkind kind, uint64_t width,
                             struct tile_error *e)
{
    uint64_t item;
    if (__builtin_mul_overflow(width, kind == TILE_NPY_STR_UNICODE ? 4 : 1, &item) || item > SIZE_MAX / 2)
        return tile_error_set(e, TILE_ETOOBIG, ".npy string width %llu is too large", (unsigned long long)width);
    uint64_t per = item >= NPY_WRITE_CHUNK ? 1 : NPY_WRITE_CHUNK / item;
    uint8_t *chunk = malloc((size_t)(per * item));
    if (!chunk)
        return tile_error_set(e, TILE_ENOMEM, "cannot allocate %llu bytes", (unsigned long long)(per * item));
    const struct tile_str *s = t->data;
    int rc = 0;
    for (uint64_t i = 0; rc == 0 && i < t->nelem; i += per) {
        uint64_t n = t->nelem - i < per ? t->nelem - i : per;
        rc = npy_encode_from(s + i, i, n, kind, width, chunk, e);
        if (rc == 0)
            rc = npy_fwrite(f, chunk, (size_t)(n * item), e);
    }
    free(chunk);
    return rc;
}

int tile_npy_write_file(FILE *f, const struct tile_tensor *t, enum tile_npy_strkind strkind, uint64_t strwidth,
                        struct tile_error *e)
{
    char head[NPY_HEAD_CAP];
    if (t->dtype == TILE_STRING && strwidth == 0)
        tile_npy_string_itemsize(t->data, t->nelem, strkind, &strwidth);
    long n = tile_npy_write_header(head, sizeof(head), t->dtype, t->rank, t->shape, strkind, strwidth, e);
    if (n < 0 || npy_fwrite(f, head, (size_t)n, e) < 0)
        return -1;
    int rc = t->dtype == TILE_STRING ? npy_write_strings(f, t, strkind, strwidth, e)
                                     : npy_fwrite(f, t->data, (size_t)tile_tensor_nbytes(t), e);
    if (rc == 0 && fflush(f) != 0)
        return tile_error_set(e, TILE_EIO, "cannot write the .npy data: %s", strerror(errno));
    return rc;
}
