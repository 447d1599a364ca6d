/* test_grpc_frame.c - gRPC message framing (api/grpc_frame.c): messages
 * reassembled whatever the DATA payloads' sizes, the size limit and the
 * compressed flag, grpc-timeout values, grpc-message escaping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "grpc_frame.h"

static void assert_error_has(const struct tile_error *e, enum tile_errcode code, const char *substr)
{
    if (!strstr(e->text, substr))
        fail_msg("error \"%s\" does not contain \"%s\"", e->text, substr);
    assert_int_equal(e->code, code);
}

/* Three messages (300 bytes, empty, 7 bytes) back to back. */
static size_t stream_of_three(uint8_t *buf)
{
    static const size_t lens[3] = {300, 0, 7};
    size_t n = 0;
    for (int m = 0; m < 3; m++) {
        tile_grpc_put_prefix(buf + n, (uint32_t)lens[m]);
        n += TILE_GRPC_PREFIX;
        for (size_t i = 0; i < lens[m]; i++)
            buf[n++] = (uint8_t)(m * 100 + i);
    }
    return n;
}

static void test_reassembly_any_split(void **state)
{
    (void)state;
    uint8_t stream[400];
    size_t total = stream_of_three(stream);
    assert_memory_equal(stream, "\0\0\0\x01\x2c", 5); /* big-endian 300 */
    for (size_t piece = 1; piece <= total; piece++) {
        struct tile_grpc_deframer d;
        struct tile_error e = {0};
        tile_grpc_deframer_init(&d, 1000);
        size_t got_lens[4], ngot = 0, off = 0;
        while (off < total) {
            size_t len = total - off < piece ? total - off : piece;
            size_t used_here = 0;
            while (used_here < len) {
                uint8_t *msg;
                size_t mlen;
                long long used = tile_grpc_deframe(&d, stream + off + used_here, len - used_here, &msg, &mlen, &e);
                assert_true(used >= 0);
                used_here += (size_t)used;
                if (!msg)
                    continue;
                assert_true(ngot < 3);
                for (size_t i = 0; i < mlen; i++)
                    assert_int_equal(msg[i], (uint8_t)(ngot * 100 + i));
                got_lens[ngot++] = mlen;
                free(msg);
            }
            off += len;
        }
        assert_int_equal(ngot, 3);
        assert_true(got_lens[0] == 300 && got_lens[1] == 0 && got_lens[2] == 7);
        assert_true(tile_grpc_deframer_idle(&d));
        tile_grpc_deframer_free(&d);
    }
}

/* The copy-free step: every message's start, bytes and end seen in order,
 * the bytes pointing into the caller's data, whatever the split. */
static void test_step_any_split(void **state)
{
    (void)state;
    uint8_t stream[400];
    size_t total = stream_of_three(stream);
    for (size_t piece = 1; piece <= total; piece++) {
        struct tile_grpc_deframer d;
        struct tile_error e = {0};
        tile_grpc_deframer_init(&d, 1000);
        size_t lens[3] = {0}, have[3] = {0}, starts = 0, ends = 0;
        for (size_t off = 0; off < total;) {
            size_t len = total - off < piece ? total - off : piece;
            struct tile_grpc_piece pc;
            long long used = tile_grpc_deframe_step(&d, stream + off, len, &pc, &e);
            assert_true(used > 0 && (size_t)used <= len);
            if (pc.start) {
                assert_int_equal(starts, ends); /* one message at a time */
                lens[starts++] = pc.msg_len;
            }
            if (pc.n) {
                assert_true(pc.bytes >= stream + off && pc.bytes + pc.n <= stream + off + (size_t)used);
                for (size_t i = 0; i < pc.n; i++)
                    assert_int_equal(pc.bytes[i], (uint8_t)((starts - 1) * 100 + have[starts - 1] + i));
                have[starts - 1] += pc.n;
            }
            if (pc.end) {
                assert_int_equal(have[ends], lens[ends]);
                ends++;
            }
            off += (size_t)used;
        }
        assert_int_equal(starts, 3);
        assert_int_equal(ends, 3);
        assert_true(lens[0] == 300 && lens[1] == 0 && lens[2] == 7);
        assert_true(tile_grpc_deframer_idle(&d));
    }
}

static void test_limit_and_compression(void **state)
{
    (void)state;
    uint8_t prefix[TILE_GRPC_PREFIX];
    uint8_t *msg;
    size_t mlen;
    struct tile_grpc_deframer d;
    struct tile_error e = {0};

    tile_grpc_deframer_init(&d, 100);
    tile_grpc_put_prefix(prefix, 101);
    assert_int_equal(tile_grpc_deframe(&d, prefix, 3, &msg, &mlen, &e), 3);
    assert_false(tile_grpc_deframer_idle(&d));
    assert_int_equal(tile_grpc_deframe(&d, prefix + 3, 2, &msg, &mlen, &e), -1);
    assert_error_has(&e, TILE_ETOOBIG, "gRPC message of 101 bytes is larger than the limit of 100 bytes");
    tile_grpc_deframer_free(&d);

    tile_error_clear(&e);
    tile_grpc_deframer_init(&d, 100);
    tile_grpc_put_prefix(prefix, 100); /* at the limit: fine */
    assert_int_equal(tile_grpc_deframe(&d, prefix, 5, &msg, &mlen, &e), 5);
    assert_null(msg);
    tile_grpc_deframer_free(&d); /* frees the half-read message */
    assert_true(tile_grpc_deframer_idle(&d));

    prefix[0] = 1;
    assert_int_equal(tile_grpc_deframe(&d, prefix, 5, &msg, &mlen, &e), -1);
    assert_error_has(&e, TILE_EUNSUPPORTED, "compressed");
    tile_grpc_deframer_free(&d);

    /* With a grpc-encoding named, flag 1 is a compressed message, reported
     * as such; any other flag is still refused. */
    struct tile_grpc_piece pc;
    tile_error_clear(&e);
    d.compressed_ok = true;
    assert_int_equal(tile_grpc_deframe_step(&d, prefix, 5, &pc, &e), 5);
    assert_true(pc.start && pc.compressed);
    tile_grpc_deframer_free(&d);
    assert_true(d.compressed_ok); /* a reset keeps what the call allows */
    prefix[0] = 2;
    assert_int_equal(tile_grpc_deframe_step(&d, prefix, 5, &pc, &e), -1);
    assert_error_has(&e, TILE_EUNSUPPORTED, "flag 2");
    tile_grpc_deframer_free(&d);

    /* 0 = the protocol's own bound */
    tile_grpc_deframer_init(&d, 0);
    assert_true(d.max == UINT32_MAX);
}

static void timeout_ok(const char *s, uint64_t want)
{
    uint64_t ns = 1;
    if (tile_grpc_timeout_parse(s, &ns) < 0)
        fail_msg("'%s' refused", s);
    assert_true(ns == want);
}

static void test_timeout(void **state)
{
    (void)state;
    timeout_ok("1H", UINT64_C(3600000000000));
    timeout_ok("2M", UINT64_C(120000000000));
    timeout_ok("3S", UINT64_C(3000000000));
    timeout_ok("250m", UINT64_C(250000000));
    timeout_ok("7u", 7000);
    timeout_ok("99999999n", 99999999);
    timeout_ok("0m", 0);
    timeout_ok("99999999H", UINT64_MAX); /* saturates */
    static const char *bad[] = {"", "S", "10", "123456789S", "1s", "1SS", "-1S", " 1S", "1.5S"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t ns = 5;
        if (tile_grpc_timeout_parse(bad[i], &ns) != -1)
            fail_msg("'%s' accepted", bad[i]);
        assert_true(ns == 5);
    }
}

static void test_message_encode(void **state)
{
    (void)state;
    char out[64];
    assert_int_equal(tile_grpc_message_encode("plain text: 'x' [1,2]", out, sizeof(out)), 21);
    assert_string_equal(out, "plain text: 'x' [1,2]");
    tile_grpc_message_encode("100% caf\xc3\xa9\n", out, sizeof(out));
    assert_string_equal(out, "100%25 caf%C3%A9%0A");
    /* never splits an escape: "ab%25" needs 5 + NUL */
    assert_int_equal(tile_grpc_message_encode("ab%c", out, 5), 2);
    assert_string_equal(out, "ab");
    assert_int_equal(tile_grpc_message_encode("ab%c", out, 6), 5);
    assert_string_equal(out, "ab%25");
    assert_int_equal(tile_grpc_message_encode("x", out, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reassembly_any_split),
        cmocka_unit_test(test_step_any_split),
        cmocka_unit_test(test_limit_and_compression),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_message_encode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
