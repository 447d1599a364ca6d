/* tensor.c - tensor allocation and shape arithmetic (see tensor.h). */
#include "tensor.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Above this size buffers come from mmap, where MADV_HUGEPAGE applies and the
 * pages are returned to the system on free (glibc's threshold is similar). */
#define TILE_MMAP_THRESHOLD (1u << 21)

int tile_shape_elems(const int64_t *shape, int rank, uint64_t *out, struct tile_error *e)
{
    uint64_t n = 1;
    bool zero = false;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0)
            return tile_error_set(e, TILE_EINVAL, "shape[%d] is %lld; dimensions must be >= 0", i,
                                  (long long)shape[i]);
        if (shape[i] == 0)
            zero = true;
    }
    /* The non-zero dims must multiply within range even when a zero makes
     * the tensor empty: numpy refuses such a shape ("array is too big"),
     * so no reference could produce or check it, and an empty tensor's
     * other dims stay usable as sizes. */
    for (int i = 0; i < rank; i++) {
        if (shape[i] != 0 && (__builtin_mul_overflow(n, (uint64_t)shape[i], &n) || n > INT64_MAX))
            return tile_error_set(e, TILE_ETOOBIG, "shape product overflows 64 bits at axis %d", i);
    }
    *out = zero ? 0 : n;
    return 0;
}

bool tile_shape_span_fits(const int64_t *shape, int rank, uint64_t size)
{
    uint64_t span = size ? size : 1;
    for (int i = 0; i < rank; i++) {
        if (shape[i] && (__builtin_mul_overflow(span, (uint64_t)shape[i], &span) || span > INT64_MAX))
            return false;
    }
    return true;
}

void *tile_alloc_buffer(uint64_t n)
{
    if (n == 0)
        n = 1;
    if (n > SIZE_MAX / 2)
        return NULL;
    /* Small buffers take malloc's 16-byte alignment, which serves every
     * dtype and every kernel store (the streaming ones align themselves),
     * at a fraction of memalign's cost (~1,000 instructions, a thirtieth of
     * a small request); cache-line alignment pays only once a buffer spans
     * many lines. */
    if (n < TILE_SMALL_BUFFER)
        return malloc((size_t)((n + 15) & ~(uint64_t)15));
    if (n < TILE_MMAP_THRESHOLD) {
        void *p = NULL;
        size_t rounded = (size_t)((n + 63) & ~(uint64_t)63);
        if (posix_memalign(&p, 64, rounded) != 0)
            return NULL;
        return p;
    }
    void *p = mmap(NULL, (size_t)n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, (size_t)n, MADV_HUGEPAGE);
#endif
    return p;
}

void tile_free_buffer(void *ptr, uint64_t n)
{
    if (!ptr)
        return;
    if (n == 0)
        n = 1;
    if (n < TILE_MMAP_THRESHOLD)
        free(ptr);
    else
        munmap(ptr, (size_t)n);
}

uint64_t tile_tensor_nbytes(const struct tile_tensor *t)
{
    return t->nelem * tile_dtype_size(t->dtype);
}

int tile_tensor_init(struct tile_tensor *t, enum tile_dtype dtype, int rank, const int64_t *shape,
                     uint64_t max_bytes, struct tile_error *e)
{
    return tile_tensor_init_in(t, dtype, rank, shape, max_bytes, NULL, 0, e);
}

int tile_tensor_init_in(struct tile_tensor *t, enum tile_dtype dtype, int rank, const int64_t *shape,
                        uint64_t max_bytes, void *buf, size_t buf_cap, struct tile_error *e)
{
    tile_tensor_reset(t);
    if (!tile_dtype_traits(dtype))
        return tile_error_set(e, TILE_EINVAL, "invalid dtype");
    if (rank < 0 || rank > TILE_MAX_RANK)
        return tile_error_set(e, TILE_EINVAL, "rank %d is outside 0..%d", rank, TILE_MAX_RANK);
    uint64_t nelem, nbytes;
    if (tile_shape_elems(shape, rank, &nelem, e) < 0)
        return -1;
    if (__builtin_mul_overflow(nelem, (uint64_t)tile_dtype_size(dtype), &nbytes) ||
        !tile_shape_span_fits(shape, rank, tile_dtype_size(dtype)))
        return tile_error_set(e, TILE_ETOOBIG, "tensor byte size overflows 64 bits");
    if (max_bytes && nbytes > max_bytes)
        return tile_error_set(e, TILE_ETOOBIG, "tensor needs %llu bytes, above the limit of %llu",
                              (unsigned long long)nbytes, (unsigned long long)max_bytes);
    bool borrowed = buf && nbytes <= buf_cap;
    void *data = borrowed ? buf : tile_alloc_buffer(nbytes);
    if (!data)
        return tile_error_set(e, TILE_ENOMEM, "cannot allocate %llu bytes", (unsigned long long)nbytes);
    if (nbytes < TILE_MMAP_THRESHOLD)
        memset(data, 0, (size_t)nbytes);
    t->dtype = dtype;
    t->rank = rank;
    if (rank)
        memcpy(t->shape, shape, sizeof(shape[0]) * (size_t)rank);
    t->nelem = nelem;
    t->data = data;
    t->owns_data = !borrowed;
    return 0;
}

void tile_tensor_free(struct tile_tensor *t)
{
    if (!t)
        return;
    if (t->owns_data)
        tile_free_buffer(t->data, tile_tensor_nbytes(t));
    free(t->blob);
    tile_tensor_reset(t);
}

void tile_tensor_reset(struct tile_tensor *t)
{
    t->dtype = TILE_DTYPE_INVALID;
    t->rank = 0;
    t->data = NULL;
    t->nelem = 0;
    t->owns_data = false;
    t->blob = NULL;
    t->blob_len = 0;
}

void tile_tensor_assign(struct tile_tensor *dst, const struct tile_tensor *src)
{
    dst->dtype = src->dtype;
    dst->rank = src->rank;
    memcpy(dst->shape, src->shape, sizeof(src->shape[0]) * (size_t)src->rank);
    dst->data = src->data;
    dst->nelem = src->nelem;
    dst->owns_data = src->owns_data;
    dst->blob = src->blob;
    dst->blob_len = src->blob_len;
}

uint64_t tile_tensor_string_bytes(const struct tile_tensor *t)
{
    if (t->dtype != TILE_STRING || !t->data)
        return 0;
    const struct tile_str *s = t->data;
    uint64_t sum = 0;
    for (uint64_t i = 0; i < t->nelem; i++)
        sum += s[i].len;
    return sum;
}
