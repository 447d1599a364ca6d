/* accept.h - the elements of an Accept or Accept-Encoding header and their
 * weights (RFC 9110 sections 12.4.2, 12.5.1 and 12.5.3).
 *
 * One reader serves both negotiations (the /v1 response format, v1.c, and
 * the response coding, compress.c), so a weight means the same in both:
 * `q=` anywhere else than as a parameter of its own ("xq=1") is not a
 * weight, and a weight that is not a qvalue ("q=2", "q=0.5000", "q=nan",
 * "q=1e0") makes its element unacceptable (q 0) rather than guessed at.
 * A ',' or ';' inside a quoted parameter value (charset="a,b;q=0") is part
 * of the value; an unclosed quoted string runs to the end of the header.
 * tests/server/test_accept_differential.py compares both negotiations with
 * werkzeug's reading of the same headers.
 */
#ifndef TILED_ACCEPT_H
#define TILED_ACCEPT_H

#include <stdbool.h>
#include <stddef.h>

struct tiled_accept_elem {
    const char *name; /* the media range or coding, without parameters or spaces */
    size_t name_len;
    int q; /* weight in thousandths: 0..1000 (1000 when not given) */
};

/* Reads the element at *p into *el and moves *p past it; false when the
 * list has no more elements. Empty elements (",,") are skipped. */
bool tiled_accept_next(const char **p, struct tiled_accept_elem *el);

#endif
