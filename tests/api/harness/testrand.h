/* testrand.h - the api tests' random inputs: a seeded xorshift64 generator
 * (each test file keeps its own state, so its sequence is its own) and
 * random plain JSON integer literals. */
#ifndef TILED_TESTRAND_H
#define TILED_TESTRAND_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t testrand_next(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* A plain integer literal of 1..max_digits digits, no leading zero, negative
 * half the time, into s (max_digits + 2 bytes). */
static inline void testrand_int_literal(char *s, uint64_t *state, int max_digits)
{
    int ndig = 1 + (int)(testrand_next(state) % (uint64_t)max_digits);
    size_t o = 0;
    if (testrand_next(state) & 1)
        s[o++] = '-';
    for (int k = 0; k < ndig; k++)
        s[o++] = (char)((k == 0 ? '1' : '0') + testrand_next(state) % (k == 0 ? 9 : 10));
    s[o] = '\0';
}

#endif
