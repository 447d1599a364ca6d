/* test_otlp_hex.c - tile_hex, the trace and span ids' text (every access
 * line carries one): each byte value as printf's "%02x" writes it, at every
 * place of an id, and the terminating NUL right after the 2n digits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "otlp.h"

static void every_byte_at_every_place(void **state)
{
    (void)state;
    uint8_t id[16];
    char got[2 * sizeof(id) + 2], want[2 * sizeof(id) + 1];
    for (size_t at = 0; at < sizeof(id); at++) {
        for (int byte = 0; byte < 256; byte++) {
            for (size_t i = 0; i < sizeof(id); i++)
                id[i] = (uint8_t)(i * 37 + 11);
            id[at] = (uint8_t)byte;
            for (size_t i = 0; i < sizeof(id); i++)
                snprintf(want + 2 * i, 3, "%02x", id[i]);
            memset(got, 'Z', sizeof(got));
            tile_hex(got, id, sizeof(id));
            assert_string_equal(got, want);
            assert_int_equal(got[sizeof(got) - 1], 'Z'); /* nothing past the NUL */
        }
    }
}

static void no_bytes(void **state)
{
    (void)state;
    char got[2] = {'Z', 'Z'};
    tile_hex(got, (const uint8_t *)"", 0);
    assert_int_equal(got[0], '\0');
    assert_int_equal(got[1], 'Z');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_byte_at_every_place),
        cmocka_unit_test(no_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
