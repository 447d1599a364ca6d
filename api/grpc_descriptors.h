/* grpc_descriptors.h - the vendored .proto files (api/proto/) as gRPC
 * server reflection describes them: each file's serialized
 * FileDescriptorProto, the files it imports, the services, and the file
 * that defines each symbol. The data is generated (grpc_descriptors.c, by
 * scripts/grpc_descriptors.py) so the build needs no protoc. */
#ifndef TILE_GRPC_DESCRIPTORS_H
#define TILE_GRPC_DESCRIPTORS_H

#include <stddef.h>
#include <stdint.h>

struct tile_grpc_file {
    const char *name; /* as imports name it: "grpc_service.proto" */
    const uint8_t *proto;
    size_t len;
    uint32_t deps; /* the files it imports, directly or not: bit i is tile_grpc_files[i] */
};

/* A fully-qualified name (package, message, field, oneof, enum, enum
 * value, service, method) and the index of the file that defines it. */
struct tile_grpc_symbol {
    const char *name;
    int file;
};

extern const struct tile_grpc_file tile_grpc_files[];
extern const size_t tile_grpc_nfiles;
/* Fully-qualified service names, sorted. */
extern const char *const tile_grpc_services[];
extern const size_t tile_grpc_nservices;
/* Sorted by name (strcmp). */
extern const struct tile_grpc_symbol tile_grpc_symbols[];
extern const size_t tile_grpc_nsymbols;

#endif
