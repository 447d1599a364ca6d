/* grpc_reflect.c - gRPC server reflection (see grpc_reflect.h).
 *
 * DESIGN. The descriptors are data generated from the vendored .proto files
 * (grpc_descriptors.c), so the answer is a lookup: a file by name, the file
 * that defines a symbol (bsearch in the sorted symbol table), the list of
 * services. A file is sent with every file it imports, as gRPC's servers
 * send it, so a client can build the descriptors from one answer.
 * Failures a client can act on travel in the response (error_response,
 * with the status gRPC's servers put there); only a request that is not a
 * protobuf message fails the call.
 *
 * The reflection services themselves are not listed: their .proto is not
 * vendored, so a client could not resolve what the list names.
 */
#include "grpc_reflect.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_descriptors.h"
#include "pbwire.h"

/* ServerReflectionRequest's fields (reflection.proto). */
enum {
    REQ_HOST = 1,
    REQ_FILE_BY_FILENAME = 3,
    REQ_FILE_CONTAINING_SYMBOL = 4,
    REQ_FILE_CONTAINING_EXTENSION = 5,
    REQ_ALL_EXTENSION_NUMBERS_OF_TYPE = 6,
    REQ_LIST_SERVICES = 7,
};

/* ServerReflectionResponse's fields. */
enum {
    RES_VALID_HOST = 1,
    RES_ORIGINAL_REQUEST = 2,
    RES_FILE_DESCRIPTOR = 4,   /* FileDescriptorResponse{repeated bytes file_descriptor_proto = 1} */
    RES_EXTENSION_NUMBERS = 5, /* ExtensionNumberResponse{base_type_name = 1, repeated int32 extension_number = 2} */
    RES_LIST_SERVICES = 6,     /* ListServiceResponse{repeated ServiceResponse{name = 1} service = 1} */
    RES_ERROR = 7,             /* ErrorResponse{int32 error_code = 1, string error_message = 2} */
};

/* The status codes error_response carries (grpc/status.h). */
enum { CODE_INVALID_ARGUMENT = 3, CODE_NOT_FOUND = 5 };

struct request {
    struct tile_grpc_str host, arg;
    uint32_t kind; /* the field of the oneof that came last, as protobuf reads a oneof; 0: none */
};

/* ExtensionRequest{string containing_type = 1, int32 extension_number =
 * 2}: only checked to be one (no file here declares extensions). */
static int check_extension_request(const struct tile_pb_field *f, struct tile_error *e)
{
    struct tile_pb_reader rd;
    struct tile_pb_field g;
    int rc;
    tile_pb_reader_init(&rd, f->data, f->len);
    while ((rc = tile_pb_next(&rd, &g, "the reflection request's file_containing_extension", e)) > 0) {
        if (g.number == 1 && g.wire == TILE_PB_LEN &&
            tile_pb_utf8(&g, "grpc.reflection.v1alpha.ExtensionRequest.containing_type", e) < 0)
            return -1;
    }
    return rc;
}

/* As protobuf reads the message: a field of another wire type than its
 * own is an unknown field, every string must be UTF-8, the oneof is its
 * member given last. */
static int decode(const void *msg, size_t len, struct request *q, struct tile_error *e)
{
    struct tile_pb_reader rd;
    struct tile_pb_field f;
    int rc;
    memset(q, 0, sizeof(*q));
    tile_pb_reader_init(&rd, msg, len);
    while ((rc = tile_pb_next(&rd, &f, "the reflection request", e)) > 0) {
        if ((f.number != REQ_HOST && (f.number < REQ_FILE_BY_FILENAME || f.number > REQ_LIST_SERVICES)) ||
            f.wire != TILE_PB_LEN)
            continue; /* unknown to the message, as protobuf reads it (another wire type included) */
        if (f.number == REQ_FILE_CONTAINING_EXTENSION /* the one member that is a message, not a string */
                ? check_extension_request(&f, e) < 0
                : tile_pb_utf8(&f, f.number == REQ_HOST ? "ServerReflectionRequest.host"
                                                        : "a ServerReflectionRequest string", e) < 0)
            return -1;
        struct tile_grpc_str s = {(const char *)f.data, f.len};
        if (f.number == REQ_HOST) {
            q->host = s;
        } else {
            q->kind = f.number;
            q->arg = s;
        }
    }
    return rc;
}

static bool str_is(struct tile_grpc_str s, const char *c)
{
    return strlen(c) == s.len && memcmp(c, s.ptr, s.len) == 0;
}

static int file_named(struct tile_grpc_str name)
{
    for (size_t i = 0; i < tile_grpc_nfiles; i++) {
        if (str_is(name, tile_grpc_files[i].name))
            return (int)i;
    }
    return -1;
}

static int compare_symbol(const void *key, const void *elem)
{
    const struct tile_grpc_str *s = key;
    const char *name = ((const struct tile_grpc_symbol *)elem)->name;
    size_t n = strlen(name);
    int c = memcmp(s->ptr, name, s->len < n ? s->len : n);
    return c ? c : (s->len > n) - (s->len < n);
}

static const struct tile_grpc_symbol *symbol_named(struct tile_grpc_str name)
{
    return bsearch(&name, tile_grpc_symbols, tile_grpc_nsymbols, sizeof(tile_grpc_symbols[0]), compare_symbol);
}

/* FileDescriptorResponse: file `i`, then each file it imports. */
static void put_file(struct tile_grpc_buf *b, int i)
{
    struct tile_grpc_buf files = {0};
    tile_grpc_buf_bytes(&files, 1, tile_grpc_files[i].proto, tile_grpc_files[i].len);
    for (size_t j = 0; j < tile_grpc_nfiles; j++) {
        if (tile_grpc_files[i].deps & (UINT32_C(1) << j))
            tile_grpc_buf_bytes(&files, 1, tile_grpc_files[j].proto, tile_grpc_files[j].len);
    }
    tile_grpc_buf_sub(b, RES_FILE_DESCRIPTOR, &files);
}

static void put_services(struct tile_grpc_buf *b)
{
    struct tile_grpc_buf list = {0};
    for (size_t i = 0; i < tile_grpc_nservices; i++) {
        struct tile_grpc_buf service = {0};
        tile_grpc_buf_str(&service, 1, tile_grpc_services[i]);
        tile_grpc_buf_sub(&list, 1, &service);
    }
    tile_grpc_buf_sub(b, RES_LIST_SERVICES, &list);
}

static void put_error(struct tile_grpc_buf *b, int code, const char *msg)
{
    struct tile_grpc_buf err = {0};
    tile_grpc_buf_varint(&err, 1, (uint64_t)code);
    tile_grpc_buf_str(&err, 2, msg);
    tile_grpc_buf_sub(b, RES_ERROR, &err);
}

/* NOT_FOUND naming what was asked for ("symbol 'x.Y' not found"). */
static void put_not_found(struct tile_grpc_buf *b, const char *what, struct tile_grpc_str name, const char *hint)
{
    char msg[384];
    snprintf(msg, sizeof(msg), "%s '%.*s' not found%s", what, (int)(name.len < 200 ? name.len : 200), name.ptr, hint);
    put_error(b, CODE_NOT_FOUND, msg);
}

/* A message type's extension numbers: none is declared in these files. */
static void put_extension_numbers(struct tile_grpc_buf *b, struct tile_grpc_str type)
{
    struct tile_grpc_buf numbers = {0};
    tile_grpc_buf_bytes(&numbers, 1, type.ptr, type.len);
    tile_grpc_buf_sub(b, RES_EXTENSION_NUMBERS, &numbers);
}

static void answer(struct tile_grpc_buf *b, const struct request *q)
{
    const struct tile_grpc_symbol *sym;
    int file;
    switch (q->kind) {
    case REQ_LIST_SERVICES:
        put_services(b);
        break;
    case REQ_FILE_BY_FILENAME:
        if ((file = file_named(q->arg)) >= 0)
            put_file(b, file);
        else
            put_not_found(b, "file", q->arg,
                          " (this server describes grpc_service.proto, model_config.proto and health.proto)");
        break;
    case REQ_FILE_CONTAINING_SYMBOL:
        if ((sym = symbol_named(q->arg)) != NULL)
            put_file(b, sym->file);
        else
            put_not_found(b, "symbol", q->arg, "");
        break;
    case REQ_FILE_CONTAINING_EXTENSION:
        put_error(b, CODE_NOT_FOUND, "extension not found: the files of this server declare no extensions");
        break;
    case REQ_ALL_EXTENSION_NUMBERS_OF_TYPE:
        if (symbol_named(q->arg))
            put_extension_numbers(b, q->arg);
        else
            put_not_found(b, "type", q->arg, "");
        break;
    default:
        put_error(b, CODE_INVALID_ARGUMENT,
                  "the reflection request asks nothing (file_by_filename, file_containing_symbol, "
                  "file_containing_extension, all_extension_numbers_of_type or list_services)");
    }
}

int tile_grpc_reflect(const void *msg, size_t len, struct tile_grpc_buf *b, struct tile_error *e)
{
    struct request q;
    if (decode(msg, len, &q, e) < 0)
        return -1;
    if (q.host.len)
        tile_grpc_buf_bytes(b, RES_VALID_HOST, q.host.ptr, q.host.len);
    tile_grpc_buf_bytes(b, RES_ORIGINAL_REQUEST, msg, len);
    answer(b, &q);
    return 0;
}
