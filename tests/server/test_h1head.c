/* test_h1head.c - splitting a request head the framer accepted
 * (http/h1head.h): the request line, fields and their trimmed values, the
 * first of a repeated field, the fields asked for found in one pass
 * (http_head_index, against a lookup by name of each), the query and its arguments unescaped, an
 * absolute-form target's path, and Connection's tokens (over all its lines). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "http/h1head.h"

static void request_line_and_fields(void **state)
{
    (void)state;
    char text[] = "POST /v1/tile?dtype=uint8&shape=5 HTTP/1.1\r\nHost: t\r\nX-A:\tspaced value \t\r\n"
                  "Content-Length: 5\r\nx-a: second\r\nEmpty:\r\n\r\n";
    struct http_head h;
    assert_true(http_head_split(text, &h));
    assert_string_equal(h.method, "POST");
    assert_string_equal(h.target, "/v1/tile");
    assert_string_equal(h.query, "dtype=uint8&shape=5");
    assert_int_equal(h.nfields, 5);
    assert_string_equal(http_head_field(&h, "host"), "t");
    assert_string_equal(http_head_field(&h, "X-A"), "spaced value"); /* the first, trimmed */
    assert_string_equal(http_head_field(&h, "content-length"), "5");
    assert_string_equal(http_head_field(&h, "Empty"), "");
    assert_null(http_head_field(&h, "Content"));
    assert_null(http_head_field(&h, "Transfer-Encoding"));
}

/* http_head_index gives each name what http_head_field gives it: the
 * first field of the name, any case; NULL for a name of the same length
 * or first letter that is not there. */
static void index_of_fields(void **state)
{
    (void)state;
    char text[] = "GET / HTTP/1.1\r\nHOST: a\r\nAccept: one\r\naccept: two\r\nX-Request-Id: r\r\nOrigin-X: no\r\n"
                  "TE: trailers\r\nAccepts: no\r\nExpecT: 100-continue\r\n\r\n";
    struct http_head h;
    assert_true(http_head_split(text, &h));
    static const char *const names[] = {"host", "accept", "x-request-id", "origin", "te", "expect", "tf", "accept-encoding"};
    static const unsigned char lens[] = {4, 6, 12, 6, 2, 6, 2, 15};
    enum { N = sizeof(names) / sizeof(names[0]) };
    const char *out[N];
    for (int k = 0; k < N; k++)
        out[k] = "stale";
    http_head_index(&h, names, lens, N, out);
    for (int k = 0; k < N; k++) {
        const char *want = http_head_field(&h, names[k]);
        if (want)
            assert_string_equal(out[k], want);
        else
            assert_null(out[k]);
    }
    assert_string_equal(out[1], "one");
    assert_string_equal(out[5], "100-continue");
    assert_null(out[3]);
    assert_null(out[6]);
}

static void no_query_and_unfinished_heads(void **state)
{
    (void)state;
    char text[] = "GET / HTTP/1.0\r\n\r\n";
    struct http_head h;
    assert_true(http_head_split(text, &h));
    assert_string_equal(h.target, "/");
    assert_null(h.query);
    assert_int_equal(h.nfields, 0);
    char unfinished[] = "GET / HTTP/1.1\r\nHost: t\r\n";
    assert_false(http_head_split(unfinished, &h));
    char no_line[] = "GET / HTTP/1.1";
    assert_false(http_head_split(no_line, &h));
}

struct args {
    int n;
    char keys[4][16], values[4][16];
    bool has_value[4];
};

static void collect(void *arg, const char *key, const char *value)
{
    struct args *a = arg;
    snprintf(a->keys[a->n], sizeof(a->keys[a->n]), "%s", key);
    a->has_value[a->n] = value != NULL;
    snprintf(a->values[a->n], sizeof(a->values[a->n]), "%s", value ? value : "");
    a->n++;
}

static void query_arguments(void **state)
{
    (void)state;
    char q[] = "a=1+2&&b&c=&d%3D=%41%zz";
    struct args a = {0};
    http_query_each(q, collect, &a);
    assert_int_equal(a.n, 4);
    assert_string_equal(a.keys[0], "a");
    assert_string_equal(a.values[0], "1 2");
    assert_string_equal(a.keys[1], "b");
    assert_false(a.has_value[1]);
    assert_string_equal(a.keys[2], "c");
    assert_true(a.has_value[2]);
    assert_string_equal(a.values[2], "");
    assert_string_equal(a.keys[3], "d=");
    assert_string_equal(a.values[3], "A%zz"); /* a malformed escape stays */
    http_query_each(NULL, collect, &a);
    assert_int_equal(a.n, 4);
}

/* The definition: each '%' with two hex digits is that byte, and in a
 * query each '+' a space; every other byte stays. */
static void unescape_ref(char *s, bool plus)
{
    static const char hex[] = "0123456789abcdef0123456789ABCDEF";
    char *o = s;
    for (char *i = s; *i; i++) {
        const char *hi = i[0] == '%' && i[1] ? strchr(hex, i[1]) : NULL;
        const char *lo = hi && i[2] ? strchr(hex, i[2]) : NULL;
        if (lo) {
            *o++ = (char)(((hi - hex) % 16) << 4 | ((lo - hex) % 16));
            i += 2;
        } else {
            *o++ = plus && *i == '+' ? ' ' : *i;
        }
    }
    *o = '\0';
}

/* Every string of the bytes that matter up to 6 long, against the
 * definition, in paths and in queries. */
static void unescape_against_definition(void **state)
{
    (void)state;
    static const char alphabet[] = "a%2fF+g/";
    char got[16], want[16];
    for (int len = 0; len <= 6; len++) {
        long count = 1;
        for (int i = 0; i < len; i++)
            count *= (long)(sizeof(alphabet) - 1);
        for (long k = 0; k < count; k++) {
            long x = k;
            for (int i = 0; i < len; i++, x /= (long)(sizeof(alphabet) - 1))
                got[i] = alphabet[x % (long)(sizeof(alphabet) - 1)];
            got[len] = '\0';
            for (int plus = 0; plus <= 1; plus++) {
                char in[16];
                memcpy(in, got, sizeof(in));
                memcpy(want, got, sizeof(want));
                http_unescape(in, plus);
                unescape_ref(want, plus);
                assert_string_equal(in, want);
            }
        }
    }
}

static void paths(void **state)
{
    (void)state;
    char p[] = "/v2/models/a%20b+c";
    http_unescape(p, false);
    assert_string_equal(p, "/v2/models/a b+c"); /* '+' is a space in a query only */
    char abs1[] = "http://example.com:8080/v2/health/live";
    assert_string_equal(http_origin_path(abs1), "/v2/health/live");
    char abs2[] = "HTTPS://example.com";
    assert_string_equal(http_origin_path(abs2), "/");
    char origin[] = "/v2";
    assert_ptr_equal(http_origin_path(origin), origin);
}

static void connection_tokens(void **state)
{
    (void)state;
    assert_true(http_lists_token("close", "close"));
    assert_true(http_lists_token("Keep-Alive, Upgrade", "keep-alive"));
    assert_true(http_lists_token("upgrade ,\tClose ", "close"));
    assert_false(http_lists_token("closed", "close"));
    assert_false(http_lists_token("", "close"));
    assert_false(http_lists_token(NULL, "close"));
    /* A list field's lines are one list. */
    char text[] = "GET / HTTP/1.1\r\nConnection: keep-alive\r\nHost: t\r\nconnection: Upgrade, close\r\n\r\n";
    struct http_head h;
    assert_true(http_head_split(text, &h));
    assert_true(http_head_lists(&h, "Connection", "close"));
    assert_true(http_head_lists(&h, "Connection", "keep-alive"));
    assert_false(http_head_lists(&h, "Connection", "te"));
    assert_false(http_head_lists(&h, "Upgrade", "close"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(request_line_and_fields),
        cmocka_unit_test(index_of_fields),
        cmocka_unit_test(no_query_and_unfinished_heads),
        cmocka_unit_test(query_arguments),
        cmocka_unit_test(paths), cmocka_unit_test(unescape_against_definition),
        cmocka_unit_test(connection_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
