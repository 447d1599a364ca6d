/* fuzz_common.h - what the libFuzzer targets share: small limits, tensor
 * invariants, and the checks run on every decoded request.
 *
 * A decoded request goes through the server's own path (spec, plan,
 * encoder) in every output format, and each body is checked against an
 * independent result: tile_execute() into a plain tensor. JSON bodies are
 * lexed and their data read back, raw bodies compared byte for byte (or
 * read back as length-prefixed strings), .npy bodies decoded again. Every
 * body is also produced a second time in small pieces of varying size and
 * must come out identical. A mismatch calls fuzz_fail(), which aborts so
 * that libFuzzer records the input.
 */
#ifndef TILE_FUZZ_COMMON_H
#define TILE_FUZZ_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "encode.h"
#include "jsondata.h"
#include "request.h"
#include "tile.h"

/* Bound on bodies, decoded tensors and outputs: the fuzzer must not be able
 * to make the process allocate more than a few of these. */
#define FUZZ_MAX_BYTES (1u << 20)

extern const struct tile_limits fuzz_limits;

void fuzz_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

#define FUZZ_CHECK(cond, ...)                                                                                          \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            fuzz_fail(__VA_ARGS__);                                                                                    \
    } while (0)

/* A decoder's result: an error with a code and a message, or success with
 * no error recorded. With FUZZ_VERBOSE set in the environment, each result
 * is printed (to see why an input is refused). */
void fuzz_check_result(int rc, const struct tile_error *e, const char *what);

/* Structural invariants of a decoded tensor: valid dtype, rank within the
 * limit, nelem the product of the shape, string views inside the blob. */
void fuzz_check_tensor(const struct tile_tensor *t, int max_rank);

/* Equal dtype, shape and elements. With `json`, values compare as JSON
 * carries them: booleans by truth, all NaNs of a float type alike, and
 * strings exactly. With `npy_strings`, trailing NUL bytes of the strings of
 * `want` are ignored (.npy strings are NUL padded). */
bool fuzz_tensor_equal(const struct tile_tensor *got, const struct tile_tensor *want, bool json, bool npy_strings);

/* Aborts unless two decodes of one body - by the decoders' one-pass reader
 * (api/jsonquick.h) and by their general reader - gave the same request:
 * the input bit for bit, repeats, semantics, tiles and axis. */
void fuzz_check_same_request(const struct tile_request *quick, const struct tile_request *general);

/* Aborts unless buf[0, len) is one complete JSON document. */
void fuzz_check_json(const char *buf, size_t len, const char *what);

/* Plans `r` with the fuzz limits and, when the plan is accepted, encodes
 * the output in every /v1 format with all the checks above. */
void fuzz_encode_request(const struct tile_request *r);

/* The expected output of `plan` on `in`, computed by tile_execute(). Returns
 * -1 when it cannot be allocated (not a failure of the code under test). */
int fuzz_expected_output(const struct tile_plan *plan, const struct tile_tensor *in, struct tile_tensor *out);

/* Reads an encoder's whole body twice: once in one call (into a malloc'd
 * buffer returned through *body, tile_encoder_size() bytes) and once from
 * `again` (an encoder initialised the same way) in pieces of varying size;
 * aborts unless both are complete and identical. */
void fuzz_read_body(struct tile_encoder *enc, struct tile_encoder *again, char **body);

/* A copy of `r` whose input borrows r's buffers, for an encoder to take
 * over while r keeps them (the copy frees nothing). */
struct tile_request fuzz_borrowed_request(const struct tile_request *r);

/* Reads JSON data text `data` (the elements between a '[' and a ']') as a
 * tensor of the plan's dtype and output shape and compares it with `want`. */
void fuzz_check_json_data(const char *data, uint64_t len, const struct tile_plan *plan,
                          enum tile_json_complex form, const struct tile_tensor *want);

/* Compares raw wire data (element bytes, or length-prefixed strings) with
 * `want`. */
void fuzz_check_raw_data(const char *data, uint64_t len, const struct tile_plan *plan,
                         const struct tile_tensor *want);

#endif
