/* npy.h - NumPy .npy files: reading into tensors and writing them back.
 *
 * Reading accepts format versions 1.0, 2.0 and 3.0; little- and big-endian
 * numeric dtypes ('<', '>', '|', '='); bool ('|b1'); complex ('<c8', '<c16');
 * float16; fixed-width unicode ('<U<n>', UCS-4) and bytes ('|S<n>') strings,
 * which become UTF-8 string tensors; and Fortran-order arrays (transposed to
 * C order). Object ('|O'), structured, datetime and void dtypes are refused
 * with an error naming the descr. bfloat16 has no .npy form: writing a
 * bfloat16 tensor fails with TILE_ENOTACCEPT.
 */
#ifndef TILE_NPY_H
#define TILE_NPY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tile.h"

/* How a string tensor was written in .npy (kept so the output keeps it). */
enum tile_npy_strkind {
    TILE_NPY_STR_UNICODE, /* '<U': fixed-width UCS-4 */
    TILE_NPY_STR_BYTES    /* '|S': fixed-width bytes */
};

/* What the header of a .npy file says, before its data is read. */
struct tile_npy_header {
    int major, minor;
    size_t header_len;          /* bytes before the data (magic..padding) */
    enum tile_dtype dtype;
    bool big_endian;
    bool fortran_order;
    int rank;
    int64_t shape[TILE_MAX_RANK];
    uint64_t nelem;
    uint64_t item_size;         /* bytes per element in the file */
    enum tile_npy_strkind strkind; /* strings only */
    uint64_t strwidth;          /* strings only: chars ('U') or bytes ('S') */
    uint64_t data_bytes;        /* nelem * item_size */
};

/* Parses the magic, version and header dict at the start of buf. Returns 0,
 * or -1 with `e` naming what is wrong. max_rank 0 = TILE_MAX_RANK. */
int tile_npy_parse_header(const void *buf, size_t len, int max_rank, struct tile_npy_header *h,
                          struct tile_error *e);

/* Decodes a whole .npy image into `out` (owned; host order, C order; strings
 * as UTF-8 views into an owned blob). `max_bytes` bounds the decoded element
 * buffer (0 = none). `h` may be NULL; if not, it receives the header. */
int tile_npy_decode(const void *buf, size_t len, int max_rank, uint64_t max_bytes, struct tile_tensor *out,
                    struct tile_npy_header *h, struct tile_error *e);

/* Writes the header for a C-order little-endian array into buf (a multiple
 * of 64 bytes; version 1.0 when it fits, else 2.0, 3.0 when the dict needs
 * UTF-8). For strings, `strkind` and `strwidth` give the element form.
 * Returns the header length, or -1 (`e` filled) if it does not fit `cap`
 * or the dtype has no .npy form. */
long tile_npy_write_header(char *buf, size_t cap, enum tile_dtype dtype, int rank, const int64_t *shape,
                           enum tile_npy_strkind strkind, uint64_t strwidth, struct tile_error *e);

/* Bytes per element a string tensor needs in .npy: for 'U' the longest
 * string in code points (x4 bytes per element), for 'S' the longest in
 * bytes; at least 1. Fills *width with the chars/bytes count. */
uint64_t tile_npy_string_itemsize(const struct tile_str *s, uint64_t n, enum tile_npy_strkind kind,
                                  uint64_t *width);

/* Converts `n` string views to fixed-width .npy elements of `width`
 * chars/bytes (NUL padded) at dst. Strings longer than width are an
 * error (-1). Invalid UTF-8 in a 'U' conversion is an error. */
int tile_npy_encode_strings(const struct tile_str *s, uint64_t n, enum tile_npy_strkind kind, uint64_t width,
                            void *dst, struct tile_error *e);

/* Writes `t` as a complete .npy file to `f`. */
int tile_npy_write_file(FILE *f, const struct tile_tensor *t, enum tile_npy_strkind strkind, uint64_t strwidth,
                        struct tile_error *e);

#endif
