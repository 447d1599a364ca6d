/* fuzz_lists.c - the small text parsers behind query parameters and JSON
 * fields: tile_parse_int_list, tile_parse_int64, tile_semantics_parse,
 * tile_dtype_parse and tile_dtype_parse_kserve, each compared with a plain
 * reference implementation written from its contract.
 *
 * Input layout: 1 byte giving the list's maximum item count (mod 65), then
 * the text. The list parser sees the text up to its first NUL; the others
 * see all of it (they take a length). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

static bool ci_equal(const char *a, size_t alen, const char *b, size_t blen)
{
    if (alen != blen)
        return false;
    for (size_t i = 0; i < alen; i++) {
        if (lower(a[i]) != lower(b[i]))
            return false;
    }
    return true;
}

/* Optional '-', then one or more digits, within int64. */
static bool ref_int64(const char *s, size_t len, int64_t *out)
{
    static const char max_digits[] = "9223372036854775807", min_digits[] = "9223372036854775808";
    size_t i = len && s[0] == '-';
    bool neg = i == 1;
    if (i == len)
        return false;
    for (size_t k = i; k < len; k++) {
        if (s[k] < '0' || s[k] > '9')
            return false;
    }
    while (i + 1 < len && s[i] == '0')
        i++;
    size_t n = len - i;
    const char *limit = neg ? min_digits : max_digits;
    if (n > 19 || (n == 19 && memcmp(s + i, limit, 19) > 0))
        return false;
    int64_t v = 0;
    for (size_t k = i; k < len; k++)
        v = v * 10 - (s[k] - '0'); /* accumulate negatively: INT64_MIN fits */
    if (!neg && v == INT64_MIN)
        return false;
    *out = neg ? v : -v;
    return true;
}

static bool ref_int_list(const char *s, int max, int64_t *out, int *count)
{
    *count = 0;
    if (!*s)
        return true;
    for (int i = 0;; i++) {
        const char *comma = strchr(s, ','), *a = s, *b = comma ? comma : s + strlen(s);
        while (a < b && (*a == ' ' || *a == '\t'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
            b--;
        if (a == b || i >= max || !ref_int64(a, (size_t)(b - a), &out[i]))
            return false;
        *count = i + 1;
        if (!comma)
            return true;
        s = comma + 1;
    }
}

static void check_int64(const char *s, size_t len)
{
    int64_t got = 0, want = 0;
    struct tile_error e = {0};
    int rc = tile_parse_int64(s, len, &got, "value", &e);
    fuzz_check_result(rc, &e, "tile_parse_int64");
    bool ok = ref_int64(s, len, &want);
    FUZZ_CHECK((rc == 0) == ok, "tile_parse_int64 %s '%.*s'", ok ? "refused" : "accepted", (int)len, s);
    FUZZ_CHECK(!ok || got == want, "tile_parse_int64 read %lld, expected %lld", (long long)got, (long long)want);
}

static void check_int_list(const char *s, int max)
{
    int64_t got[TILE_MAX_RANK], want[TILE_MAX_RANK];
    int ngot = -1, nwant = 0;
    struct tile_error e = {0};
    int rc = tile_parse_int_list(s, got, max, &ngot, "list", &e);
    fuzz_check_result(rc, &e, "tile_parse_int_list");
    bool ok = ref_int_list(s, max, want, &nwant);
    FUZZ_CHECK((rc == 0) == ok, "tile_parse_int_list %s '%s' (max %d)", ok ? "refused" : "accepted", s, max);
    FUZZ_CHECK(ngot >= 0 && ngot <= max, "tile_parse_int_list counted %d items (max %d)", ngot, max);
    if (!ok)
        return;
    FUZZ_CHECK(ngot == nwant, "tile_parse_int_list counted %d items, expected %d", ngot, nwant);
    for (int i = 0; i < ngot; i++)
        FUZZ_CHECK(got[i] == want[i], "tile_parse_int_list item %d is %lld, expected %lld", i, (long long)got[i],
                   (long long)want[i]);
}

static void check_semantics(const char *s, size_t len)
{
    enum tile_semantics got = TILE_SEM_COUNT;
    struct tile_error e = {0};
    int rc = tile_semantics_parse(s, len, &got, &e);
    fuzz_check_result(rc, &e, "tile_semantics_parse");
    int want = -1;
    for (int k = 0; k < TILE_SEM_COUNT && want < 0; k++) {
        const char *name = tile_semantics_name((enum tile_semantics)k);
        if (ci_equal(name, strlen(name), s, len))
            want = k;
    }
    FUZZ_CHECK((rc == 0) == (want >= 0), "tile_semantics_parse %s '%.*s'", want >= 0 ? "refused" : "accepted",
               (int)len, s);
    FUZZ_CHECK(rc < 0 || (int)got == want, "tile_semantics_parse gave %d, expected %d", (int)got, want);
}

static bool in_words(const char *list, const char *s, size_t len)
{
    while (*list) {
        size_t w = strcspn(list, " ");
        if (w && ci_equal(list, w, s, len))
            return true;
        list += w;
        list += strspn(list, " ");
    }
    return false;
}

static void check_dtype(const char *s, size_t len)
{
    enum tile_dtype got = tile_dtype_parse(s, len), got_k = tile_dtype_parse_kserve(s, len);
    int want = -1, want_k = -1;
    for (int d = 0; d < TILE_DTYPE_COUNT; d++) {
        const struct tile_dtype_traits *t = tile_dtype_traits((enum tile_dtype)d);
        if (want < 0 && (ci_equal(t->name, strlen(t->name), s, len) || ci_equal(t->onnx, strlen(t->onnx), s, len) ||
                         ci_equal(t->kserve, strlen(t->kserve), s, len) || in_words(t->aliases, s, len)))
            want = d;
        if (want_k < 0 && strlen(t->kserve) == len && memcmp(t->kserve, s, len) == 0)
            want_k = d;
    }
    FUZZ_CHECK((int)got == want, "tile_dtype_parse('%.*s') gave %d, expected %d", (int)len, s, (int)got, want);
    FUZZ_CHECK((int)got_k == want_k, "tile_dtype_parse_kserve('%.*s') gave %d, expected %d", (int)len, s,
               (int)got_k, want_k);
    if (got != TILE_DTYPE_INVALID) {
        const char *name = tile_dtype_name(got);
        FUZZ_CHECK(tile_dtype_parse(name, strlen(name)) == got, "dtype name '%s' does not parse back", name);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int max = data[0] % (TILE_MAX_RANK + 1);
    size_t len = size - 1;
    /* Exact-size copies: the length-taking parsers must not read past len,
     * and the list parser gets a string ending at the first NUL. */
    char *text = malloc(len ? len : 1), *str = malloc(len + 1);
    if (!text || !str) {
        free(text);
        free(str);
        return 0;
    }
    memcpy(text, data + 1, len);
    memcpy(str, data + 1, len);
    str[len] = '\0';
    check_int64(text, len);
    check_int_list(str, max);
    check_semantics(text, len);
    check_dtype(text, len);
    free(text);
    free(str);
    return 0;
}
