/* test_utf8.c - the one UTF-8 implementation (api/utf8.c), checked
 * exhaustively against the definition rather than against itself: a byte
 * sequence is valid exactly when it is the shortest encoding of a Unicode
 * scalar value (RFC 3629 section 3), which the reference below computes by
 * decoding the bits and re-encoding, with no table of lead bytes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "utf8.h"

/* The definition: n bytes decode to a scalar value whose shortest encoding
 * is n bytes long, with the lead and continuation bit patterns right. */
static int reference_len(const unsigned char *p, size_t avail)
{
    static const unsigned char lead_mask[5] = {0, 0x80, 0xE0, 0xF0, 0xF8};
    static const unsigned char lead_bits[5] = {0, 0x00, 0xC0, 0xE0, 0xF0};
    for (size_t n = 2; n <= 4; n++) {
        if ((p[0] & lead_mask[n]) != lead_bits[n])
            continue;
        if (avail < n)
            return 0;
        uint32_t cp = p[0] & (unsigned char)~lead_mask[n];
        for (size_t i = 1; i < n; i++) {
            if ((p[i] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (p[i] & 0x3F);
        }
        size_t shortest = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        if (shortest != n || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        return (int)n;
    }
    return 0; /* ASCII, a continuation byte, or 0xF8..0xFF */
}

static void test_valid_examples_and_offsets(void **state)
{
    (void)state;
    size_t bad = 99;
    assert_true(tile_utf8_valid("", 0, &bad));
    assert_true(tile_utf8_valid("plain ascii text, longer than eight bytes", 41, &bad));
    assert_true(tile_utf8_valid("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14, &bad));
    assert_false(tile_utf8_valid("abcdefghij\xc3", 11, &bad));
    assert_int_equal(bad, 10);
    assert_false(tile_utf8_valid("abcdefghijklmnop\xed\xbf\xbf", 19, &bad));
    assert_int_equal(bad, 16);
    assert_false(tile_utf8_valid("\xf8\x88\x80\x80\x80", 5, &bad));
    assert_int_equal(bad, 0);
    assert_false(tile_utf8_valid("ok\xe0\x80\x80", 5, &bad)); /* overlong U+0000 */
    assert_int_equal(bad, 2);
}

/* Every 1-, 2- and 3-byte string, and every 4-byte string whose lead byte
 * can start one, agrees with the definition, whole and cut short. */
static void test_every_short_sequence_agrees_with_the_definition(void **state)
{
    (void)state;
    unsigned char p[4];
    for (uint32_t v = 0; v < 1u << 24; v++) {
        p[0] = (unsigned char)(v >> 16), p[1] = (unsigned char)(v >> 8), p[2] = (unsigned char)v;
        for (size_t avail = 1; avail <= 3; avail++) {
            int want = reference_len(p, avail);
            if ((int)tile_utf8_seq(p, avail) != want)
                fail_msg("%02x %02x %02x (%zu bytes): got %zu, want %d", p[0], p[1], p[2], avail,
                         tile_utf8_seq(p, avail), want);
        }
    }
    static const unsigned char last[] = {0x00, 0x7F, 0x80, 0x8F, 0x90, 0xBF, 0xC0, 0xFF};
    for (uint32_t v = 0; v < 1u << 22; v++) { /* F0..F7 leads, every second and third byte */
        p[0] = (unsigned char)(0xF0 | (v >> 19)), p[1] = (unsigned char)(v >> 11), p[2] = (unsigned char)(v >> 3);
        p[3] = last[v & 7];
        int want = reference_len(p, 4);
        if ((int)tile_utf8_seq(p, 4) != want)
            fail_msg("%02x %02x %02x %02x: got %zu, want %d", p[0], p[1], p[2], p[3], tile_utf8_seq(p, 4), want);
    }
}

/* Every scalar value: put writes its shortest form, which validates and
 * decodes back; a surrogate's bytes (which put is never given) do not
 * validate. */
static void test_every_scalar_value_round_trips(void **state)
{
    (void)state;
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        char out[4];
        size_t n = tile_utf8_put(cp, out);
        assert_int_equal(n, cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4);
        bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
        if (tile_utf8_valid(out, n, NULL) == surrogate)
            fail_msg("U+%04X: valid %d", cp, !surrogate);
        if (surrogate)
            continue;
        const uint8_t *q = (const uint8_t *)out;
        assert_int_equal(tile_utf8_next(&q), cp);
        assert_ptr_equal(q, (const uint8_t *)out + n);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_examples_and_offsets),
        cmocka_unit_test(test_every_short_sequence_agrees_with_the_definition),
        cmocka_unit_test(test_every_scalar_value_round_trips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
