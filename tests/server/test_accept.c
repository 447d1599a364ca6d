/* test_accept.c - Accept / Accept-Encoding elements and weights (server/service/accept.c),
 * the one reader behind both negotiations. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "accept.h"
#include "compress.h"

/* The list as "name=q name=q ..." for comparison. */
static void render(const char *list, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = '\0';
    struct tiled_accept_elem el;
    for (const char *p = list; tiled_accept_next(&p, &el);)
        o += (size_t)snprintf(out + o, cap - o, "%s%.*s=%d", o ? " " : "", (int)el.name_len, el.name, el.q);
}

static void expect(const char *list, const char *want)
{
    char got[256];
    render(list, got, sizeof(got));
    if (strcmp(got, want) != 0)
        fail_msg("%s: got \"%s\", want \"%s\"", list, got, want);
}

static void test_elements_and_weights(void **state)
{
    (void)state;
    expect("", "");
    expect(" , ,, ", "");
    expect("gzip", "gzip=1000");
    expect("gzip;q=0.5, deflate", "gzip=500 deflate=1000");
    expect("application/json ; charset=utf-8 ; q=0.25 ,text/*;Q=0", "application/json=250 text/*=0");
    expect("a;q=1.000,b;q=0.001,c;q=0.1,d;q=1.", "a=1000 b=1 c=100 d=1000");
    expect("gzip\t;\tq=0.8\t", "gzip=800");
    expect("*/*;level=1;q=0.9", "*/*=900");
}

/* What is not a qvalue makes its element unacceptable, and `q=` inside
 * another parameter is not a weight. */
static void test_what_is_not_a_weight(void **state)
{
    (void)state;
    expect("gzip;q=2", "gzip=0");
    expect("gzip;q=1.5", "gzip=0");
    expect("gzip;q=0.5000", "gzip=0");
    expect("gzip;q=nan", "gzip=0");
    expect("gzip;q=1e0", "gzip=0");
    expect("gzip;q=-0", "gzip=0");
    expect("gzip;q=", "gzip=0");
    expect("gzip;q= 0.5", "gzip=0");
    expect("gzip;xq=0", "gzip=1000");
    expect("gzip;a=\"q=0\"", "gzip=1000");
}

/* A ',' or ';' inside a quoted parameter value belongs to the value: it
 * neither ends the element nor starts a parameter (RFC 9110 5.6.4, 5.6.6). */
static void test_quoted_strings(void **state)
{
    (void)state;
    expect("text/plain;charset=\"utf-8;q=0\", gzip;q=0.5", "text/plain=1000 gzip=500");
    expect("a;x=\"b,c\";q=0.2, d", "a=200 d=1000");
    expect("a;x=\"b\\\",c;q=0\";q=0.3,d;q=0", "a=300 d=0");
    expect("a;q=0.1;x=\",\", b", "a=100 b=1000");
    expect("a;x=\"\\\\\";q=0, b", "a=0 b=1000");
    expect("a;x=\"open, b;q=0", "a=1000");
}

static void test_coding_negotiation(void **state)
{
    (void)state;
    assert_int_equal(tiled_coding_negotiate(""), TILED_CODING_IDENTITY);
    assert_int_equal(tiled_coding_negotiate("gzip, deflate"), TILED_CODING_GZIP);
    assert_int_equal(tiled_coding_negotiate("gzip;q=0.5, deflate"), TILED_CODING_DEFLATE);
    assert_int_equal(tiled_coding_negotiate("GZIP;Q=0.1"), TILED_CODING_GZIP);
    assert_int_equal(tiled_coding_negotiate("gzip;q=0, deflate;q=0"), TILED_CODING_IDENTITY);
    assert_int_equal(tiled_coding_negotiate("gzip;q=9"), TILED_CODING_IDENTITY);
    assert_int_equal(tiled_coding_negotiate("br, gzipx"), TILED_CODING_IDENTITY);
    /* x-gzip weighs for gzip (RFC 9110 8.4.1.3), the heavier of the two. */
    assert_int_equal(tiled_coding_negotiate("x-gzip"), TILED_CODING_GZIP);
    assert_int_equal(tiled_coding_negotiate("X-GZIP;q=0.5, deflate;q=0.4"), TILED_CODING_GZIP);
    assert_int_equal(tiled_coding_negotiate("x-gzip;q=0.3, deflate;q=0.4"), TILED_CODING_DEFLATE);
    assert_int_equal(tiled_coding_negotiate("gzip;q=0.2, x-gzip;q=0.9, deflate;q=0.5"), TILED_CODING_GZIP);
    assert_int_equal(tiled_coding_negotiate("x-gzip;q=0"), TILED_CODING_IDENTITY);
}

/* A body below compress.c's floor goes uncompressed whatever was negotiated. */
static void test_coding_sent(void **state)
{
    (void)state;
    assert_int_equal(tiled_coding_sent(TILED_CODING_GZIP, 100), TILED_CODING_IDENTITY);
    assert_int_equal(tiled_coding_sent(TILED_CODING_GZIP, 1 << 20), TILED_CODING_GZIP);
    assert_int_equal(tiled_coding_sent(TILED_CODING_DEFLATE, 1 << 20), TILED_CODING_DEFLATE);
    assert_int_equal(tiled_coding_sent(TILED_CODING_IDENTITY, 1 << 20), TILED_CODING_IDENTITY);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elements_and_weights),
        cmocka_unit_test(test_what_is_not_a_weight),
        cmocka_unit_test(test_quoted_strings),
        cmocka_unit_test(test_coding_negotiation),
        cmocka_unit_test(test_coding_sent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
