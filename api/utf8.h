/* utf8.h - UTF-8, the one implementation every codec and log line uses.
 *
 * Valid means RFC 3629: no overlong forms, no surrogates (U+D800..DFFF),
 * nothing above U+10FFFF. JSON text, protobuf string fields, .npy unicode
 * elements and the access log all need the same answer, so there is one
 * validator; a second one that disagreed on an edge (an overlong E0 80 80,
 * say) would let one transport accept what another refuses.
 */
#ifndef TILE_UTF8_H
#define TILE_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Length (2..4) of the valid multi-byte sequence at p, of which n bytes
 * are readable; 0 when p[0] is ASCII, a stray continuation byte, or the
 * sequence is invalid or cut short. */
size_t tile_utf8_seq(const unsigned char *p, size_t n);

/* True when s[0, len) is valid UTF-8; otherwise false, with the offset of
 * the first bad byte in *bad (when bad is not NULL). */
bool tile_utf8_valid(const char *s, size_t len, size_t *bad);

/* Writes code point cp (at most U+10FFFF, not a surrogate: the caller's
 * promise) at out, which has room for 4 bytes; returns the bytes written. */
size_t tile_utf8_put(uint32_t cp, char *out);

/* Decodes one code point of already validated UTF-8 at *p and advances *p
 * past it. */
uint32_t tile_utf8_next(const uint8_t **p);

#endif
