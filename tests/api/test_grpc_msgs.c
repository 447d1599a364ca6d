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
                                           .inputs = inputs, .ninputs = 2, .outputs = &output, .noutputs = 1};
    struct tile_grpc_buf b = {0};
    tile_grpc_model_config(&b, &m);
    assert_hex(&b, "0a600a0474696c6512106f6e6e7872756e74696d655f6f6e6e782a150a05696e707574100b220affffffffffffffffff01"
                   "2a170a07726570656174731009220affffffffffffffffff01320e0a066f7574707574100d1a0202008a010574696c6564");
    free(b.p);
}

static void test_model_statistics(void **state)
{
    (void)state;
    const struct tile_grpc_model_stats s = {
        .name = "tile", .version = "13", .last_inference_ms = UINT64_C(1700000000123), .inference_count = 5,
        .execution_count = 5, .success_count = 5, .success_ns = 123456, .queue_count = 5, .queue_ns = 99,
        .compute_input_count = 5, .compute_input_ns = 1, .compute_infer_count = 5, .compute_infer_ns = 300000,
        .compute_output_count = 5, .compute_output_ns = 7,
    };
    struct tile_grpc_buf b = {0};
    tile_grpc_model_statistics(&b, &s, 1);
    assert_hex(&b, "0a3b0a0474696c651202313318fbd095ffbc312005280532240a06080510c0c40712001a04080510632204080510012a06"
                   "080510e0a712320408051007");
    free(b.p);
}

static void test_model_ref(void **state)
{
    (void)state;
    static const uint8_t req[] = {0x0a, 0x04, 't', 'i', 'l', 'e', 0x12, 0x02, '1', '3', 0x18, 0x01};
    struct tile_grpc_str name, version;
    struct tile_error e = {0};
    assert_int_equal(tile_grpc_model_ref_decode(req, sizeof(req), &name, &version, &e), 0); /* field 3 skipped */
    assert_true(name.len == 4 && !memcmp(name.ptr, "tile", 4));
    assert_true(version.len == 2 && !memcmp(version.ptr, "13", 2));
    assert_int_equal(tile_grpc_model_ref_decode(req, 0, &name, &version, &e), 0);
    assert_true(name.len == 0 && version.len == 0);
    static const uint8_t bad[] = {0x08, 0x01};
    assert_int_equal(tile_grpc_model_ref_decode(bad, sizeof(bad), &name, &version, &e), -1);
    assert_int_equal(e.code, TILE_EINVAL);
    assert_non_null(strstr(e.text, "field 1 has wire type 0"));
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
    static const uint8_t bad[] = {0x1a, 0x02, 'x', 'y'}; /* offset as bytes */
    assert_int_equal(tile_grpc_shm_register_decode(bad, sizeof(bad), &r, &e), -1);
    assert_non_null(strstr(e.text, "field 3 has wire type 2, expected 0"));
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
        cmocka_unit_test(test_health),
        cmocka_unit_test(test_shared_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
