/* test_grpc_reflect.c - server reflection answers (api/grpc_reflect.c) read
 * back field by field: the request echoed, the oneof answer chosen by the
 * request's last question, symbols found by exact name only (a prefix or
 * an extension of a name is not that name), and a malformed request
 * refused. tests/server/test_grpc_reflection.py drives the same code with
 * grpcio's reflection client. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "grpc_descriptors.h"
#include "grpc_reflect.h"
#include "pbwire.h"

/* A one-question request: field `number` holding `text` (host "h" first). */
static size_t request(uint8_t *buf, uint32_t number, const char *text)
{
    uint8_t *p = tile_pb_put_bytes(buf, 1, "h", 1);
    return (size_t)(tile_pb_put_bytes(p, number, text, strlen(text)) - buf);
}

/* The answer's field (4 to 7) and its bytes; the echo and host checked. */
static uint32_t answer(const uint8_t *req, size_t len, struct tile_grpc_buf *b, struct tile_pb_field *out)
{
    struct tile_error e = {0};
    assert_int_equal(tile_grpc_reflect(req, len, b, &e), 0);
    struct tile_pb_reader rd;
    struct tile_pb_field f;
    uint32_t kind = 0;
    tile_pb_reader_init(&rd, b->p, b->len);
    while (tile_pb_next(&rd, &f, "response", &e) > 0) {
        if (f.number == 1)
            assert_memory_equal(f.data, "h", 1);
        else if (f.number == 2)
            assert_true(f.len == len && memcmp(f.data, req, len) == 0);
        else
            kind = f.number, *out = f;
    }
    return kind;
}

/* The file names of a FileDescriptorResponse, comma-joined. */
static void file_names(const struct tile_pb_field *fdr, char *names, size_t cap)
{
    struct tile_pb_reader rd, fd;
    struct tile_pb_field f, g;
    struct tile_error e = {0};
    names[0] = '\0';
    tile_pb_reader_init(&rd, fdr->data, fdr->len);
    while (tile_pb_next(&rd, &f, "files", &e) > 0) {
        tile_pb_reader_init(&fd, f.data, f.len);
        while (tile_pb_next(&fd, &g, "file", &e) > 0) {
            if (g.number == 1) /* FileDescriptorProto.name */
                snprintf(names + strlen(names), cap - strlen(names), "%s%.*s", names[0] ? "," : "", (int)g.len,
                         (const char *)g.data);
        }
    }
}

static void test_symbols_and_files(void **state)
{
    (void)state;
    static const struct {
        uint32_t question;
        const char *text, *files;
    } cases[] = {
        {4, "inference.GRPCInferenceService.ModelInfer", "grpc_service.proto,model_config.proto"},
        {4, "inference.ModelInferRequest", "grpc_service.proto,model_config.proto"},
        {4, "inference.DataType", "model_config.proto"},
        {4, "grpc.health.v1.HealthCheckRequest", "health.proto"},
        {3, "health.proto", "health.proto"},
        {3, "grpc_service.proto", "grpc_service.proto,model_config.proto"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint8_t req[128];
        char names[128];
        struct tile_grpc_buf b = {0};
        struct tile_pb_field f;
        size_t len = request(req, cases[i].question, cases[i].text);
        assert_int_equal(answer(req, len, &b, &f), 4);
        file_names(&f, names, sizeof(names));
        assert_string_equal(names, cases[i].files);
        free(b.p);
    }
}

static void test_not_found(void **state)
{
    (void)state;
    /* A prefix and an extension of real names, and names of no file. */
    static const char *const symbols[] = {"inference.ModelInfer", "inference.ModelInferRequestX", "", "inference.",
                                          "zzz", "A"};
    for (size_t i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++) {
        uint8_t req[128];
        struct tile_grpc_buf b = {0};
        struct tile_pb_field f;
        size_t len = request(req, 4, symbols[i]);
        assert_int_equal(answer(req, len, &b, &f), 7);
        struct tile_pb_reader rd;
        struct tile_pb_field g;
        struct tile_error e = {0};
        tile_pb_reader_init(&rd, f.data, f.len);
        assert_int_equal(tile_pb_next(&rd, &g, "error", &e), 1);
        assert_int_equal(g.number, 1);
        assert_int_equal(g.value, 5); /* NOT_FOUND */
        free(b.p);
    }
}

static void test_last_question_wins(void **state)
{
    (void)state;
    uint8_t req[128];
    struct tile_grpc_buf b = {0};
    struct tile_pb_field f;
    size_t len = request(req, 3, "nope.proto");
    len = (size_t)(tile_pb_put_bytes(req + len, 7, "", 0) - req); /* then list_services */
    assert_int_equal(answer(req, len, &b, &f), 6);
    free(b.p);
}

static void test_every_symbol_is_found_in_its_file(void **state)
{
    (void)state;
    for (size_t i = 0; i < tile_grpc_nsymbols; i++) {
        if (i)
            assert_true(strcmp(tile_grpc_symbols[i - 1].name, tile_grpc_symbols[i].name) < 0);
        uint8_t req[512];
        char names[128];
        struct tile_grpc_buf b = {0};
        struct tile_pb_field f;
        size_t len = request(req, 4, tile_grpc_symbols[i].name);
        assert_int_equal(answer(req, len, &b, &f), 4);
        file_names(&f, names, sizeof(names));
        assert_int_equal(strncmp(names, tile_grpc_files[tile_grpc_symbols[i].file].name,
                                 strlen(tile_grpc_files[tile_grpc_symbols[i].file].name)),
                         0);
        free(b.p);
    }
}

static void test_malformed(void **state)
{
    (void)state;
    static const uint8_t varint_question[] = {0x38, 0x01}; /* list_services as a varint: an unknown field */
    static const uint8_t cut[] = {0x22, 0x05, 'a'};        /* a symbol longer than the message */
    static const uint8_t not_utf8[] = {0x22, 0x02, 0xc3, 0x28};
    static const uint8_t bad_extension[] = {0x2a, 0x02, 0x0a, 0x05}; /* its containing_type runs past it */
    struct tile_grpc_buf b = {0};
    struct tile_error e = {0};
    /* asks nothing, as protobuf reads it: answered with INVALID_ARGUMENT in the response */
    assert_int_equal(tile_grpc_reflect(varint_question, sizeof(varint_question), &b, &e), 0);
    assert_non_null(memmem(b.p, b.len, "asks nothing", 12));
    free(b.p);
    b = (struct tile_grpc_buf){0};
    static const uint8_t not_utf8_text[] = {0x3a, 0x01, 0xff}; /* list_services, not UTF-8 */
    assert_int_equal(tile_grpc_reflect(not_utf8_text, sizeof(not_utf8_text), &b, &e), -1);
    assert_non_null(strstr(e.text, "is not valid UTF-8"));
    tile_error_clear(&e);
    assert_int_equal(tile_grpc_reflect(cut, sizeof(cut), &b, &e), -1);
    tile_error_clear(&e);
    assert_int_equal(tile_grpc_reflect(not_utf8, sizeof(not_utf8), &b, &e), -1);
    assert_non_null(strstr(e.text, "UTF-8"));
    tile_error_clear(&e);
    assert_int_equal(tile_grpc_reflect(bad_extension, sizeof(bad_extension), &b, &e), -1);
    tile_error_clear(&e);
    free(b.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_symbols_and_files),
        cmocka_unit_test(test_not_found),
        cmocka_unit_test(test_last_question_wins),
        cmocka_unit_test(test_every_symbol_is_found_in_its_file),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
