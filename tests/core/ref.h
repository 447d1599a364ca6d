/* ref.h - helpers shared by the core unit tests: a seeded random generator,
 * random tile problems and a naive reference oracle for tiling.
 *
 * The oracle re-derives everything from the specifications (rank promotion,
 * per-semantics rules, index arithmetic) without using plan.c's collapsed
 * levels or kernel.c, so comparing the library against it checks both.
 */
#ifndef TILED_TESTS_REF_H
#define TILED_TESTS_REF_H

#include <stddef.h>
#include <stdint.h>

#include "tile.h"

/* splitmix64: tiny, fast, and every seed gives a full-period stream. */
struct ref_rng {
    uint64_t state;
};

void ref_rng_seed(struct ref_rng *r, uint64_t seed);
uint64_t ref_rng_next(struct ref_rng *r);
/* Uniform in [0, n); 0 when n is 0. */
uint64_t ref_rng_below(struct ref_rng *r, uint64_t n);
/* Uniform in [lo, hi]. */
int64_t ref_rng_range(struct ref_rng *r, int64_t lo, int64_t hi);
/* True with probability 1/n. */
int ref_rng_one_in(struct ref_rng *r, uint64_t n);
void ref_rng_fill(struct ref_rng *r, void *buf, size_t n);

/* The base seed of a test run: TILED_TEST_SEED from the environment (decimal
 * or 0x hex) when set, else `fallback`. */
uint64_t ref_base_seed(uint64_t fallback);
/* An independent seed for case number `index` of a run with seed `base`. */
uint64_t ref_case_seed(uint64_t base, uint64_t index);

/* One tile request, described the way a client would send it. */
struct ref_case {
    enum tile_semantics sem;
    enum tile_dtype dtype;
    int rank;
    int64_t shape[TILE_MAX_RANK];
    int nrepeats;
    int64_t repeats[TILE_MAX_RANK];
    int64_t tiles; /* onnx1 */
    int64_t axis;  /* onnx1 */
};

/* The case after the specification's rules: shape and repeats promoted to a
 * common rank, and the output shape. */
struct ref_problem {
    int rank;
    int64_t in_shape[TILE_MAX_RANK];
    int64_t repeats[TILE_MAX_RANK];
    int64_t out_shape[TILE_MAX_RANK];
    uint64_t in_elems, out_elems;
};

/* Applies the rules of c->sem. Returns 0, or -1 when the specification
 * rejects the case (sizes are assumed not to overflow). */
int ref_expand(const struct ref_case *c, struct ref_problem *p);

/* The tile_spec that asks the library for case `c` (no limits). */
struct tile_spec ref_spec(const struct ref_case *c);

/* Flat index of the input element that output element `out_index` copies. */
uint64_t ref_source_index(const struct ref_problem *p, uint64_t out_index);

/* Writes the whole output of `p` for elements of `elem_size` bytes. */
void ref_tile(const struct ref_problem *p, size_t elem_size, const void *in, void *out);

/* Human-readable description of a case, for failure messages. */
const char *ref_describe(const struct ref_case *c, char *buf, size_t cap);

/* Draws a random case: a dtype from `dtype` (or any when TILE_DTYPE_INVALID),
 * rank 0..10 (now and then 12..64), dims mostly 0..4, repeats mostly 0..4,
 * tiles 0..4 and axis mostly in range, with the output kept to at most
 * `max_out_elems` elements (4x that for onnx1). The repeats usually match the
 * rank, so every semantics sees cases it accepts; now and then a repeat, the
 * tiles or the axis breaks a rule. c->sem is left as TILE_SEM_ONNX. */
void ref_random_case(struct ref_rng *r, enum tile_dtype dtype, uint64_t max_out_elems, struct ref_case *c);

#endif
