/* test_grpc_msgs.c - the small gRPC service messages (api/grpc_msgs.c),
 * compared byte for byte with what the protobuf library writes for the
 * same values from tritonclient's own grpc_service.proto and
 * model_config.proto (the hex strings below; protobuf 6.33, tritonclient
 * 2.73). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "grpc_msgs.h"

static void assert_hex(const struct tile_grpc_buf *b, const char *hex)
{
    assert_false(b->oom);
    char got[1024] = "";
    for (size_t i = 0; i < b->len && 2 * i + 2 < sizeof(got); i++)
        snprintf(got + 2 * i, 3, "%02x", b->p[i]);
    assert_string_equal(got, hex);
}

static void test_health_and_server_metadata(void **state)
{
    (void)state;
    struct tile_grpc_buf b = {0};
    tile_grpc_bool_reply(&b, true);
    assert_hex(&b, "0801");
    b.len = 0;
    tile_grpc_bool_reply(&b, false); /* proto3 leaves false out */
    assert_hex(&b, "");
    b.len = 0;
    static const char *const ext[] = {"binary_tensor_data", "statistics"};
    tile_grpc_server_metadata(&b, "tiled", "1.2.3", ext, 2);
    assert_hex(&b, "0a0574696c65641205312e322e331a1262696e6172795f74656e736f725f646174611a0a73746174697374696373");
    free(b.p);
}

static const struct tile_grpc_tensor_meta inputs[] = {
    {.name = "input", .dtype = TILE_FLOAT32, .rank = 1, .shape = {-1}},
    {.name = "repeats", .dtype = TILE_INT64, .rank = 1, .shape = {-1}},
};

static void test_model_metadata(void **state)
{
    (void)state;
    static const char *const versions[] = {"1", "6", "13"};
    const struct tile_grpc_tensor_meta output = {.name = "output", .dtype = TILE_FLOAT32, .rank = 1, .shape = {-1}};
    const struct tile_grpc_model_meta m = {.name = "tile", .platform = "onnxruntime_onnx", .versions = versions,
                                           .nversions = 3, .inputs = inputs, .ninputs = 2, .outputs = &output,
                                           .noutputs = 1};
    struct tile_grpc_buf b = {0};
    tile_grpc_model_metadata(&b, &m);
    assert_hex(&b, "0a0474696c65120131120136120231331a106f6e6e7872756e74696d655f6f6e6e7822190a05696e7075741204465033"
                   "321a0affffffffffffffffff01221c0a07726570656174731205494e5436341a0affffffffffffffffff012a1a0a066f75"
                   "747075741204465033321a0affffffffffffffffff01");
    free(b.p);
}

static void test_model_config(void **state)
{
    (void)state;
    /* A BYTES output of dims [2, 0]: TYPE_STRING, and ModelOutput's dims are field 3 where ModelInput's are 4. */
    const struct tile_grpc_tensor_meta output = {.name = "output", .dtype = TILE_STRING, .rank = 2, .shape = {2, 0}};
    const struct tile_grpc_model_meta m = {.name = "tile", .platform = "onnxruntime_onnx", .backend = "tiled",
                                           .inputs = inputs, .ninputs = 2, .outputs = &output, .noutputs = 1,
                                           .version = 6};
    struct tile_grpc_buf b = {0};
    tile_grpc_model_config(&b, &m); /* version_policy {specific {versions: [6]}}, as HTTP's config has it */
    assert_hex(&b, "0a670a0474696c6512106f6e6e7872756e74696d655f6f6e6e781a051a030a01062a150a05696e707574100b220affffff"
                   "ffffffffffff012a170a07726570656174731009220affffffffffffffffff01320e0a066f7574707574100d1a0202008a"
                   "010574696c6564");
    free(b.p);
}

static void test_model_statistics(void **state)
{
    (void)state;
    const struct tile_grpc_model_stats s = {
        .name = "tile", .version = "13", .last_inference_ms = UINT64_C(1700000000123), .inference_count = 5,
        .execution_count = 5, .success_count = 5, .success_ns = 123456, .queue_count = 5, .queue_ns = 99,
        .compute_input_count = 5, .compute_input_ns = 1, .compute_infer_count = 5, .compute_infer_ns = 300000,
        .compute_output_count = 5, .compute_output_ns = 7, .cache_hit_count = 2, .cache_hit_ns = 3,
    };
    struct tile_grpc_buf b = {0};
    tile_grpc_model_statistics(&b, &s, 1); /* cache_hit and cache_miss too, as HTTP shows them */
    assert_hex(&b, "0a430a0474696c651202313318fbd095ffbc3120052805322c0a06080510c0c40712001a04080510632204080510012a06"
                   "080510e0a7123204080510073a04080210034200");
    free(b.p);
}

static const struct tile_grpc_layout model_ref = {"inference.ModelReadyRequest", {"name", "version"}, 2};
static const struct tile_grpc_layout health_request = {"grpc.health.v1.HealthCheckRequest", {"service"}, 1};

static bool str_eq(struct tile_grpc_str s, const char *lit)
{
    return s.len == strlen(lit) && memcmp(s.ptr, lit, s.len) == 0;
}

static void test_model_ref(void **state)
{
    (void)state;
    static const uint8_t req[] = {0x0a, 0x04, 't', 'i', 'l', 'e', 0x12, 0x02, '1', '3', 0x18, 0x01};
    struct tile_grpc_str ref[2];
    struct tile_error e = {0};
    assert_int_equal(tile_grpc_strings_decode(req, sizeof(req), &model_ref, ref, &e), 0); /* field 3 skipped */
    assert_true(str_eq(ref[0], "tile") && str_eq(ref[1], "13"));
    assert_int_equal(tile_grpc_strings_decode(req, 0, &model_ref, ref, &e), 0);
    assert_true(ref[0].len == 0 && ref[1].len == 0);
    /* name as a varint: a field of another wire type is unknown to the
     * message, skipped as protobuf skips it */
    static const uint8_t other_wire[] = {0x08, 0x01, 0x12, 0x01, '6'};
    assert_int_equal(tile_grpc_strings_decode(other_wire, sizeof(other_wire), &model_ref, ref, &e), 0);
    assert_true(ref[0].len == 0 && str_eq(ref[1], "6"));
    /* last one wins */
    static const uint8_t twice[] = {0x0a, 0x01, 'a', 0x0a, 0x04, 't', 'i', 'l', 'e'};
    assert_int_equal(tile_grpc_strings_decode(twice, sizeof(twice), &model_ref, ref, &e), 0);
    assert_true(str_eq(ref[0], "tile"));
    static const uint8_t truncated[] = {0x0a, 0x05, 't'};
    assert_int_equal(tile_grpc_strings_decode(truncated, sizeof(truncated), &model_ref, ref, &e), -1);
    assert_int_equal(e.code, TILE_EINVAL);
    tile_error_clear(&e);
}

/* Class 1: unknown groups (wire types 3/4) are skipped whole, nested ones
 * included; a mismatched or missing end-group is an error. */
static void test_groups_skipped(void **state)
{
    (void)state;
    struct tile_grpc_str ref[2];
    struct tile_error e = {0};
    /* name "tile", then group 9 {varint 1, group 10 {bytes "x"}, fixed32}, then version "6" */
    static const uint8_t req[] = {0x0a, 0x04, 't', 'i', 'l', 'e', 0x4b, 0x08, 0x01, 0x53, 0x0a, 0x01, 'x', 0x54,
                                  0x0d, 1, 2, 3, 4, 0x4c, 0x12, 0x01, '6'};
    assert_int_equal(tile_grpc_strings_decode(req, sizeof(req), &model_ref, ref, &e), 0);
    assert_true(str_eq(ref[0], "tile") && str_eq(ref[1], "6"));
    /* a group of a known field number (1) is unknown too */
    static const uint8_t known_number[] = {0x0b, 0x0a, 0x01, 'z', 0x0c, 0x12, 0x01, '1'};
    assert_int_equal(tile_grpc_strings_decode(known_number, sizeof(known_number), &model_ref, ref, &e), 0);
    assert_true(ref[0].len == 0 && str_eq(ref[1], "1"));
    static const uint8_t mismatched[] = {0x4b, 0x08, 0x01, 0x54}; /* group 9 ended as 10 */
    assert_int_equal(tile_grpc_strings_decode(mismatched, sizeof(mismatched), &model_ref, ref, &e), -1);
    assert_non_null(strstr(e.text, "group 9 ended as group 10"));
    tile_error_clear(&e);
    static const uint8_t open[] = {0x4b, 0x08, 0x01}; /* no end */
    assert_int_equal(tile_grpc_strings_decode(open, sizeof(open), &model_ref, ref, &e), -1);
    assert_non_null(strstr(e.text, "group 9 has no end"));
    tile_error_clear(&e);
    static const uint8_t stray_end[] = {0x4c};
    assert_int_equal(tile_grpc_strings_decode(stray_end, sizeof(stray_end), &model_ref, ref, &e), -1);
    tile_error_clear(&e);
    /* 100 nested groups are read, 101 refused */
    uint8_t deep[2 * 101];
    for (int depth = 100; depth <= 101; depth++) {
        for (int i = 0; i < depth; i++) {
            deep[i] = 0x4b;
            deep[depth + i] = 0x4c;
        }
        assert_int_equal(tile_grpc_strings_decode(deep, 2 * (size_t)depth, &model_ref, ref, &e), depth == 100 ? 0 : -1);
        tile_error_clear(&e);
    }
}

/* Class 5: a string field that is not UTF-8 is refused, naming it. */
static void test_strings_utf8(void **state)
{
    (void)state;
    struct tile_grpc_str ref[2];
    struct tile_error e = {0};
    static const uint8_t bad_version[] = {0x0a, 0x04, 't', 'i', 'l', 'e', 0x12, 0x02, 0xff, 0xfe};
    assert_int_equal(tile_grpc_strings_decode(bad_version, sizeof(bad_version), &model_ref, ref, &e), -1);
    assert_int_equal(e.code, TILE_EINVAL);
    assert_non_null(strstr(e.text, "inference.ModelReadyRequest.version is not valid UTF-8"));
    tile_error_clear(&e);
    static const uint8_t overlong[] = {0x0a, 0x02, 0xc0, 0xaf}; /* an overlong '/' */
    assert_int_equal(tile_grpc_strings_decode(overlong, sizeof(overlong), &model_ref, ref, &e), -1);
    tile_error_clear(&e);
    static const uint8_t good[] = {0x0a, 0x02, 0xc3, 0xa9}; /* "é" */
    assert_int_equal(tile_grpc_strings_decode(good, sizeof(good), &model_ref, ref, &e), 0);
}

/* Class 6: each request its own layout. HealthCheckRequest has field 1
 * only: a field 2 of any type is unknown. */
static void test_own_layout(void **state)
{
    (void)state;
    struct tile_grpc_str service;
    struct tile_error e = {0};
    static const uint8_t req[] = {0x12, 0x03, 0x00, 0x01, 0xff, 0x10, 0x05, 0x0a, 0x00};
    assert_int_equal(tile_grpc_strings_decode(req, sizeof(req), &health_request, &service, &e), 0);
    assert_int_equal(service.len, 0);
    static const struct tile_grpc_layout empty = {"inference.ServerLiveRequest", {0}, 0};
    assert_int_equal(tile_grpc_strings_decode(req, sizeof(req), &empty, NULL, &e), 0);
    static const uint8_t bad[] = {0x0a, 0x05};
    assert_int_equal(tile_grpc_strings_decode(bad, sizeof(bad), &empty, NULL, &e), -1);
    tile_error_clear(&e);
}

static void test_health(void **state)
{
    (void)state;
    struct tile_grpc_buf b = {0};
    tile_grpc_health_reply(&b, TILE_GRPC_SERVING);
    assert_hex(&b, "0801");
    b.len = 0;
    tile_grpc_health_reply(&b, TILE_GRPC_NOT_SERVING);
    assert_hex(&b, "0802");
    free(b.p);
}

/* The bytes protobuf writes for SystemSharedMemoryRegisterRequest(name="in",
 * key="/k", offset=4096, byte_size=64) and a status response holding that
 * region. */
static void test_shared_memory(void **state)
{
    (void)state;
    static const uint8_t reg[] = {0x0a, 0x02, 'i', 'n', 0x12, 0x02, '/', 'k', 0x18, 0x80, 0x20, 0x20, 0x40};
    struct tile_grpc_shm_register r;
    struct tile_error e = {0};
    assert_int_equal(tile_grpc_shm_register_decode(reg, sizeof(reg), &r, &e), 0);
    assert_true(r.name.len == 2 && !memcmp(r.name.ptr, "in", 2));
    assert_true(r.key.len == 2 && !memcmp(r.key.ptr, "/k", 2));
    assert_int_equal(r.offset, 4096);
    assert_int_equal(r.byte_size, 64);
    assert_int_equal(tile_grpc_shm_register_decode(reg, 4, &r, &e), 0); /* absent fields read as proto3 defaults */
    assert_int_equal(r.key.len, 0);
    assert_int_equal(r.byte_size, 0);
    static const uint8_t other_wire[] = {0x1a, 0x02, 'x', 'y', 0x20, 0x07}; /* offset as bytes: unknown */
    assert_int_equal(tile_grpc_shm_register_decode(other_wire, sizeof(other_wire), &r, &e), 0);
    assert_int_equal(r.offset, 0);
    assert_int_equal(r.byte_size, 7);
    static const uint8_t bad_key[] = {0x12, 0x01, 0x80};
    assert_int_equal(tile_grpc_shm_register_decode(bad_key, sizeof(bad_key), &r, &e), -1);
    assert_non_null(strstr(e.text, "SystemSharedMemoryRegisterRequest.key is not valid UTF-8"));
    tile_error_clear(&e);
    struct tile_grpc_buf b = {0};
    tile_grpc_shm_status_region(&b, "in", "/k", 4096, 64);
    assert_hex(&b, "0a130a02696e120d0a02696e12022f6b1880202040");
    free(b.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health_and_server_metadata),
        cmocka_unit_test(test_model_metadata),
        cmocka_unit_test(test_model_config),
        cmocka_unit_test(test_model_statistics),
        cmocka_unit_test(test_model_ref),
        cmocka_unit_test(test_groups_skipped),
        cmocka_unit_test(test_strings_utf8),
        cmocka_unit_test(test_own_layout),
        cmocka_unit_test(test_health),
        cmocka_unit_test(test_shared_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
