/* jsonquick.c - see jsonquick.h. */
#include "jsonquick.h"

#include <stdatomic.h>
#include <string.h>

#include "jsonlex.h"
#include "numfmt.h"

static atomic_bool quick_off;
static _Thread_local uint64_t taken;

void tile_jq_set_enabled(bool on)
{
    atomic_store_explicit(&quick_off, !on, memory_order_relaxed);
}

bool tile_jq_enabled(void)
{
    return !atomic_load_explicit(&quick_off, memory_order_relaxed);
}

void tile_jq_note_taken(void)
{
    taken++;
}

uint64_t tile_jq_taken(void)
{
    return taken;
}

bool tile_jq_string(struct tile_jq *q, const char **s, size_t *len)
{
    if (!tile_jq_char(q, '"'))
        return false;
    const char *b = q->p;
    /* The lexer's plain bytes (SC_PLAIN in jsonlex.c): anything else - an
     * escape, a control byte, UTF-8 - is the general reader's. */
    q->p = b + tile_json_plain_end(b, 0, (size_t)(q->end - b));
    if (q->p == q->end || *q->p != '"')
        return false;
    *s = b;
    *len = (size_t)(q->p - b);
    q->p++;
    return true;
}

bool tile_jq_member_string(struct tile_jq *q, const char **s, size_t *len, size_t max)
{
    return tile_jq_char(q, ':') && tile_jq_string(q, s, len) && *len <= max;
}

bool tile_jq_member_bool(struct tile_jq *q, bool *out)
{
    if (!tile_jq_char(q, ':'))
        return false;
    tile_jq_ws(q);
    /* what follows must end the value (',' '}' ']', whitespace): the caller's next read checks */
    if (tile_jq_take(q, "true", 4))
        *out = true;
    else if (tile_jq_take(q, "false", 5))
        *out = false;
    else
        return false;
    return true;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Whitespace, one array element's end: ',' (consumed, *last false) or ']'
 * (consumed, *last true). */
static bool element_end(struct tile_jq *q, bool *last)
{
    tile_jq_ws(q);
    if (q->p == q->end || (*q->p != ',' && *q->p != ']'))
        return false;
    *last = *q->p++ == ']';
    return true;
}

bool tile_jq_ints(struct tile_jq *q, int64_t *out, int max, int *count)
{
    if (!tile_jq_char(q, '['))
        return false;
    int n = 0;
    if (tile_jq_peek(q, ']')) {
        q->p++;
        *count = 0;
        return true;
    }
    for (bool last = false; !last;) {
        if (n == max)
            return false;
        tile_jq_ws(q);
        bool neg = q->p < q->end && *q->p == '-';
        const char *d = q->p + neg, *e = d;
        while (e < q->end && is_digit(*e))
            e++;
        if (e == d || e - d > 18 || (*d == '0' && e - d > 1))
            return false;
        int64_t v = 0;
        for (const char *c = d; c < e; c++)
            v = v * 10 + (*c - '0');
        out[n++] = neg ? -v : v;
        q->p = e;
        if (!element_end(q, &last))
            return false;
    }
    *count = n;
    return true;
}

bool tile_jq_shape(struct tile_jq *q, int64_t *shape, int max, int *rank)
{
    if (!tile_jq_char(q, ':') || !tile_jq_ints(q, shape, max, rank))
        return false;
    for (int i = 0; i < *rank; i++) {
        if (shape[i] < 0)
            return false;
    }
    return true;
}

/* A JSON number at q->p (RFC 8259 §6): its token, flags as the lexer sets
 * them. */
static bool number(struct tile_jq *q, struct tile_json_token *t)
{
    const char *s = q->p, *p = s, *end = q->end;
    unsigned flags = 0;
    if (p < end && *p == '-')
        p++;
    if (p == end || !is_digit(*p))
        return false;
    if (*p == '0') {
        p++;
    } else {
        while (p < end && is_digit(*p))
            p++;
    }
    if (p < end && *p == '.') {
        const char *f = ++p;
        while (p < end && is_digit(*p))
            p++;
        if (p == f)
            return false;
        flags |= TILE_JSON_TOK_FRAC;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        const char *x = p;
        while (p < end && is_digit(*p))
            p++;
        if (p == x)
            return false;
        flags |= TILE_JSON_TOK_EXP;
    }
    t->type = TILE_JSON_NUMBER;
    t->ptr = s;
    t->len = (size_t)(p - s);
    t->pos = 0;
    t->flags = flags;
    q->p = p;
    return true;
}

bool tile_jq_numbers(struct tile_jq *q, enum tile_dtype dtype, void *out, uint64_t n)
{
    const struct tile_dtype_traits *tr = tile_dtype_traits(dtype);
    if (!tr || (tr->cls != TILE_CLASS_INT && tr->cls != TILE_CLASS_UINT && tr->cls != TILE_CLASS_FLOAT &&
                tr->cls != TILE_CLASS_BFLOAT))
        return false;
    if (!tile_jq_char(q, '['))
        return false;
    if (tile_jq_peek(q, ']')) {
        q->p++;
        return n == 0;
    }
    unsigned char *slot = out;
    uint64_t i = 0;
    for (bool last = false; !last; i++, slot += tr->size) {
        struct tile_json_token t;
        tile_jq_ws(q);
        if (i == n)
            return false;
        /* A plain integer of at most 15 digits ("7", "-20": nearly every
         * element of a small request) is read and stored here, in one scan;
         * anything else - a fraction, an exponent, a leading zero, more
         * digits, a value out of range - is read again below as before. */
        const char *p = q->p + (q->p < q->end && *q->p == '-'), *d = p;
        uint64_t m = 0;
        while (p < q->end && p - d < 15 && is_digit(*p))
            m = m * 10 + (uint64_t)(*p++ - '0');
        if (p > d && (*d != '0' || p - d == 1) &&
            (p == q->end || (!is_digit(*p) && *p != '.' && *p != 'e' && *p != 'E')) &&
            tile_json_store_plain_int(tr, *q->p == '-', m, slot)) {
            q->p = p;
            if (!element_end(q, &last))
                return false;
            continue;
        }
        if (!number(q, &t))
            return false;
        if (!tile_json_parse_plain_int(tr, &t, slot)) {
            struct tile_error e = {0};
            struct tile_json_path where = {"data", &i, 1};
            if (tile_json_parse_element(dtype, &t, slot, &where, &e) < 0)
                return false;
        }
        if (!element_end(q, &last))
            return false;
    }
    return i == n;
}

bool tile_jq_tensor_in(struct tile_jq *q, struct tile_tensor *t, enum tile_dtype dtype, int rank,
                       const int64_t *shape, uint64_t max_bytes, void *buf, size_t buf_cap)
{
    tile_tensor_reset(t);
    /* no error struct: a refusal is the general reader's to word */
    return tile_jq_char(q, ':') && tile_tensor_init_in(t, dtype, rank, shape, max_bytes, buf, buf_cap, NULL) == 0 &&
           tile_jq_numbers(q, dtype, t->data, t->nelem);
}

bool tile_jq_tensor(struct tile_jq *q, struct tile_tensor *t, enum tile_dtype dtype, int rank, const int64_t *shape,
                    uint64_t max_bytes)
{
    return tile_jq_tensor_in(q, t, dtype, rank, shape, max_bytes, NULL, 0);
}

bool tile_jq_end(struct tile_jq *q)
{
    tile_jq_ws(q);
    return q->p == q->end;
}
