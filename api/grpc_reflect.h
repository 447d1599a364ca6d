/* grpc_reflect.h - gRPC server reflection (grpc.reflection.v1alpha and
 * grpc.reflection.v1, whose messages are the same): the answer to one
 * ServerReflectionRequest, from the vendored .proto files
 * (grpc_descriptors.h). */
#ifndef TILE_GRPC_REFLECT_H
#define TILE_GRPC_REFLECT_H

#include <stddef.h>

#include "error.h"
#include "grpc_msgs.h"

/* Writes the ServerReflectionResponse to the ServerReflectionRequest
 * msg[0, len): list_services, file_by_filename and file_containing_symbol
 * (the file with every file it imports), all_extension_numbers_of_type
 * (none: the files declare no extensions); what is not found, or a request
 * that asks nothing, is answered with an error_response (NOT_FOUND,
 * INVALID_ARGUMENT), as gRPC's own servers answer. Returns -1 with `e`
 * only when the message does not decode. */
int tile_grpc_reflect(const void *msg, size_t len, struct tile_grpc_buf *b, struct tile_error *e);

#endif
