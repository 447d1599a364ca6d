/* plan.h - validating a tile request and planning its execution.
 *
 * tile_plan_init() applies the rules of the chosen specification to a dtype,
 * a shape and the repeats, computes the output shape with checked
 * arithmetic, enforces the caller's output-size limit, and collapses the
 * problem into the fewest "levels" the kernel needs (see kernel.c). It
 * allocates nothing; a plan is a plain value that can be copied and shared
 * read-only between threads.
 */
#ifndef TILE_PLAN_H
#define TILE_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "dtype.h"
#include "error.h"
#include "tensor.h"

enum tile_semantics {
    TILE_SEM_ONNX,     /* ONNX Tile-6/13: one repeat per axis, repeats >= 0 */
    TILE_SEM_ONNX1,    /* ONNX Tile-1: `tiles` copies along `axis`; float types only */
    TILE_SEM_NUMPY,    /* numpy.tile: rank promotion both ways, repeats >= 0 */
    TILE_SEM_OPENVINO, /* OpenVINO Tile-1: same promotion as numpy */
    TILE_SEM_DIRECTML, /* DML_TILE_OPERATOR_DESC: rank 1..8, repeats > 0 */
    TILE_SEM_COUNT
};

const char *tile_semantics_name(enum tile_semantics s);
/* Case-insensitive; `len` bytes of `name`. -1 (and `e` filled) when unknown. */
int tile_semantics_parse(const char *name, size_t len, enum tile_semantics *out, struct tile_error *e);

/* What the caller asks for. `repeats` is borrowed for the call only. */
struct tile_spec {
    enum tile_semantics semantics;
    const int64_t *repeats; /* onnx, numpy, openvino, directml */
    int nrepeats;
    int64_t tiles;          /* onnx1 */
    int64_t axis;           /* onnx1; negative counts from the end */
    uint64_t max_output_bytes; /* 0 = no limit */
    int max_rank;           /* 0 = TILE_MAX_RANK */
};

struct tile_plan {
    enum tile_dtype dtype;
    uint64_t elem_size;
    int out_rank;
    int64_t in_shape[TILE_MAX_RANK]; /* input shape promoted to out_rank */
    int64_t repeats[TILE_MAX_RANK];  /* repeats promoted to out_rank */
    int64_t out_shape[TILE_MAX_RANK];
    uint64_t in_elems, in_bytes;
    uint64_t out_elems, out_bytes;   /* strings: bytes of the tile_str views */
    uint64_t repeat_product;         /* how often each input element appears */

    /* Collapsed form used by the kernel. Level l's output block is lev_rep[l]
     * copies of a "tile" of lev_in[l] sub-blocks (the innermost level counts
     * bytes). Levels with repeat 1 are merged into their outer neighbour and
     * size-1 axes into their inner one, so large problems often need 1-2 levels. */
    int nlev;                        /* 0 when the output is empty */
    uint64_t lev_in[TILE_MAX_RANK];
    uint64_t lev_rep[TILE_MAX_RANK];
    uint64_t lev_sub[TILE_MAX_RANK];       /* output bytes of one sub-block */
    uint64_t lev_in_stride[TILE_MAX_RANK]; /* input bytes per sub-block */
    uint64_t lev_tile[TILE_MAX_RANK];      /* lev_in * lev_sub */
};

/* Validates and plans tiling a `rank`-dimensional `shape` tensor of `dtype`.
 * Returns 0, or -1 with `e` naming the violated rule and the values. */
int tile_plan_init(struct tile_plan *plan, enum tile_dtype dtype, int rank, const int64_t *shape,
                   const struct tile_spec *spec, struct tile_error *e);

/* Copies `src` to `out`: the fields every plan reader uses (the arrays up
 * to out_rank and nlev entries, which is all a plan holds; a struct
 * assignment would copy 4 KiB). */
void tile_plan_copy(const struct tile_plan *src, struct tile_plan *out);

/* Re-plans the same problem for elements of `elem_size` bytes (e.g. to tile
 * an index array or fixed-width text with the layout of `src`). Limits are
 * not re-checked: the result has the same element counts. */
void tile_plan_with_elem_size(const struct tile_plan *src, uint64_t elem_size, struct tile_plan *out);

/* Folding the innermost level: when the input's innermost rows are short,
 * the kernel first writes each row repeated (the innermost level's whole
 * block) into a scratch input, then tiles that input with one level fewer,
 * whose innermost rows are the longer, contiguous expanded blocks. This
 * turns many tiny copies into few long ones (a [..,7]x[..,4] float32 input
 * copies 28 bytes at a time otherwise).
 *   tile_plan_can_fold_inner: there are 2+ levels and the innermost repeats;
 *   tile_plan_folded_in_bytes: the size of the scratch input;
 *   tile_plan_fold_inner: the plan over that scratch input (same output).
 * Only the level fields and in_bytes of `out` differ from `src`. */
bool tile_plan_can_fold_inner(const struct tile_plan *plan);
uint64_t tile_plan_folded_in_bytes(const struct tile_plan *plan);
void tile_plan_fold_inner(const struct tile_plan *src, struct tile_plan *out);

/* Bytes a string output takes in the 4-byte-length-prefixed wire layout,
 * given the input's total string bytes; checked against `limit` (0 = none).
 * Returns 0 and stores the size in *out, or -1 with `e` filled. */
int tile_plan_string_wire_bytes(const struct tile_plan *plan, uint64_t in_string_bytes, uint64_t limit,
                                uint64_t *out, struct tile_error *e);

#endif
