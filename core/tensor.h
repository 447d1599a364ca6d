/* tensor.h - the plain tensor struct the core works on.
 *
 * A tensor is a dtype, a shape and a row-major buffer of elements in host
 * byte order. Fixed-width elements sit directly in `data`; string elements
 * are `struct tile_str` views whose bytes live elsewhere (in `blob` when the
 * tensor owns them, or in another tensor when the views are borrowed, as in a
 * tiled output, whose strings point into the input).
 *
 * Ownership: tile_tensor_init_*() allocate `data` (and `blob`) and
 * tile_tensor_free() releases both. A tensor built by hand with borrowed
 * buffers leaves `owns_data` / `blob` unset and is never freed by tiled.
 */
#ifndef TILE_TENSOR_H
#define TILE_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "error.h"

/* Structural maximum rank; configured limits can only be lower. */
#define TILE_MAX_RANK 64

struct tile_tensor {
    enum tile_dtype dtype;
    int rank;
    int64_t shape[TILE_MAX_RANK];
    void *data;      /* elements (strings: struct tile_str[]) */
    uint64_t nelem;  /* product of shape */
    bool owns_data;  /* tile_tensor_free() frees data */
    char *blob;      /* owned string bytes (NULL if none) */
    uint64_t blob_len;
};

/* Checked product of `rank` dims (each must be >= 0). Returns -1 and fills
 * `e` on a negative dim or when the product of the non-zero dims exceeds
 * INT64_MAX (an empty shape too, as numpy refuses it). */
int tile_shape_elems(const int64_t *shape, int rank, uint64_t *out, struct tile_error *e);

/* Whether `size` bytes times the non-zero dims stays within INT64_MAX: the
 * bound numpy puts on every array, empty or not ("array is too big"), which
 * every tensor and plan here keeps, so that any of them can be written as
 * .npy and read back. Only a tensor with a zero dim can meet tile_shape_elems
 * and not this. */
bool tile_shape_span_fits(const int64_t *shape, int rank, uint64_t size);

/* Sets dtype and shape and allocates a zeroed element buffer (cache-line
 * aligned; large buffers ask for transparent huge pages). `max_bytes` bounds
 * the allocation (0 = no bound). On error the tensor is left empty. */
int tile_tensor_init(struct tile_tensor *t, enum tile_dtype dtype, int rank, const int64_t *shape,
                     uint64_t max_bytes, struct tile_error *e);
/* The same, with the caller's `buf` (`buf_cap` bytes, aligned for any
 * element) as the element buffer when the elements fit in it: zeroed and
 * borrowed (owns_data unset), for a small tensor that lives no longer than
 * the buffer - a v2 request's repeats, read and dropped while it decodes,
 * where the allocation and its release were a tenth of the decode. Larger
 * tensors are allocated as tile_tensor_init does. */
int tile_tensor_init_in(struct tile_tensor *t, enum tile_dtype dtype, int rank, const int64_t *shape,
                        uint64_t max_bytes, void *buf, size_t buf_cap, struct tile_error *e);

/* Releases what the tensor owns and empties it (tile_tensor_reset). NULL is fine. */
void tile_tensor_free(struct tile_tensor *t);

/* An empty tensor: invalid dtype, rank 0, no data, owning nothing. A
 * tensor's shape is read only up to its rank, so the 512-byte array is
 * left as it is (here and in tile_tensor_assign): clearing and copying it
 * whole was a tenth of a small request's instructions. */
void tile_tensor_reset(struct tile_tensor *t);

/* dst = src as far as src holds: every field, and the shape up to its
 * rank. What src owns is now owned twice: the caller resets one. */
void tile_tensor_assign(struct tile_tensor *dst, const struct tile_tensor *src);

/* Byte size of the element buffer (nelem * element size). */
uint64_t tile_tensor_nbytes(const struct tile_tensor *t);

/* Sum of string lengths of a string tensor (0 for other dtypes). */
uint64_t tile_tensor_string_bytes(const struct tile_tensor *t);

/* Below this many bytes tile_alloc_buffer aligns to 16, not 64. */
#define TILE_SMALL_BUFFER 4096

/* Allocates `n` bytes aligned to 64 (below TILE_SMALL_BUFFER bytes, to 16:
 * every dtype's alignment, at malloc's cost), with MADV_HUGEPAGE for large
 * sizes so first touch does not crawl at 4 KiB page-fault speed. NULL on
 * failure. Free with tile_free_buffer(ptr, n). */
void *tile_alloc_buffer(uint64_t n);
void tile_free_buffer(void *ptr, uint64_t n);

#endif
