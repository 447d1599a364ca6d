/* jsonread.c - typed JSON reads with uniform messages (see jsonread.h). */
#include "jsonread.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest piece of offending input quoted in a message. */
#define TILE_JR_SHOWN 40

static const char *label(char *buf, size_t cap, const char *what, int idx)
{
    if (idx < 0)
        snprintf(buf, cap, "%s", what);
    else
        snprintf(buf, cap, "%s[%d]", what, idx);
    return buf;
}

/* Everything but a plain integer: out of line, as its message buffer would
 * cost the common case a stack frame. */
__attribute__((noinline)) static int int_token_general(struct tile_jr *r, const struct tile_json_token *t,
                                                       const char *what, int idx, int64_t *out)
{
    char name[64];
    if (t->type != TILE_JSON_NUMBER)
        return tile_error_set(r->e, TILE_EINVAL, "%s must be an integer, not %s", label(name, sizeof(name), what, idx),
                              tile_json_type_name(t->type));
    int rc = tile_json_number_int64(t->ptr, t->len, 0, out);
    int shown = (int)(t->len > TILE_JR_SHOWN ? TILE_JR_SHOWN : t->len);
    if (rc == TILE_JSON_NUM_NOT_INTEGER)
        return tile_error_set(r->e, TILE_EINVAL, "%s must be an integer, got %.*s", label(name, sizeof(name), what, idx),
                              shown, t->ptr);
    if (rc != TILE_JSON_NUM_OK)
        return tile_error_set(r->e, TILE_EINVAL, "%s is %.*s, outside the 64-bit integer range",
                              label(name, sizeof(name), what, idx), shown, t->ptr);
    return 0;
}

int tile_jr_int_token(struct tile_jr *r, const struct tile_json_token *t, const char *what, int idx, int64_t *out)
{
    /* Plain integers of at most 18 digits fit: read here, the usual case. */
    size_t i = t->len && t->ptr[0] == '-';
    if (t->type == TILE_JSON_NUMBER && i < t->len && t->len - i <= 18) {
        int64_t v = 0;
        for (; i < t->len && t->ptr[i] >= '0' && t->ptr[i] <= '9'; i++)
            v = v * 10 + (t->ptr[i] - '0');
        if (i == t->len) {
            *out = t->ptr[0] == '-' ? -v : v;
            return 0;
        }
    }
    return int_token_general(r, t, what, idx, out);
}

int tile_jr_int(struct tile_jr *r, const char *what, int64_t *out)
{
    struct tile_json_token t;
    return tile_jr_next(r, &t) < 0 ? -1 : tile_jr_int_token(r, &t, what, -1, out);
}

int tile_jr_int_list(struct tile_jr *r, const char *what, int64_t *out, int max, int *count)
{
    struct tile_json_token t;
    if (tile_jr_next(r, &t) < 0)
        return -1;
    if (t.type != TILE_JSON_ARRAY_BEGIN)
        return tile_error_set(r->e, TILE_EINVAL, "%s must be an array of integers, not %s", what,
                              tile_json_type_name(t.type));
    int n = 0;
    for (;;) {
        if (tile_jr_next(r, &t) < 0)
            return -1;
        if (t.type == TILE_JSON_ARRAY_END)
            break;
        if (n == max)
            return tile_error_set(r->e, TILE_EINVAL, "%s has more than %d values", what, max);
        if (tile_jr_int_token(r, &t, what, n, &out[n]) < 0)
            return -1;
        n++;
    }
    *count = n;
    return 0;
}

static int string_too_long(struct tile_jr *r, const struct tile_json_token *t, const char *what, size_t cap)
{
    return tile_error_set(r->e, TILE_EINVAL, "%s '%.*s...' is too long (at most %zu bytes)", what, TILE_JR_SHOWN,
                          t->ptr, cap);
}

/* A string with escapes, longer than `cap` as written: its unescaped bytes
 * may still fit ("\u0069" is one byte written as six), so it is unescaped
 * into scratch space first. An escape stands for at least one byte per six
 * written, so a token over 6 * cap bytes cannot fit. Out of line: the
 * common case keeps its small frame. */
__attribute__((noinline)) static int string_escaped_long(struct tile_jr *r, const struct tile_json_token *t,
                                                         const char *what, char *buf, size_t cap, size_t *len)
{
    char scratch[2048];
    if (t->len / 6 > cap)
        return string_too_long(r, t, what, cap);
    char *tmp = t->len <= sizeof(scratch) ? scratch : malloc(t->len);
    if (!tmp)
        return tile_error_set(r->e, TILE_ENOMEM, "cannot allocate %zu bytes for %s", t->len, what);
    size_t n = tile_json_unescape(t, tmp);
    if (n <= cap)
        memcpy(buf, tmp, n);
    if (tmp != scratch)
        free(tmp);
    if (n > cap)
        return string_too_long(r, t, what, cap);
    *len = n;
    return 0;
}

int tile_jr_string(struct tile_jr *r, const char *what, char *buf, size_t cap, size_t *len)
{
    struct tile_json_token t;
    if (tile_jr_next(r, &t) < 0)
        return -1;
    if (t.type != TILE_JSON_STRING)
        return tile_error_set(r->e, TILE_EINVAL, "%s must be a string, not %s", what, tile_json_type_name(t.type));
    if (t.len > cap) /* unescaping never lengthens, but may shorten */
        return t.flags & TILE_JSON_TOK_ESCAPED ? string_escaped_long(r, &t, what, buf, cap, len)
                                               : string_too_long(r, &t, what, cap);
    *len = tile_json_unescape(&t, buf);
    return 0;
}

int tile_jr_bool(struct tile_jr *r, const char *what, bool *out)
{
    struct tile_json_token t;
    if (tile_jr_next(r, &t) < 0)
        return -1;
    if (t.type != TILE_JSON_TRUE && t.type != TILE_JSON_FALSE)
        return tile_error_set(r->e, TILE_EINVAL, "%s must be true or false, not %s", what,
                              tile_json_type_name(t.type));
    *out = t.type == TILE_JSON_TRUE;
    return 0;
}

int tile_jr_array(struct tile_jr *r, void *ctx, int (*fn)(void *ctx), const char *what)
{
    struct tile_json_token t;
    if (tile_jr_next(r, &t) < 0)
        return -1;
    if (t.type != TILE_JSON_ARRAY_BEGIN)
        return tile_error_set(r->e, TILE_EINVAL, "%s must be an array, not %s", what, tile_json_type_name(t.type));
    for (;;) {
        /* Anything but the end (an error included) is left for fn to read
         * as its first token. */
        if (tile_json_at_array_end(&r->lx))
            return tile_jr_next(r, &t);
        if (fn(ctx) < 0)
            return -1;
    }
}

static int find_key(const struct tile_jr_key *keys, int n, const struct tile_json_token *t)
{
    if (t->flags & TILE_JSON_TOK_ESCAPED) {
        for (int k = 0; k < n; k++) {
            if (tile_json_string_equals(t, keys[k].name))
                return k;
        }
        return -1;
    }
    /* An unescaped key is its bytes: length and first byte rule out most
     * names before the comparison. */
    for (int k = 0; k < n; k++) {
        if (keys[k].len != t->len || !t->len || keys[k].name[0] != t->ptr[0])
            continue;
        size_t i = 1; /* names are short: no memcmp call */
        while (i < t->len && keys[k].name[i] == t->ptr[i])
            i++;
        if (i == t->len)
            return k;
    }
    return -1;
}

int tile_jr_object(struct tile_jr *r, void *ctx, const struct tile_jr_key *keys, int n, const char *where,
                   const char *expected, bool skip_unknown)
{
    struct tile_json_token t;
    uint64_t seen = 0;
    if (tile_jr_next(r, &t) < 0)
        return -1;
    if (t.type != TILE_JSON_OBJECT_BEGIN)
        return tile_error_set(r->e, TILE_EINVAL, "%s must be an object, not %s", where, tile_json_type_name(t.type));
    for (;;) {
        if (tile_jr_next(r, &t) < 0)
            return -1;
        if (t.type == TILE_JSON_OBJECT_END)
            return 0;
        int shown = (int)(t.len > TILE_JR_SHOWN ? TILE_JR_SHOWN : t.len);
        int k = find_key(keys, n, &t);
        if (k < 0) {
            if (!skip_unknown)
                return tile_error_set(r->e, TILE_EINVAL, "unknown key '%.*s' in %s (expected %s)", shown, t.ptr,
                                      where, expected);
            struct tile_json_token v;
            if (tile_jr_next(r, &v) < 0 || tile_json_skip_value(&r->lx, &v, r->e) < 0)
                return -1;
            continue;
        }
        if (seen & (UINT64_C(1) << k))
            return tile_error_set(r->e, TILE_EINVAL, "duplicate key '%s' in %s", keys[k].name, where);
        seen |= UINT64_C(1) << k;
        if (keys[k].fn(ctx) < 0)
            return -1;
    }
}
