/* grow.h - the one growable-buffer step.
 *
 * Request bodies (service.c), the encoder's pieces (encode.c), JSON data
 * of unknown shape (jsondata.c), protobuf replies (grpc_msgs.c) and
 * inflated bodies (compress.c) all grow the same way: double the capacity
 * until the new bytes fit, never past a limit, and never let the size
 * arithmetic wrap (a wrapped capacity is a heap overflow on the next
 * memcpy). Each module keeps its own struct (a pointer, a length, a
 * capacity) and calls this for the step that is the same everywhere.
 */
#ifndef TILE_GROW_H
#define TILE_GROW_H

#include <stddef.h>

/* Room for `need` more elements of `unit` bytes in `buf`, which holds
 * `len` of its `*cap` elements: the capacity doubles from `first` (or from
 * *cap when not 0) until len + need fit, then is cut to `max` elements if
 * it went past. Returns the buffer (moved or not, *cap updated), or NULL
 * when len + need is above `max`, a size would overflow, or memory runs
 * out - `buf` and *cap then stay as they were, and the caller still owns
 * `buf`. When the room is already there, returns `buf` at once. */
void *tile_grow(void *buf, size_t *cap, size_t len, size_t need, size_t unit, size_t first, size_t max);

#endif
